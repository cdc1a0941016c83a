"""Reading a whole topic in tests without trusting ListOffsets watermarks."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition


def read_topic(bootstrap: str, topic: str, timeout: float = 15.0) -> list[Message]:
    """Every record, read until each partition reports EOF.

    Not ``memstream.kafka.reading.read_to_end``: Tansu's ListOffsets answers the last batch's
    base offset + 1, so a watermark-bounded read stops early after a batched produce; the EOF
    that a fetch reports is exact.
    """
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        parts = sorted(c.list_topics(topic, timeout=timeout).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        pending = set(parts)
        out: list[Message] = []
        deadline = time.monotonic() + timeout
        while pending:
            assert time.monotonic() < deadline, f"no EOF on {topic} partitions {pending}"
            m = c.poll(0.5)
            if m is None:
                continue
            err = m.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, err
                pending.discard(m.partition())
                continue
            out.append(m)
        return out
    finally:
        c.close()


def records_for(bootstrap: str, topic: str, tenant: str) -> list[tuple[str, bytes]]:
    """``(key, value)`` of the records keyed ``tenant/...``, in partition order."""
    out: list[tuple[str, bytes]] = []
    for m in read_topic(bootstrap, topic):
        key = (m.key() or b"").decode()
        if key.startswith(f"{tenant}/"):
            out.append((key, m.value() or b""))
    return out
