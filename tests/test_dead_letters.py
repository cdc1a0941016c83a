"""Dead letters and delivery failures against a real broker: what is dead-lettered, what raises."""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Message, TopicPartition
from falkordb import FalkorDB
from memstream.graph.falkor import FalkorGraphStore
from memstream.kafka.clients import make_consumer, make_producer
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.loop import BatchLoop
from memstream.kafka.produce import DeliveryFailed, produce_with_backpressure
from memstream.kafka.topics import DLQ, ensure_topics
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.projection import purge
from memstream.projection.projectors import GraphProjector
from memstream.settings import Settings
from memstream.stack.net import free_port
from memstream.stack.servers import Server, start_tansu
from scratchtopics import scratch_topic
from topicread import read_topic

NOW = "2025-10-01T00:00:00Z"


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


def ledger_entry(i: int, **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": f"e{i}",
        "tenant": "t1",
        "stream": "s1",
        "agent": "Marta Lopez",
        "type": "message.user",
        "occurred_at": "2025-09-01T10:00:00Z",
        "payload": {"text": f"Met Tom Berg in Oslo ({i})"},
    }
    out = sequence(RawRecord(orjson.dumps(doc), 0, i, "raw"), SequencerState(), NOW)
    assert isinstance(out, Sequenced)
    return out.entry | fields


def dead_letters_from(bootstrap: str, topic: str) -> dict[int, dict[str, Any]]:
    """The DLQ records whose source is ``topic``, by source offset."""
    out = {}
    for m in read_topic(bootstrap, DLQ):
        doc = orjson.loads(m.value() or b"{}")
        if doc["source"]["topic"] == topic:
            out[doc["source"]["offset"]] = doc
    return out


@pytest.fixture
def graph(falkordb_server: Server) -> Iterator[FalkorGraphStore]:
    store = FalkorGraphStore(
        FalkorDB(port=falkordb_server.port, password=falkordb_server.password),
        f"dlq_{uuid.uuid4().hex[:8]}",
    )
    try:
        yield store
    finally:
        store.drop()


def test_malformed_records_are_dead_lettered_with_reason_and_offset(
    topics: str, graph: FalkorGraphStore
) -> None:
    fact = ledger_entry(3)
    fact |= {"type": "fact.asserted", "payload": {"predicate": "city", "object": "Oslo"}}
    records = [
        orjson.dumps(ledger_entry(0)),
        b"\x00 not json \xff",
        orjson.dumps([1, 2, 3]),
        orjson.dumps(fact),  # no subject: the extractor's KeyError is the record's fault
    ]
    topic, msgs = scratch_topic(topics, records, prefix="dlq-src", key=b"t1/s1")
    projector = GraphProjector(graph, "vtest", make_producer(topics))
    try:
        projector.process(msgs)  # returns: the loop may commit
    finally:
        projector.close()
    assert graph.counts()["events"] == 1
    dead = dead_letters_from(topics, topic)
    assert sorted(dead) == [1, 2, 3]
    assert "undecodable" in dead[1]["reason"]
    assert "malformed ledger entry: not a JSON object" in dead[2]["reason"]
    assert "malformed ledger entry" in dead[3]["reason"] and "subject" in dead[3]["reason"]
    for offset, doc in dead.items():
        assert doc["component"] == "graph-projector"
        assert doc["reason"].startswith("graph-projector vtest: ")
        assert doc["source"] == {"topic": topic, "partition": 0, "offset": offset}
        assert base64.b64decode(doc["raw_b64"]) == records[offset]


@pytest.mark.parametrize("bug", [RuntimeError("extractor bug"), KeyError("typo")])
def test_an_extractor_bug_raises_and_nothing_is_dead_lettered_or_committed(
    topics: str, graph: FalkorGraphStore, monkeypatch: pytest.MonkeyPatch, bug: Exception
) -> None:
    def broken(entry: dict[str, Any], light: bool = False) -> Any:
        raise bug

    # A KeyError too: the record is a well-formed ledger entry, so the failure is ours.
    monkeypatch.setattr(purge, "extract", broken)  # the reader every projector uses
    topic, _ = scratch_topic(
        topics,
        prefix="dlq-src",
        key=b"t1/s1",
        values=[orjson.dumps(ledger_entry(i)) for i in range(3)],
    )
    projector = GraphProjector(graph, "vtest", make_producer(topics))
    group = f"dlq-test-{uuid.uuid4().hex[:8]}"
    loop = BatchLoop(
        consumer=make_consumer(topics, group, Settings()),
        topic=topic,
        group=group,
        component="graph-projector",
        process=projector.process,
    )
    # A loop that never sees its records would wait forever; stopping it fails the raises check.
    safety = threading.Timer(60, loop.stop_event.set)
    safety.start()
    try:
        with pytest.raises(type(bug)):
            loop.run()
    finally:
        safety.cancel()
        projector.close()
    assert dead_letters_from(topics, topic) == {}
    assert graph.counts()["events"] == 0
    check = make_consumer(topics, group, Settings())
    try:
        [committed] = check.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed.offset < 0  # nothing committed: the records come back after a restart
    finally:
        check.close()


@pytest.fixture
def stopped_broker(tmp_path: Path) -> Iterator[tuple[Server, str, list[Message]]]:
    """A broker of this test's own with two records on a topic; the test may stop it."""
    server = start_tansu(free_port(), tmp_path)
    bootstrap = f"127.0.0.1:{server.port}"
    try:
        ensure_topics(bootstrap, Settings())
        _topic, msgs = scratch_topic(
            bootstrap, [b"poison", b"more poison"], prefix="dlq-src", key=b"t1/s1"
        )
        yield server, bootstrap, msgs
    finally:
        server.stop()


def test_a_dead_letter_that_is_not_acknowledged_raises_on_flush(
    stopped_broker: tuple[Server, str, list[Message]],
) -> None:
    server, bootstrap, msgs = stopped_broker
    writer = DeadLetterWriter(
        make_producer(bootstrap, **{"message.timeout.ms": 1500}), "archiver", "memory.ledger"
    )
    server.stop()
    writer.write(msgs[1], "bad record")
    try:
        with pytest.raises(DeliveryFailed) as info:
            writer.flush(timeout=10)
    finally:
        writer.producer.close()
    where = f"{msgs[1].topic()}[0]@1"
    assert info.value.failed_ids == [where]
    assert where in info.value.reason and DLQ in info.value.reason


def test_a_full_queue_raises_at_the_deadline(
    stopped_broker: tuple[Server, str, list[Message]],
) -> None:
    server, bootstrap, _ = stopped_broker
    server.stop()
    producer = make_producer(bootstrap, **{"queue.buffering.max.messages": 1})
    produce_with_backpressure(producer, DLQ, b"fills the queue")
    started = time.monotonic()
    try:
        with pytest.raises(DeliveryFailed) as info:
            produce_with_backpressure(
                producer, DLQ, b"no room", max_block=0.5, record_id="the-second-record"
            )
    finally:
        producer.purge()
        producer.close()
    assert 0.5 <= time.monotonic() - started < 5
    assert info.value.failed_ids == ["the-second-record"]
    assert "still full" in info.value.reason
