"""Reading whole partitions to their end (state rebuilds, stats, tests)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition


def partition_count(bootstrap: str, topic: str, timeout: float = 10.0) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4()}"})
    try:
        md = c.list_topics(topic, timeout=timeout).topics.get(topic)
        return 0 if md is None or md.error is not None else len(md.partitions)
    finally:
        c.close()


def read_to_end(
    bootstrap: str, topic: str, partitions: list[int] | None = None, timeout: float = 10.0
) -> Iterator[Message]:
    """Yield every record of the partitions, from the beginning to the end seen at the start."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        if partitions is None:
            md = c.list_topics(topic, timeout=timeout).topics[topic]
            partitions = sorted(md.partitions)
        ends: dict[int, int] = {}
        for p in partitions:
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            if high > low:
                ends[p] = high
        if not ends:
            return
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        remaining = dict(ends)
        while remaining:
            msgs = c.consume(5000, timeout=timeout)
            if not msgs:
                raise TimeoutError(f"reading {topic}: no data for {timeout}s, {remaining} left")
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"reading {topic}: {err}")
                p, off = m.partition(), m.offset()
                if p not in remaining or off is None:
                    continue
                yield m
                if off + 1 >= remaining[p]:
                    del remaining[p]
    finally:
        c.close()


def high_watermarks(bootstrap: str, topic: str, timeout: float = 10.0) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4()}"})
    try:
        md = c.list_topics(topic, timeout=timeout).topics.get(topic)
        if md is None or md.error is not None:
            return {}
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
            for p in md.partitions
        }
    finally:
        c.close()


def group_lag(bootstrap: str, group: str, topic: str, timeout: float = 10.0) -> dict[int, int]:
    """Per-partition lag of a consumer group (end offset minus committed, or all if none)."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        md = c.list_topics(topic, timeout=timeout).topics.get(topic)
        if md is None or md.error is not None:
            return {}
        tps = [TopicPartition(topic, p) for p in sorted(md.partitions)]
        committed = c.committed(tps, timeout=timeout)
        lag = {}
        for tp in committed:
            low, high = c.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout)
            done = tp.offset if tp.offset >= 0 else low
            lag[tp.partition] = max(0, high - done)
        return lag
    finally:
        c.close()
