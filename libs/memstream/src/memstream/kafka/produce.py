"""Producing with backpressure: one rule for a full queue, one error for a delivery failure."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from memstream.kafka.reading import headers_of

# librdkafka fails a queued record after message.timeout.ms (30 s in producer_config), so a
# queue that is still full after this long is not draining and waiting longer hides a fault.
MAX_BLOCK_S = 35.0
# poll() returns as soon as it served a delivery report, so this only bounds an idle wait.
_POLL_S = 0.05

Headers = list[tuple[str, str | bytes | None]]
DeliveryCallback = Callable[[KafkaError | None, Message], None]


class DeliveryFailed(RuntimeError):
    """Kafka did not take or acknowledge some records.

    ``failed_ids`` names the records known to have failed; ``undelivered`` counts those still
    without a delivery report when the wait ended.
    """

    def __init__(self, reason: str, failed_ids: Sequence[str] = (), undelivered: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.failed_ids = list(failed_ids)
        self.undelivered = undelivered


def produce_with_backpressure(
    producer: Producer,
    topic: str,
    value: bytes,
    *,
    key: str | bytes | None = None,
    partition: int = -1,
    headers: Headers | None = None,
    on_delivery: DeliveryCallback | None = None,
    deadline: float | None = None,
    max_block: float = MAX_BLOCK_S,
    record_id: str | None = None,
) -> None:
    """Queue one record; while the local queue is full, serve delivery reports and retry.

    The wait ends at ``deadline`` (a ``time.monotonic()`` instant shared by a batch) or, when
    there is none, ``max_block`` seconds after the queue was first found full. Raises
    DeliveryFailed (naming ``record_id``) when it ends, or when the producer refuses the record
    outright (e.g. larger than ``message.max.bytes``).
    """
    started: float | None = None
    while True:
        try:
            producer.produce(
                topic, value, key=key, partition=partition, headers=headers, on_delivery=on_delivery
            )
            return
        except BufferError:
            now = time.monotonic()
            if started is None:
                started = now
            if deadline is None:
                deadline = now + max_block
            if now >= deadline:
                raise DeliveryFailed(
                    f"producer queue for {topic} still full at the deadline "
                    f"(waited {now - started:.1f}s)",
                    _ids(record_id),
                ) from None
            producer.poll(_POLL_S)  # delivery reports free queue slots
        except KafkaException as exc:
            raise DeliveryFailed(
                f"record refused by the producer for {topic}: {_error_text(exc)}",
                _ids(record_id),
            ) from exc


def _ids(record_id: str | None) -> list[str]:
    return [record_id] if record_id is not None else []


def _error_text(exc: KafkaException) -> str:
    return str(exc.args[0] if exc.args else exc)  # args[0] is the KafkaError


def _record_name(msg: Message) -> str:
    """How a delivery report names its record: the ``event_id`` header, else the key."""
    event_id = headers_of(msg).get("event_id")
    if event_id is not None:
        return event_id.decode(errors="replace")
    key = msg.key()
    return key.decode(errors="replace") if key is not None else f"{msg.topic()} (no key)"


class DeliveryReports:
    """A delivery callback that keeps the failures until :func:`flush_or_raise` takes them.

    Thread-safe: reports arrive on whichever thread polls the producer.
    """

    def __init__(self) -> None:
        self._failures: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._add(_record_name(msg), err.str())

    def for_record(self, name: str) -> DeliveryCallback:
        """A callback that names its record ``name`` (for records without an event id)."""

        def report(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                self._add(name, err.str())

        return report

    def _add(self, name: str, error: str) -> None:
        with self._lock:
            self._failures.append((name, error))

    def take(self) -> list[tuple[str, str]]:
        """The (record, error) failures reported since the last take."""
        with self._lock:
            failures, self._failures = self._failures, []
        return failures


def flush_or_raise(
    producer: Producer, timeout: float, reports: DeliveryReports | None, what: str
) -> None:
    """Wait for every queued record; raise DeliveryFailed naming what failed or is pending.

    ``what`` says what was being delivered (e.g. the topics), for the error message.
    """
    remaining = producer.flush(timeout)
    failures = reports.take() if reports is not None else []
    if not remaining and not failures:
        return
    parts = []
    if failures:
        shown = "; ".join(f"{name}: {error}" for name, error in failures[:5])
        more = f" and {len(failures) - 5} more" if len(failures) > 5 else ""
        parts.append(f"{len(failures)} failed ({shown}{more})")
    if remaining:
        parts.append(f"{remaining} still undelivered after {timeout:g}s")
    raise DeliveryFailed(
        f"delivery of {what}: " + "; ".join(parts), [name for name, _ in failures], remaining
    )


def refused_as_too_large(exc: DeliveryFailed) -> bool:
    """True when the producer refused the record for its size (above ``message.max.bytes``):
    the record's own fault, which no retry mends."""
    error = refusal_error(exc)
    return error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE


def refusal_error(exc: DeliveryFailed) -> KafkaError | None:
    """The KafkaError behind a record the producer refused outright, if that was the cause."""
    cause = exc.__cause__
    if not isinstance(cause, KafkaException) or not cause.args:
        return None
    error = cause.args[0]
    return error if isinstance(error, KafkaError) else None


# Errors that are the record's own fault: sending it again can only fail again. Every other
# error (timeouts, a broker down, a leader moving, an unknown topic) may pass on a retry.
RECORD_FAULTS = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_MSG_SIZE,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_MSG,
    }
)


def refused_for_good(error: KafkaError) -> bool:
    """Is ``error`` (a delivery report's, or a refused produce's) the record's own fault?"""
    return error.code() in RECORD_FAULTS
