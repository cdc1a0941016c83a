"""Checkout traces sealed under a key per packet; what a purge shreds in memory.checkouts and
what it reports as left in the clear, on a real broker and a real key store."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer
from memstream.forget.purge import clear_event_reaches, trace_reaches
from memstream.forget.topics import Reach, purge_topics
from memstream.kafka.clients import make_producer
from memstream.kafka.dlq import dead_letter
from memstream.kafka.topics import CHECKOUTS, DLQ, LEDGER, RAW, ensure_topics
from memstream.learning.retrospective import read_trace
from memstream.learning.trace import CheckoutTrace
from memstream.settings import Settings
from memstream.shred.seal import SealBroken, seal_event
from memstream.shred.sqlite import SqliteDataKeys
from memstream.shred.traces import (
    TRACE_CLEAR_FIELDS,
    TraceOpener,
    TraceSealer,
    open_trace,
    seal_trace,
)
from memstream.text.names import entity_key, name_forms

SUBJECT = "Zoë Quist-Marlowe"
FORMS = name_forms(SUBJECT, entity_key(SUBJECT))
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def trace(packet: str, query: str, tenant: str = "t1", **extra: Any) -> dict[str, Any]:
    doc = CheckoutTrace(
        packet_id=packet,
        tenant=tenant,
        query=query,
        task_id=extra.pop("task_id", None),
        answerability="answer_from_memory",
        family={"operation": "lookup", "entities": extra.pop("entities", []), "terms": []},
        answer_ids=extra.pop("answer_ids", []),
        cited_ids=extra.pop("cited_ids", []),
        at=T0,
        version="v1",
    )
    return doc.model_dump(mode="json")


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[SqliteDataKeys]:
    store = SqliteDataKeys(tmp_path / "data-keys.sqlite")
    yield store
    store.close()


def test_a_sealed_trace_keeps_clear_only_what_routes_it() -> None:
    doc = trace("pk-1", "Where does Zoë Quist-Marlowe live?", task_id="task-9", cited_ids=["e-7"])
    key = bytes(range(32))
    sealed = seal_trace(doc, key)
    assert set(sealed) == TRACE_CLEAR_FIELDS | {"sealed"}
    assert sealed["task_id"] == "task-9" and sealed["packet_id"] == "pk-1"
    wire = orjson.dumps(sealed)
    assert b"Quist" not in wire and b"e-7" not in wire and b"lookup" not in wire
    assert open_trace(sealed, key) == doc
    assert seal_trace(sealed, key) == sealed  # sealing twice changes nothing
    with pytest.raises(SealBroken):  # moved onto another packet: it does not open
        open_trace({**sealed, "packet_id": "pk-2"}, key)
    with pytest.raises(SealBroken):
        open_trace(sealed, bytes(32))
    assert open_trace(doc, key) == doc  # a clear trace is read as it is


def test_the_key_store_seals_opens_and_shreds_traces(keys: SqliteDataKeys) -> None:
    sealer, opener = TraceSealer(keys), TraceOpener(keys)
    hers = orjson.loads(sealer.encode(trace("pk-her", "is zoe quist-marlowe in?")))
    his = orjson.loads(sealer.encode(trace("pk-his", "who fixed the lamp?")))
    assert "sealed" in hers and "sealed" in his
    assert opener(hers) is not None and opener(hers)["query"] == "is zoe quist-marlowe in?"
    assert keys.destroy("t1", "packet", ["pk-her"]) == 1
    assert opener(hers) is None  # its key is gone: skipped, never an error
    assert opener(his) is not None and opener(his)["query"] == "who fixed the lamp?"
    # without a store (sealing off): plain JSON
    assert orjson.loads(TraceSealer(None).encode(trace("pk-3", "q"))) == trace("pk-3", "q")
    with pytest.raises(SealBroken):
        opener({"sealed": {"v": 1, "n": "", "c": ""}})  # no tenant, no packet


def test_a_trace_whose_packet_a_purge_reached_first_is_not_written(
    keys: SqliteDataKeys,
) -> None:
    """A purge can destroy a recent packet's key before its trace is sealed: no new key, no
    trace (it would cite the purged content under a live key)."""
    keys.destroy("t1", "packet", ["pk-late"])
    assert TraceSealer(keys).encode(trace("pk-late", "where does zoë live?")) is None
    assert keys.get("t1", "packet", ["pk-late"]) == {}
    assert TraceSealer(keys).encode(trace("pk-other", "q")) is not None


def test_the_retrospective_reads_sealed_traces_through_the_store(keys: SqliteDataKeys) -> None:
    doc = trace("pk-r", "what did Zoë order?", task_id="task-1")
    value = TraceSealer(keys).encode(doc)
    read = read_trace(value, TraceOpener(keys))
    assert isinstance(read, CheckoutTrace) and read.query == "what did Zoë order?"
    with pytest.raises(RuntimeError, match="without a data key store"):
        read_trace(value, None)  # our bug: every reader has the store
    broken = orjson.loads(value)
    broken["sealed"]["c"] = base64.b64encode(b"\x00" * 40).decode()
    reason = read_trace(orjson.dumps(broken), TraceOpener(keys))
    assert isinstance(reason, str) and reason.startswith("sealed checkout trace does not open")
    keys.destroy("t1", "packet", ["pk-r"])
    assert read_trace(value, TraceOpener(keys)) is None
    assert isinstance(read_trace(orjson.dumps(doc), None), CheckoutTrace)  # clear: as before


@pytest.mark.parametrize(
    ("doc", "reached"),
    [
        (trace("a", "Where does Zoë Quist-Marlowe live?"), True),
        (trace("b", "where does zoe quist-marlowe live?"), True),  # lower case, no accent
        (trace("c", "ZOË QUIST-MARLOWE\x00\x07 again"), True),  # NUL and control characters
        (trace("d", "what now?", entities=["zoë quist-marlowe"]), True),
        (trace("e", "what did I buy?", cited_ids=["e-purged#2"]), True),  # a purged fact
        (trace("f", "what did I buy?", answer_ids=["lat-1"]), True),  # a purged latent
        (trace("g", "Zoë Quistmarlowe and zoe quist"), False),  # not her as whole words
        (trace("h", "who fixed the lamp?", cited_ids=["e-other", "e-purged-not"]), False),
    ],
)
def test_which_traces_a_purge_reaches(doc: dict[str, Any], reached: bool) -> None:
    assert trace_reaches(doc, FORMS, {"e-purged", "e-purged#1", "lat-1"}) is reached


def test_which_clear_raw_events_a_purge_reaches() -> None:
    event = {
        "id": "x-1",
        "tenant": "t1",
        "stream": "s",
        "type": "message.user",
        "payload": {"text": "met zoe quist-marlowe"},
    }
    assert clear_event_reaches(event, FORMS, set())
    assert clear_event_reaches({**event, "payload": {"text": "-"}}, FORMS, {"x-1"})
    assert not clear_event_reaches({**event, "payload": {"text": "met Bart"}}, FORMS, set())
    # a sealed copy is not left in the clear; a tombstone holds no content
    assert not clear_event_reaches(seal_event(event, bytes(32)), FORMS, set())
    assert not clear_event_reaches({**event, "type": "memory.purge"}, FORMS, set())
    # the tenant name or stream naming her is routing, not content
    assert not clear_event_reaches(
        {**event, "stream": "zoe quist-marlowe", "payload": {}}, FORMS, set()
    )


@pytest.fixture
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


def _send(producer: Producer, topic: str, key: str, value: bytes) -> None:
    producer.produce(topic, value, key=key.encode())


def test_a_purge_shreds_the_tenants_traces_and_reports_clear_copies(
    topics: str, keys: SqliteDataKeys
) -> None:
    tenant, other = f"p{uuid.uuid4().hex[:10]}", f"q{uuid.uuid4().hex[:10]}"
    sealer = TraceSealer(keys)
    producer = make_producer(topics)
    named = trace("pk-named", "Where does Zoë Quist-Marlowe live?", tenant)
    cites = trace("pk-cites", "what did I buy?", tenant, cited_ids=["e-hers#1"])
    kept = trace("pk-kept", "who fixed the lighthouse lamp?", tenant)
    elsewhere = trace("pk-else", "Where does Zoë Quist-Marlowe live?", other)
    values = {doc["packet_id"]: sealer.encode(doc) for doc in (named, cites, kept, elsewhere)}
    for doc in (named, cites, kept, elsewhere):
        _send(producer, CHECKOUTS, doc["tenant"], values[doc["packet_id"]])
    clear_trace = trace("pk-clear", "zoe quist-marlowe's address?", tenant)
    _send(producer, CHECKOUTS, tenant, orjson.dumps(clear_trace))
    clear_event = {
        "id": "sdk-1",
        "tenant": tenant,
        "stream": "s",
        "type": "message.user",
        "occurred_at": "2026-03-02T09:00:00Z",
        "payload": {"text": "Zoë Quist-Marlowe's passport is ZX-1"},
    }
    _send(producer, RAW, tenant, orjson.dumps(clear_event))
    sealed_event = seal_event({**clear_event, "id": "sdk-2"}, bytes(32))
    _send(producer, RAW, tenant, orjson.dumps(sealed_event))
    letter = dead_letter("x", orjson.dumps(clear_event), RAW, 0, 9, "sequencer", T0)
    _send(producer, DLQ, tenant, letter)
    assert producer.flush(30) == 0
    sent = datetime.now(UTC)

    settings = Settings()
    reach = Reach(tenant, FORMS, {"e-hers", "e-hers#1"})
    out = purge_topics(topics, settings, keys, reach, 4, ["pk-recent"])

    assert out.traces_shredded == 2  # pk-recent never had a key: nothing to destroy
    opener = TraceOpener(keys)
    for doc, opens in ((named, False), (cites, False), (kept, True), (elsewhere, True)):
        opened = opener(orjson.loads(values[doc["packet_id"]]))
        assert opened == (doc if opens else None), doc["packet_id"]
    assert out.topics[CHECKOUTS].keys_destroyed == 2
    assert out.topics[RAW].keys_destroyed == 4 and out.topics[LEDGER].sealed
    residual = {r.topic: r for r in out.residual}
    assert set(residual) == {RAW, DLQ, CHECKOUTS}
    assert all(r.count == 1 for r in residual.values()), residual
    raw_until = residual[RAW].until - timedelta(milliseconds=settings.raw_retention_ms)
    assert sent - timedelta(minutes=5) <= raw_until <= sent + timedelta(seconds=1)
    dlq_until = residual[DLQ].until - timedelta(milliseconds=settings.dlq_retention_ms)
    assert sent - timedelta(minutes=5) <= dlq_until <= sent + timedelta(seconds=1)
    assert "until it restarts" in residual[RAW].note
    # a second purge finds nothing more to shred; the clear copies are still reported
    again = purge_topics(topics, settings, keys, reach, 0, [])
    assert again.traces_shredded == 0 and len(again.residual) == 3
