"""The Python SDK against a real Tansu broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from memstream.events import EventIn, parse_event
from memstream.kafka.reading import high_watermarks
from memstream.kafka.topics import RAW, ensure_topics
from memstream.metrics import EVENTS_PRODUCED
from memstream.sdk import (
    BrokerUnavailableError,
    DeliveryError,
    EventRefusedError,
    EventTooLargeError,
    MemoryClient,
    TopicMissingError,
    emit_by_tenant,
)
from memstream.settings import Settings
from memstream.stack.net import free_port
from memstream.stack.servers import start_tansu
from topicread import records_for


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


def _tenant() -> str:
    return f"sdk-{uuid.uuid4().hex[:10]}"


def _raw_for(bootstrap: str, tenant: str) -> list[tuple[str, bytes]]:
    return records_for(bootstrap, RAW, tenant)


def _produced() -> float:
    return float(EVENTS_PRODUCED.labels(component="sdk", topic=RAW)._value.get())


def test_emitted_events_land_in_raw_with_tenant_stream_key(topics: str) -> None:
    tenant = _tenant()
    before = _produced()
    with MemoryClient(topics, tenant, agent="planner") as client:
        first = client.emit("s1", "message.user", {"text": "I moved to Lisbon"})
        second = client.emit(
            "s2",
            "fact.asserted",
            {"subject": "user", "predicate": "lives_in", "object": "Lisbon"},
            id="fact-1",
            parent_id=first,
            caused_by=[first],
            metadata={"lang": "en"},
            security={"sensitivity": "confidential"},
        )
        client.flush()
        assert client.delivered == 2 and client.failed == 0
    assert second == "fact-1"
    assert _produced() - before == 2

    records = _raw_for(topics, tenant)
    by_id = {parse_event(v).id: (k, parse_event(v)) for k, v in records}
    assert set(by_id) == {first, "fact-1"}
    key, ev = by_id[first]
    assert key == f"{tenant}/s1"
    assert ev.type == "message.user" and ev.agent == "planner" and ev.tenant == tenant
    key, ev = by_id["fact-1"]
    assert key == f"{tenant}/s2"
    assert ev.parent_id == first and ev.caused_by == [first]
    assert ev.security.sensitivity == "confidential" and ev.metadata == {"lang": "en"}


def test_per_stream_order_is_kept(topics: str) -> None:
    tenant = _tenant()
    with MemoryClient(topics, tenant) as client:
        ids = [client.emit("chat", "observation", {"text": f"step {i}"}) for i in range(50)]
    got = [parse_event(v).id for _, v in _raw_for(topics, tenant)]
    assert got == ids


def test_emit_event_and_emit_many(topics: str) -> None:
    tenant = _tenant()
    now = datetime.now(UTC)
    with MemoryClient(topics, tenant) as client:
        prebuilt = EventIn(stream="a", type="message.user", payload={"text": "hi"}).complete(
            tenant, now=now
        )
        assert client.emit_event(prebuilt) == prebuilt.id
        ids = client.emit_many(
            [
                EventIn(stream="b", type="task.started", payload={"task_id": "t1"}),
                EventIn(id="x-2", stream="b", type="observation", payload={"text": "ok"}),
            ]
        )
        assert ids[1] == "x-2"
    got = {parse_event(v).id: k for k, v in _raw_for(topics, tenant)}
    assert got == {prebuilt.id: f"{tenant}/a", ids[0]: f"{tenant}/b", "x-2": f"{tenant}/b"}


def test_emit_by_tenant_sends_each_envelope_under_its_own_tenant(topics: str) -> None:
    a, b = _tenant(), _tenant()
    events = [
        EventIn(stream=f"s{i}", type="observation", payload={"text": f"n{i}"}).complete(t)
        for i, t in enumerate([a, b, a, b, a])
    ]
    assert emit_by_tenant(topics, events) == 5
    for tenant, want in ((a, [0, 2, 4]), (b, [1, 3])):
        got = {parse_event(v).id: k for k, v in _raw_for(topics, tenant)}
        assert got == {events[i].id: f"{tenant}/s{i}" for i in want}


def test_invalid_input_raises_before_anything_is_produced(topics: str) -> None:
    tenant = _tenant()
    before = high_watermarks(topics, RAW)
    with MemoryClient(topics, tenant) as client:
        with pytest.raises(EventRefusedError, match="text"):
            client.emit("s", "message.user", {"txt": "typo"})
        with pytest.raises(EventRefusedError):
            client.emit("s", "no.such.type", {"text": "x"})
        with pytest.raises(EventRefusedError, match="stream"):
            client.emit("bad stream/", "message.user", {"text": "x"})
        with pytest.raises(EventRefusedError) as refused:
            # One bad event stops the whole batch, in one line naming it and its field.
            client.emit_many(
                [
                    EventIn(stream="s", type="message.user", payload={"text": "fine"}),
                    {"id": "e-2", "stream": "s", "type": "message.user", "payload": {"text": "ok"}},
                    EventIn(id="e-3", stream="s", type="message.user", payload={}),
                ]
            )
        assert str(refused.value).startswith("event 2 (e-3): payload.text: Field required")
        assert "\n" not in str(refused.value) and refused.value.field == "payload.text"
        other = EventIn(stream="s", type="message.user", payload={"text": "x"}).complete("other")
        with pytest.raises(ValueError, match="tenant"):
            client.emit_event(other)
        assert client.delivered == 0
    assert high_watermarks(topics, RAW) == before
    assert _raw_for(topics, tenant) == []


def test_invalid_tenant_is_refused(topics: str) -> None:
    with pytest.raises(ValueError, match="invalid tenant"):
        MemoryClient(topics, "a/b")


def test_unreachable_broker_fails_fast_naming_the_address() -> None:
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(BrokerUnavailableError, match=address):
        MemoryClient(address, "acme", connect_timeout=1.0)
    assert time.monotonic() - started < 5


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[tuple[str, object]]:
    """A broker this test may stop without disturbing the shared one."""
    server = start_tansu(free_port(), tmp_path)
    try:
        yield f"127.0.0.1:{server.port}", server
    finally:
        server.stop()


def test_missing_raw_topic_is_a_clear_error(own_broker: tuple[str, object]) -> None:
    bootstrap, _ = own_broker
    with pytest.raises(TopicMissingError, match=RAW):
        MemoryClient(bootstrap, "acme", connect_timeout=5.0)
    # The check must not have auto-created the topic with a default partition count.
    assert high_watermarks(bootstrap, RAW) == {}


def test_delivery_failure_is_reported_by_flush(own_broker: tuple[str, object]) -> None:
    bootstrap, server = own_broker
    ensure_topics(bootstrap, Settings())
    overrides: dict[str, Any] = {"message.timeout.ms": 1500}
    client = MemoryClient(bootstrap, "acme", **overrides)
    server.stop()  # type: ignore[attr-defined]
    event_id = client.emit("s", "message.user", {"text": "lost"})
    # The event fails after message.timeout.ms; flush returns as soon as it has, and the
    # bound only has to outlast a loaded machine's timeout scan (10 s once did not).
    with pytest.raises(DeliveryError) as info:
        client.flush(timeout=60)
    assert [f.event_id for f in info.value.failures] == [event_id]
    assert info.value.failures[0].key == "acme/s"
    assert client.failed == 1 and client.delivered == 0
    client.close()  # failures were already reported; nothing left to raise


def test_an_event_past_the_topics_record_limit_is_refused_before_anything_is_produced(
    own_broker: tuple[str, object],
) -> None:
    """The limit is read from the topics the stack created (here 100,000 bytes, under the
    client's own 1 MiB): a batch holding one event that could pass it produces nothing."""
    bootstrap, _ = own_broker
    ensure_topics(bootstrap, Settings(max_record_bytes=100_000))
    with MemoryClient(bootstrap, "acme") as client:
        assert (client.limit.bytes, client.limit.source) == (
            100_000, "max.message.bytes of memory.events.raw"
        )  # fmt: skip
        small = EventIn(stream="s", type="observation", payload={"text": "ok"})
        big = EventIn(stream="s", type="tool.result",
                      payload={"tool": "fetch", "output": "ø" * 40_000}, id="big-1")  # fmt: skip
        with pytest.raises(EventTooLargeError) as info:
            client.emit_many([small, big, small])
        assert [(o.index, o.event_id) for o in info.value.oversized] == [(1, "big-1")]
        assert "record limit of 100000 bytes" in str(info.value)
        with pytest.raises(EventTooLargeError):
            client.emit("s", "tool.result", {"tool": "fetch", "output": "x" * 80_000})
        kept = client.emit("s", "tool.result", {"tool": "fetch", "output": "x" * 60_000})
        client.flush()
    assert [k for k, _ in _raw_for(bootstrap, "acme")] == ["acme/s"]  # only the one that fits
    assert kept
