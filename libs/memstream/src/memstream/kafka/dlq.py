"""Dead-letter records: reason, raw bytes and source coordinates."""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
from confluent_kafka import Message, Producer

from memstream.kafka.produce import DeliveryReports, flush_or_raise, produce_with_backpressure
from memstream.kafka.topics import DLQ
from memstream.metrics import EVENTS_DEAD_LETTERED

# Raw bytes kept in a dead letter. Base64 grows them by a third and the producer refuses a
# record over 1 MB (message.max.bytes), so a record refused for its size keeps its head
# (the rest stays in the source topic at the offset named, until retention drops it).
MAX_RAW_BYTES = 512 * 1024
# Source coordinates a writer remembers having dead-lettered: a batch that is retried or
# split (kafka/loop.py) decodes its malformed records again, and one dead letter is enough.
REMEMBERED = 10_000


def dead_letter(
    reason: str,
    raw: bytes | None,
    topic: str,
    partition: int,
    offset: int,
    component: str,
    now: datetime,
) -> bytes:
    """One DLQ value; the raw bytes travel base64-encoded so nothing is lost (up to
    ``MAX_RAW_BYTES``: beyond, ``raw_bytes`` gives the size and ``raw_truncated`` is true)."""
    source = {"topic": topic, "partition": partition, "offset": offset}
    return letter(reason, raw, source, component, now)


def letter(
    reason: str,
    raw: bytes | None,
    source: Mapping[str, Any],
    component: str,
    now: datetime,
    max_raw: int = MAX_RAW_BYTES,
) -> bytes:
    """A DLQ value naming any ``source`` (a topic's coordinates, an outbox segment's line),
    with at most ``max_raw`` bytes of the record (a head; ``raw_bytes`` gives the size)."""
    doc: dict[str, Any] = {
        "reason": reason,
        "raw_b64": base64.b64encode(raw[:max_raw]).decode() if raw is not None else None,
        "source": dict(source),
        "component": component,
        "at": now.isoformat(),
    }
    if raw is not None and len(raw) > max_raw:
        doc |= {"raw_bytes": len(raw), "raw_truncated": True}
    return orjson.dumps(doc)


class DeadLetterWriter:
    """Sends one component's bad records to ``memory.dlq``.

    Call :meth:`flush` before committing the source offsets: it raises DeliveryFailed when a
    dead letter was not acknowledged, so the offsets stay uncommitted and the record comes back
    instead of being skipped without a trace. A record already dead-lettered by this writer
    is not sent again. Counts go to ``memstream_events_dead_lettered_total`` by the topic the
    record came from (``source_topic`` and ``also`` exist at 0 from the start).
    """

    def __init__(
        self, producer: Producer, component: str, source_topic: str, also: tuple[str, ...] = ()
    ) -> None:
        self.producer = producer
        self.component = component
        self.source_topic = source_topic
        self.pending = 0  # written since the last flush
        self._by_topic: Counter[str] = Counter()
        self._sent: dict[tuple[str, int, int], None] = {}
        self._reports = DeliveryReports()
        # The series exist from the start, so a quiet component reads 0, not "no data".
        for topic in (source_topic, *also):
            EVENTS_DEAD_LETTERED.labels(component, topic)

    def write(self, msg: Message, reason: str, now: datetime | None = None) -> None:
        """Queue the dead letter of ``msg`` (raises DeliveryFailed if it cannot be queued)."""
        topic = msg.topic() or self.source_topic
        partition, offset = msg.partition() or 0, msg.offset() or 0
        if (topic, partition, offset) in self._sent:
            return
        value = dead_letter(
            reason, msg.value(), topic, partition, offset, self.component, now or datetime.now(UTC)
        )
        where = f"{topic}[{partition}]@{offset}"
        produce_with_backpressure(
            self.producer,
            DLQ,
            value,
            key=msg.key(),
            on_delivery=self._reports.for_record(where),
            record_id=where,
        )
        self._remember((topic, partition, offset))
        self._by_topic[topic] += 1
        self.pending += 1

    def _remember(self, where: tuple[str, int, int]) -> None:
        self._sent[where] = None
        if len(self._sent) > REMEMBERED:
            del self._sent[next(iter(self._sent))]

    def flush(self, timeout: float = 30.0) -> int:
        """Wait for the dead letters written since the last flush; returns how many there were."""
        if not self.pending:
            return 0
        flush_or_raise(
            self.producer, timeout, self._reports, f"{self.component} dead letters to {DLQ}"
        )
        n, self.pending = self.pending, 0
        for topic, count in self._by_topic.items():
            EVENTS_DEAD_LETTERED.labels(self.component, topic).inc(count)
        self._by_topic.clear()
        return n
