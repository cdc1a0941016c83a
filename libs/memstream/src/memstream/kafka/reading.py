"""Reading partitions to their end (state rebuilds, stats, lag, tests).

Tansu answers ListOffsets(latest) with the *base offset of the last batch + 1*, not the
log end, so ``get_watermark_offsets`` undercounts after any batched produce. The end of a
partition is therefore always taken from a fetch (partition EOF / the fetch's high
watermark), which is exact on Tansu and on Apache Kafka alike.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

# Short-lived clients here answer CLI commands: their errors surface as exceptions, so
# librdkafka's own connection chatter on stderr is silenced.
QUIET: dict[str, Any] = {"log_level": 2, "log.connection.close": False}


def _reader(bootstrap: str, group: str | None = None) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"reader-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 10,
            **QUIET,
        }
    )


def headers_of(m: Message) -> dict[str, bytes]:
    """A record's headers as a dict (bytes values only)."""
    raw: Any = m.headers() or []
    items = raw.items() if isinstance(raw, dict) else raw
    return {str(k): v for k, v in items if isinstance(v, bytes)}


def _partitions(c: Consumer, topic: str, timeout: float) -> list[int]:
    md = c.list_topics(topic, timeout=timeout).topics.get(topic)
    if md is None or md.error is not None:
        return []
    return sorted(md.partitions)


def partition_count(bootstrap: str, topic: str, timeout: float = 10.0) -> int:
    c = _reader(bootstrap)
    try:
        return len(_partitions(c, topic, timeout))
    finally:
        c.close()


def _drain(c: Consumer, topic: str, starts: dict[int, int], timeout: float) -> Iterator[Message]:
    """Yield records from ``starts`` until every partition reports EOF."""
    if not starts:
        return
    c.assign([TopicPartition(topic, p, off) for p, off in starts.items()])
    remaining = set(starts)
    deadline = time.monotonic() + timeout
    while remaining:
        # consume() waits for a full batch or its timeout, so poll in short slices.
        msgs = c.consume(5000, timeout=0.05)
        if not msgs:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: no data for {timeout}s, {remaining} left")
            continue
        deadline = time.monotonic() + timeout
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    remaining.discard(m.partition() or 0)
                    continue
                raise RuntimeError(f"reading {topic}: {err}")
            yield m


def read_to_end(
    bootstrap: str, topic: str, partitions: list[int] | None = None, timeout: float = 10.0
) -> Iterator[Message]:
    """Yield every record of the partitions, from the beginning to the end."""
    c = _reader(bootstrap)
    try:
        parts = partitions if partitions is not None else _partitions(c, topic, timeout)
        yield from _drain(c, topic, dict.fromkeys(parts, OFFSET_BEGINNING), timeout)
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str, timeout: float = 10.0) -> dict[int, int]:
    """The true log-end offset of every partition (see the module note on Tansu)."""
    c = _reader(bootstrap)
    try:
        return end_offsets_with(c, topic, timeout)
    finally:
        c.close()


def end_offsets_with(c: Consumer, topic: str, timeout: float = 10.0) -> dict[int, int]:
    """:func:`end_offsets` through a reader the caller keeps (one that polls often must not
    open a consumer per call); the reader is left unassigned."""
    ends: dict[int, int] = {}
    starts: dict[int, int] = {}
    for p in _partitions(c, topic, timeout):
        low, listed = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
        ends[p] = listed
        if listed > low:
            starts[p] = max(low, listed - 1)  # inside the last batch
    try:
        for m in _drain(c, topic, starts, timeout):
            part, off = m.partition(), m.offset()
            if part is not None and off is not None:
                ends[part] = max(ends[part], off + 1)
        for p in starts:
            _low, fetched = c.get_watermark_offsets(TopicPartition(topic, p), cached=True)
            ends[p] = max(ends[p], fetched or 0)
    finally:
        if starts:
            c.unassign()
    return ends


def reader(bootstrap: str, group: str | None = None) -> Consumer:
    """A reader to keep for :func:`end_offsets_with` and :func:`committed_with` (``group``:
    whose commits it reads; it never joins the group)."""
    return _reader(bootstrap, group)


def high_watermarks(bootstrap: str, topic: str, timeout: float = 10.0) -> dict[int, int]:
    """Alias of :func:`end_offsets`: records ever written per partition (offsets start at 0)."""
    return end_offsets(bootstrap, topic, timeout)


def group_lag(
    bootstrap: str,
    group: str,
    topic: str,
    timeout: float = 10.0,
    ends: dict[int, int] | None = None,
) -> dict[int, int]:
    """Per-partition lag of a consumer group (end offset minus committed, or all if none);
    ``ends``: the topic's end offsets when the caller read them already (for many groups)."""
    ends = end_offsets(bootstrap, topic, timeout) if ends is None else ends
    c = _reader(bootstrap, group)
    try:
        committed = c.committed([TopicPartition(topic, p) for p in ends], timeout=timeout)
        lag = {}
        for tp in committed:
            low, _ = c.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout)
            done = tp.offset if tp.offset >= 0 else low
            lag[tp.partition] = max(0, ends[tp.partition] - done)
        return lag
    finally:
        c.close()


def committed_offsets(
    bootstrap: str, group: str, topic: str, timeout: float = 5.0
) -> dict[int, int]:
    """A group's committed offset per partition of ``topic`` (negative: nothing committed)."""
    c = _reader(bootstrap, group)
    try:
        return committed_with(c, topic, timeout)
    finally:
        c.close()


def committed_with(c: Consumer, topic: str, timeout: float = 5.0) -> dict[int, int]:
    """:func:`committed_offsets` of the group of the reader ``c`` (see :func:`reader`)."""
    parts = _partitions(c, topic, timeout)
    if not parts:
        raise RuntimeError(f"topic {topic} is not available")
    tps = c.committed([TopicPartition(topic, p) for p in parts], timeout=timeout)
    return {tp.partition: tp.offset for tp in tps if tp.error is None}
