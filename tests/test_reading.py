"""End offsets and full reads are exact after batched produces (Tansu's ListOffsets is not)."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from memstream.kafka.reading import end_offsets, group_lag, read_to_end


def test_end_offsets_and_reads_count_every_record(broker: str) -> None:
    topic = f"reading-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 50})
    for i in range(1000):  # lingering makes multi-record batches
        producer.produce(topic, f"v{i}".encode(), key=f"k{i % 17}".encode())
    producer.flush(10)
    ends = end_offsets(broker, topic)
    assert sum(ends.values()) == 1000 and len(ends) == 3
    assert sorted(m.value() for m in read_to_end(broker, topic)) == sorted(
        f"v{i}".encode() for i in range(1000)
    )
    assert sum(group_lag(broker, f"g-{uuid.uuid4()}", topic).values()) == 1000


def test_empty_topic_has_zero_ends(broker: str) -> None:
    topic = f"empty-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result()
    assert end_offsets(broker, topic) == {0: 0, 1: 0}
    assert list(read_to_end(broker, topic)) == []
