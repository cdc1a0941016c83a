"""Dead-letter records: reason, raw bytes and source coordinates."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import orjson
from confluent_kafka import Message, Producer

from memstream.kafka.produce import DeliveryReports, flush_or_raise, produce_with_backpressure
from memstream.kafka.topics import DLQ
from memstream.metrics import EVENTS_DEAD_LETTERED


def dead_letter(
    reason: str,
    raw: bytes | None,
    topic: str,
    partition: int,
    offset: int,
    component: str,
    now: datetime,
) -> bytes:
    """One DLQ value; the raw bytes travel base64-encoded so nothing is lost."""
    doc: dict[str, Any] = {
        "reason": reason,
        "raw_b64": base64.b64encode(raw).decode() if raw is not None else None,
        "source": {"topic": topic, "partition": partition, "offset": offset},
        "component": component,
        "at": now.isoformat(),
    }
    return orjson.dumps(doc)


class DeadLetterWriter:
    """Sends one component's bad records to ``memory.dlq``.

    Call :meth:`flush` before committing the source offsets: it raises DeliveryFailed when a
    dead letter was not acknowledged, so the offsets stay uncommitted and the record comes back
    instead of being skipped without a trace.
    """

    def __init__(self, producer: Producer, component: str, source_topic: str) -> None:
        self.producer = producer
        self.component = component
        self.source_topic = source_topic
        self.pending = 0  # written since the last flush
        self._reports = DeliveryReports()
        # The series exists from the start, so a quiet component reads 0, not "no data".
        self._counted = EVENTS_DEAD_LETTERED.labels(component, source_topic)

    def write(self, msg: Message, reason: str, now: datetime | None = None) -> None:
        """Queue the dead letter of ``msg`` (raises DeliveryFailed if it cannot be queued)."""
        topic = msg.topic() or self.source_topic
        partition, offset = msg.partition() or 0, msg.offset() or 0
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
        self.pending += 1

    def flush(self, timeout: float = 30.0) -> int:
        """Wait for the dead letters written since the last flush; returns how many there were."""
        if not self.pending:
            return 0
        flush_or_raise(
            self.producer, timeout, self._reports, f"{self.component} dead letters to {DLQ}"
        )
        n, self.pending = self.pending, 0
        self._counted.inc(n)
        return n
