"""HTTP ingest against a real Tansu broker: auth, whole-batch validation, delivery."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from memstream import position
from memstream.events import Event, EventAdapter
from memstream.kafka.reading import high_watermarks, read_to_end
from memstream.kafka.topics import RAW, ensure_topics
from memstream.keys import KeyStore
from memstream.ledger.opening import EntryOpener
from memstream.metrics import EVENTS_PRODUCED, EVENTS_RECEIVED, EVENTS_REJECTED
from memstream.projection.embedded import ensure_default_version
from memstream.settings import Settings
from memstream.shred.sqlite import SqliteDataKeys
from memstream.stack.epoch import new_epoch
from memstream.stack.net import free_port
from memstream.stack.servers import start_tansu
from memstream_api.app import create_app
from memstream_api.context import context_of
from memstream_api.main import main
from scratchtopics import tenant_reach
from stackproc import wait_until
from topicread import records_for


@dataclass
class Api:
    client: TestClient
    bootstrap: str
    tenant: str
    key: str
    data_dir: Path

    def event(self, value: bytes) -> Event:
        """A raw record's event, opened with the API's data keys (raw is sealed)."""
        keys = SqliteDataKeys(Settings(data_dir=self.data_dir).data_keys_path)
        try:
            return EventAdapter.validate_python(EntryOpener(keys)(orjson.loads(value)))
        finally:
            keys.close()

    def post(self, body: Any, key: str | None = None) -> Any:
        headers = {"Authorization": f"Bearer {key or self.key}"}
        return self.client.post("/v1/events", json=body, headers=headers)


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


@pytest.fixture
def api(topics: str, tmp_path: Path) -> Iterator[Api]:
    settings = Settings(data_dir=tmp_path)
    tenant = f"api-{uuid.uuid4().hex[:10]}"
    key = KeyStore.from_settings(settings).create(tenant)
    with TestClient(create_app(settings, topics)) as client:
        yield Api(client, topics, tenant, key, tmp_path)


def _msg(stream: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"stream": stream, "type": "message.user", "payload": {"text": text}, **extra}


def _value(metric: Any, **labels: str) -> float:
    return float(metric.labels(**labels)._value.get())


def test_missing_or_bad_key_is_401_with_reason(api: Api) -> None:
    r = api.client.post("/v1/events", json=_msg("s", "hi"))
    assert r.status_code == 401
    assert "Authorization" in r.json()["detail"]
    assert r.headers["www-authenticate"] == "Bearer"

    r = api.post(_msg("s", "hi"), key="ms_nope_nope")
    assert r.status_code == 401 and r.json()["detail"] == "invalid API key (unknown or revoked)"

    r = api.client.post(
        "/v1/events", json=_msg("s", "hi"), headers={"Authorization": f"Basic {api.key}"}
    )
    assert r.status_code == 401 and "Bearer" in r.json()["detail"]


def test_key_created_while_running_is_accepted(api: Api, tmp_path: Path) -> None:
    # The CLI writes the key file while the API runs; no restart needed.
    other = KeyStore.from_settings(Settings(data_dir=tmp_path)).create(api.tenant)
    assert api.post(_msg("s", "hi"), key=other).status_code == 202


def test_single_event_is_accepted_and_lands_keyed_by_tenant_stream(api: Api) -> None:
    received = _value(EVENTS_RECEIVED, component="api")
    produced = _value(EVENTS_PRODUCED, component="api", topic=RAW)
    r = api.post(_msg("chat-1", "I prefer window seats", id="evt-1"))
    assert r.status_code == 202, r.text
    assert r.json() == {"accepted": 1, "ids": ["evt-1"], "position": r.json()["position"]}
    assert _value(EVENTS_RECEIVED, component="api") - received == 1
    assert _value(EVENTS_PRODUCED, component="api", topic=RAW) - produced == 1

    ((key, value),) = records_for(api.bootstrap, RAW, api.tenant)
    assert key == f"{api.tenant}/chat-1"
    assert b"window" not in value  # sealed before its first copy is written
    event = api.event(value)
    assert event.id == "evt-1" and event.tenant == api.tenant and event.agent == "api"
    assert event.type == "message.user"


def test_batch_is_accepted_in_order(api: Api) -> None:
    events = [_msg("a", f"turn {i}") for i in range(5)] + [
        {"stream": "b", "type": "task.started", "payload": {"task_id": "t1"}, "agent": "planner"},
        _msg("a", "with tenant", tenant=api.tenant),
    ]
    r = api.post({"events": events})
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["accepted"] == 7 and len(set(body["ids"])) == 7

    records = records_for(api.bootstrap, RAW, api.tenant)
    by_stream: dict[str, list[str]] = {}
    for key, value in records:
        by_stream.setdefault(key, []).append(api.event(value).id)
    ids = body["ids"]
    assert by_stream == {
        f"{api.tenant}/a": [*ids[:5], ids[6]],
        f"{api.tenant}/b": [ids[5]],
    }
    agents = {api.event(v).agent for _, v in records}
    assert agents == {"api", "planner"}


@pytest.mark.parametrize("outbox", [True, False], ids=["outbox", "no-outbox"])
def test_accepted_carries_position(topics: str, tmp_path: Path, outbox: bool) -> None:
    epoch = new_epoch(tmp_path)
    settings = Settings(data_dir=tmp_path, outbox=outbox, outbox_ack_wait_s=60.0)
    tenant = f"pos-{uuid.uuid4().hex[:10]}"
    key = KeyStore.from_settings(settings).create(tenant)
    secret = SqliteDataKeys(settings.data_keys_path).tenant_secret(tenant)
    auth = {"Authorization": f"Bearer {key}"}
    with TestClient(create_app(settings, topics)) as client:

        def post(events: list[dict[str, Any]]) -> position.Position:
            r = client.post("/v1/events", json={"events": events}, headers=auth)
            assert r.status_code == 202, r.text
            assert r.json()["position"].startswith("ms1.")  # signed: the API has the keys
            return position.verify(r.json()["position"], tenant, secret)

        first = post([_msg(f"chat.{i}", f"Straße n° {i}") for i in range(16)])
        assert first.tenant == tenant and first.epoch == epoch and not first.unacknowledged
        assert (first.segment is not None) is outbox
        assert len(first.raw) > 1  # sixteen streams reach several partitions
        assert first.raw == tenant_reach(topics, RAW, tenant)  # exactly the offsets written
        second = post([_msg(f"chat.{i}", f"encore {i}, déjà") for i in range(16)])
        assert set(second.raw) == set(first.raw)
        assert all(second.raw[p] > first.raw[p] for p in first.raw)
        assert second.raw == tenant_reach(topics, RAW, tenant)
        one = post([_msg("one-stream", f"one {i}\tÉcole") for i in range(3)])
        ((partition, offset),) = one.raw.items()  # one key: one partition, named alone
        assert offset == tenant_reach(topics, RAW, tenant)[partition]
        with pytest.raises(position.ForeignPosition):
            position.verify(position.encode(one, secret), "someone-else", secret)
        # feedback's position: tests/test_e2e_learning.py (its targets must be in memory)


def test_invalid_event_rejects_whole_batch_and_produces_nothing(api: Api) -> None:
    before = high_watermarks(api.bootstrap, RAW)
    rejected = _value(EVENTS_REJECTED, component="api", reason="invalid")
    events = [
        _msg("s", "fine"),
        _msg("s", "fine too"),
        {"stream": "s", "type": "message.user", "payload": {"txt": "typo"}},
    ]
    r = api.post({"events": events})
    assert r.status_code == 422
    body = r.json()
    assert body["detail"].startswith("events[2].payload.text: Field required")
    assert body["errors"][0]["index"] == 2 and body["errors"][0]["field"] == "payload.text"
    assert _value(EVENTS_REJECTED, component="api", reason="invalid") - rejected == 3

    r = api.post(_msg("s", "x") | {"type": "no.such.type"})
    assert r.status_code == 422 and r.json()["detail"].startswith("event.type:")

    r = api.post({"events": [_msg("s", "ok"), 42]})
    assert r.status_code == 422 and r.json()["detail"].startswith("events[1]:")

    r = api.post({"events": [_msg("bad/stream", "x")]})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "stream"

    bad: Any
    for bad in ([_msg("s", "x")], {"events": []}, {"events": "x"}, {"events": [], "more": 1}):
        assert api.post(bad).status_code == 422
    r = api.client.post(
        "/v1/events",
        content=b"{not json",
        headers={"Authorization": f"Bearer {api.key}", "Content-Type": "application/json"},
    )
    assert r.status_code == 422 and "not valid JSON" in r.json()["detail"]

    assert high_watermarks(api.bootstrap, RAW) == before
    assert records_for(api.bootstrap, RAW, api.tenant) == []


def test_a_lone_surrogate_is_named_by_event_and_field(api: Api) -> None:
    # Valid JSON, not valid Unicode: pydantic's parser refuses the body as a whole.
    body = (
        b'{"events": [{"stream": "s", "type": "message.user", "payload": {"text": "ok"}},'
        b' {"stream": "s", "type": "message.user", "payload": {"text": "a\\ud800"}}]}'
    )
    headers = {"Authorization": f"Bearer {api.key}", "Content-Type": "application/json"}
    r = api.client.post("/v1/events", content=body, headers=headers)
    assert r.status_code == 422
    problem = "holds a lone surrogate at index 1: text must be valid Unicode"
    assert r.json()["detail"] == f"events[1].payload.text: {problem}; nothing was accepted"
    assert r.json()["errors"] == [
        {"index": 1, "field": "payload.text", "message": problem, "type": "string_unicode"}
    ]
    assert records_for(api.bootstrap, RAW, api.tenant) == []


def test_event_naming_another_tenant_is_403(api: Api) -> None:
    before = high_watermarks(api.bootstrap, RAW)
    r = api.post({"events": [_msg("s", "mine"), _msg("s", "theirs", tenant="someone-else")]})
    assert r.status_code == 403
    assert "events[1]" in r.json()["detail"] and "someone-else" in r.json()["detail"]
    assert high_watermarks(api.bootstrap, RAW) == before


def test_oversized_batch_is_413(api: Api) -> None:
    before = high_watermarks(api.bootstrap, RAW)
    r = api.post({"events": [_msg("s", "x")] * 10_001})
    assert r.status_code == 413 and "10000" in r.json()["detail"]
    assert high_watermarks(api.bootstrap, RAW) == before


def test_body_over_the_byte_limit_is_413(topics: str, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, api_max_ingest_body_bytes=1000)
    key = KeyStore.from_settings(settings).create("acme")
    refused = _value(EVENTS_REJECTED, component="api", reason="too_large")
    with TestClient(create_app(settings, topics)) as client:
        r = client.post(
            "/v1/events",
            json=_msg("s", "x" * 2000),
            headers={"Authorization": f"Bearer {key}"},
        )
        assert r.status_code == 413 and "1000 bytes" in r.json()["detail"]
        # The ingest limit is the ingest route's: other routes have their own.
        assert client.post("/v1/recall", json={"query": "x" * 900}).status_code == 401
    assert _value(EVENTS_REJECTED, component="api", reason="too_large") - refused == 1


def test_healthz_metrics_and_openapi(api: Api) -> None:
    r = api.client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}

    api.post(_msg("s", "counted"))
    text = api.client.get("/metrics").text
    assert 'memstream_events_received_total{component="api"}' in text
    assert 'route="/v1/events"' in text and 'route="/healthz"' in text
    assert "memstream_http_request_seconds_bucket" in text

    spec = api.client.get("/openapi.json").json()
    assert "/v1/events" in spec["paths"] and "/healthz" in spec["paths"]
    schemas = spec["components"]["schemas"]
    assert {"EventIn", "EventBatch", "Security"} <= set(schemas)
    body = spec["paths"]["/v1/events"]["post"]["requestBody"]["content"]["application/json"]
    assert {"$ref": "#/components/schemas/EventBatch"} in body["schema"]["oneOf"]


def test_healthz_is_503_when_kafka_is_unreachable(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    with TestClient(create_app(Settings(data_dir=tmp_path), address)) as client:
        started = time.monotonic()
        r = client.get("/healthz")
        assert time.monotonic() - started < 10
    assert r.status_code == 503
    assert address in r.json()["reason"]


def test_without_an_outbox_a_delivery_failure_is_503_with_the_ids(tmp_path: Path) -> None:
    server = start_tansu(free_port(), tmp_path / "logs")
    bootstrap = f"127.0.0.1:{server.port}"
    try:
        ensure_topics(bootstrap, Settings())
        settings = Settings(data_dir=tmp_path, outbox=False)
        key = KeyStore.from_settings(settings).create("acme")
        app = create_app(settings, bootstrap, producer_overrides={"message.timeout.ms": 1500})
        with TestClient(app) as client:
            assert client.get("/healthz").status_code == 200
            server.stop()
            r = client.post(
                "/v1/events",
                json={"events": [_msg("s", "lost", id="lost-1")]},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert r.status_code == 503, r.text
            body = r.json()
            assert body["ids"] == ["lost-1"] and body["failed_ids"] == ["lost-1"]
            assert "not delivered" in body["detail"]
            assert client.get("/healthz").status_code == 503
    finally:
        server.stop()


def test_with_the_outbox_events_accepted_while_the_broker_is_down_reach_the_next_one(
    tmp_path: Path,
) -> None:
    port = free_port()
    server = start_tansu(port, tmp_path / "logs")
    bootstrap = f"127.0.0.1:{port}"
    try:
        ensure_topics(bootstrap, Settings())
        settings = Settings(data_dir=tmp_path, outbox_ack_wait_s=1.0)
        key = KeyStore.from_settings(settings).create("acme")
        ensure_default_version(settings)
        app = create_app(settings, bootstrap, project_vectors=True)
        with TestClient(app) as client:
            vectors = context_of(app).serving.vectors
            wait_until(lambda: "v1" in vectors.assigned_at, 60, "the vector loop's assignment")
            auth = {"Authorization": f"Bearer {key}"}
            r = client.post("/v1/events", json=_msg("s", "before", id="before-1"), headers=auth)
            assert r.status_code == 202, r.text  # the producer has delivered to this broker
            wait_until(lambda: "before-1" in raw_ids(bootstrap), 60, "delivery before the stop")
            server.stop()
            r = client.post(
                "/v1/events",
                json={"events": [_msg("s", "kept", id="kept-1"), _msg("s", "kept", id="kept-2")]},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert r.status_code == 202, r.text  # durable in the outbox: accepted
            pending = position.read(r.json()["position"]).position
            assert pending.unacknowledged and pending.segment is not None and not pending.raw
            spooled = b"".join(p.read_bytes() for p in settings.outbox_dir.glob("*.jsonl"))
            assert b"kept-1" in spooled and b"kept-2" in spooled
            started = time.time_ns()
            server = start_tansu(port, tmp_path / "logs")  # a new, empty broker
            ensure_topics(bootstrap, Settings())
            new_epoch(tmp_path, started)
            wanted = {"kept-1", "kept-2"}
            wait_until(lambda: wanted <= raw_ids(bootstrap), 90, "outbox re-send to it")
            # the producer that knew the old broker was replaced: new writes get through too
            r = client.post("/v1/events", json=_msg("s", "after", id="after-1"), headers=auth)
            assert r.status_code == 202, r.text
            wait_until(lambda: "after-1" in raw_ids(bootstrap), 60, "a write after the restart")
            # the vector projection reads the new broker's log from its start
            again = lambda: vectors.assigned_at["v1"] >= started / 1e9  # noqa: E731
            wait_until(again, 90, "the vector loop assigned on the new broker")
    finally:
        server.stop()


def raw_ids(bootstrap: str) -> set[str]:
    return {str(orjson.loads(m.value() or b"{}").get("id")) for m in read_to_end(bootstrap, RAW)}


def test_main_requires_a_bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSTREAM_KAFKA_BOOTSTRAP", raising=False)
    with pytest.raises(SystemExit) as info:
        main()
    assert "MEMSTREAM_KAFKA_BOOTSTRAP" in str(info.value.code)


# Numbers no store holds exactly: past signed 64 bits, NaN, infinities (1e400 reads as one).
# Written as raw JSON: the standard library would not write NaN into a request body for us.
INEXACT = ("1180591620717411303424", "-18446744073709551617", "18446744073709551616",
           "9223372036854775808", "1e400", "-1e400", "NaN", "Infinity", "-Infinity")  # fmt: skip
PLACES = {
    "metadata.n": '{"stream": "s", "type": "observation", "payload": {"text": "ok"}, '
    '"metadata": {"n": %s}}',
    "payload.value": '{"stream": "s", "type": "fact.asserted", "payload": {"subject": '
    '"the pump", "predicate": "pressure", "value": %s}}',
    "payload.output": '{"stream": "s", "type": "tool.result", "payload": {"tool": "probe", '
    '"output": {"rows": [1, %s]}}}',
    "payload.arguments": '{"stream": "s", "type": "tool.call", "payload": {"tool": "probe", '
    '"arguments": {"depth": %s}}}',
    "payload.confidence": '{"stream": "s", "type": "fact.asserted", "payload": {"subject": '
    '"the pump", "predicate": "state", "object": "on", "confidence": %s}}',
}


@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_number_no_store_holds_is_422_naming_its_field(api: Api, place: str) -> None:
    headers = {"Authorization": f"Bearer {api.key}", "Content-Type": "application/json"}
    ok = {"stream": "s", "type": "message.user", "payload": {"text": "fine"}}
    for number in INEXACT:
        if place == "payload.confidence" and number.lstrip("-").isdigit():
            continue  # an integer confidence is refused by its range, tested elsewhere
        bad = (PLACES[place] % number).encode()
        for body in (bad, b'{"events": [%s, %s]}' % (orjson.dumps(ok), bad)):
            r = api.client.post("/v1/events", content=body, headers=headers)
            assert r.status_code == 422, (place, number, r.status_code, r.text)
            detail = r.json()["detail"]
            assert place in detail and "nothing was accepted" in detail, detail
    assert records_for(api.bootstrap, RAW, api.tenant) == []


def test_the_widest_integers_the_stores_hold_are_kept_exactly(api: Api) -> None:
    top, bottom = 2**63 - 1, -(2**63)
    body = {"stream": "s", "type": "tool.result", "id": "wide",
            "payload": {"tool": "probe", "output": [top, bottom, 1.5e300]},
            "metadata": {"top": top, "bottom": bottom}}  # fmt: skip
    assert api.post(body).status_code == 202
    ((_, value),) = records_for(api.bootstrap, RAW, api.tenant)
    event = api.event(value)
    assert event.metadata == {"top": top, "bottom": bottom}
    assert event.payload.output == [top, bottom, 1.5e300]  # type: ignore[union-attr]


NOT_JSON = {
    "text/plain": ("text/plain", b'{"stream": "s"}'),
    "form": ("application/x-www-form-urlencoded", b"stream=s&type=observation"),
    "multipart": ("multipart/form-data; boundary=xx", b'--xx\r\n\r\n{"a": 1}\r\n--xx--\r\n'),
    "none": (None, b'{"stream": "s", "type": "observation", "payload": {"text": "hi"}}'),
}
BODY_ROUTES = (
    "/v1/events", "/v1/checkout", "/v1/recall", "/v1/feedback", "/v1/search",
    "/v1/summarize_recall", "/v1/invalidate", "/v1/invalidations/p-1/accept",
)  # fmt: skip


@pytest.mark.parametrize("kind", sorted(NOT_JSON))
def test_a_body_that_is_not_json_is_415_on_every_route_that_takes_one(api: Api, kind: str) -> None:
    media, body = NOT_JSON[kind]
    for path in BODY_ROUTES:
        headers = {"Authorization": f"Bearer {api.key}"}
        if media is not None:
            headers["Content-Type"] = media
        r = api.client.post(path, content=body, headers=headers)
        assert r.status_code == 415, (path, kind, r.status_code, r.text)
        assert r.json()["accepted"] == ["application/json"], r.text
        assert "application/json" in r.json()["detail"]
    assert records_for(api.bootstrap, RAW, api.tenant) == []
    # JSON with a charset, and a body-less accept, are not refused for their type
    headers = {"Authorization": f"Bearer {api.key}",
               "Content-Type": "application/json; charset=utf-8"}  # fmt: skip
    r = api.client.post("/v1/events", content=NOT_JSON["none"][1], headers=headers)
    assert r.status_code == 202, r.text
    r = api.client.post(
        "/v1/invalidations/p-1/accept", headers={"Authorization": headers["Authorization"]}
    )
    assert r.status_code != 415


def test_other_bodies_refuse_inexact_numbers_too(api: Api) -> None:
    headers = {"Authorization": f"Bearer {api.key}", "Content-Type": "application/json"}
    bodies = {
        "/v1/feedback": b'{"target_ids": ["x"], "signal": NaN}',
        "/v1/checkout": b'{"query": "where?", "k": 18446744073709551616}',
        "/v1/recall": b'{"query": "where?", "k": Infinity}',
        "/v1/search": b'{"query": "where?", "k": 1e400}',
    }
    for path, body in bodies.items():
        r = api.client.post(path, content=body, headers=headers)
        assert r.status_code == 422, (path, r.status_code, r.text)
