"""Dead letters and delivery failures against a real broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from memstream.kafka.clients import make_producer
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.produce import DeliveryFailed, produce_with_backpressure
from memstream.kafka.topics import DLQ, ensure_topics
from memstream.settings import Settings
from memstream.stack.net import free_port
from memstream.stack.servers import Server, start_tansu
from topicread import read_topic


def scratch_topic(bootstrap: str, records: list[bytes]) -> tuple[str, list[Message]]:
    """A fresh one-partition topic holding ``records`` (offsets 0..n-1), read back."""
    topic = f"dlq-src-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in records:
        producer.produce(topic, value, key=b"t1/s1")
    assert producer.flush(10) == 0
    msgs = sorted(read_topic(bootstrap, topic), key=lambda m: m.offset() or 0)
    assert len(msgs) == len(records)
    return topic, msgs


@pytest.fixture
def stopped_broker(tmp_path: Path) -> Iterator[tuple[Server, str, list[Message]]]:
    """A broker of this test's own with two records on a topic; the test may stop it."""
    server = start_tansu(free_port(), tmp_path)
    bootstrap = f"127.0.0.1:{server.port}"
    try:
        ensure_topics(bootstrap, Settings())
        _topic, msgs = scratch_topic(bootstrap, [b"poison", b"more poison"])
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
