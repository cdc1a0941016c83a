"""One shared Kafka producer; each request awaits the delivery reports of its own events.

The embedded broker can restart empty under the API. An idempotent producer that delivered
to the old broker never delivers to the new one (its producer id is unknown there; seen with
Tansu: no report at all, however long one waits), so on a new broker epoch the client is
replaced: what the old one held fails at once and its callers send it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from anyio import to_thread
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from prometheus_client import Counter

from memstream.events import Event
from memstream.kafka.clients import producer_config
from memstream.kafka.produce import (
    DeliveryFailed,
    produce_with_backpressure,
    refusal_error,
    refused_for_good,
)
from memstream.kafka.topics import CHECKOUTS, RAW, RecordLimit, record_limit
from memstream.metrics import EVENTS_PRODUCED
from memstream.proof import Prover
from memstream.settings import Settings
from memstream.shred.sealer import EventSealer

log = logging.getLogger(__name__)


TRACES_DROPPED = Counter(
    "memstream_records_dropped_total",
    "Best-effort records (e.g. checkout traces) dropped because the producer queue was full",
    ["component", "topic"],
)


@dataclass(frozen=True)
class Refused:
    """A record Kafka did not take: why, and whether it is the record's own fault (its size,
    say), which no retry mends."""

    reason: str
    for_good: bool = False

    @classmethod
    def of(cls, error: KafkaError) -> Refused:
        return cls(error.str(), refused_for_good(error))

    @classmethod
    def failed(cls, exc: DeliveryFailed) -> Refused:
        """A produce that raised: for good when the producer refused the record itself."""
        error = refusal_error(exc)
        return cls(exc.reason, error is not None and refused_for_good(error))


# Told of every event's fate: its delivered message, or why the broker did not take it.
Report = Callable[[str, Message | Refused], None]
RETIRED_S = 10.0  # a replaced client is let go this long after its last purge
DEFAULT_MAX_RECORD_BYTES = Settings.model_fields["max_record_bytes"].default


class _Batch:
    """Delivery state of one request; callbacks arrive on the poll thread."""

    def __init__(
        self, n: int, loop: asyncio.AbstractEventLoop, component: str,
        on_report: Report | None = None, on_delivered: Callable[[], None] | None = None,
    ) -> None:  # fmt: skip
        self.on_report = on_report
        self.on_delivered = on_delivered
        self.left = n
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.failures: dict[str, str] = {}
        self.component = component
        self._lock = threading.Lock()
        if n == 0:
            self.future.set_result(None)

    def callback(self, event_id: str) -> Callable[[KafkaError | None, Message], None]:
        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            self.settle(event_id, msg if err is None else Refused.of(err))

        return on_delivery

    def settle(self, event_id: str, outcome: Message | Refused) -> None:
        if self.on_report is not None:
            self.on_report(event_id, outcome)
        refused = outcome if isinstance(outcome, Refused) else None
        if refused is None and self.on_delivered is not None:
            self.on_delivered()
        with self._lock:
            if refused is None:
                EVENTS_PRODUCED.labels(component=self.component, topic=RAW).inc()
            else:
                self.failures[event_id] = refused.reason
            self.left -= 1
            done = self.left == 0
        if done:
            # RuntimeError: the request's loop is gone, so nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self._resolve)

    def _resolve(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


class BatchProducer:
    """Produces envelopes to ``memory.events.raw`` keyed ``tenant/stream``."""

    def __init__(
        self,
        bootstrap: str,
        component: str = "api",
        sealer: EventSealer | None = None,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        prover: Prover | None = None,
        **overrides: Any,
    ) -> None:
        conf: dict[str, Any] = {
            # The raw topic must come from ensure_topics, never from auto-creation.
            "allow.auto.create.topics": False,
            "logger": logging.getLogger("memstream.intake.kafka"),
            "error_cb": self._on_error,
            "message.max.bytes": max_record_bytes,
        }
        conf.update(overrides)
        self.config = producer_config(bootstrap, **conf)
        self.bootstrap = bootstrap
        self.component = component
        self.sealer = sealer or EventSealer(None)
        # Every raw record carries the proof the sequencer asks for (memstream.proof): the
        # stack's own, as the API checked the caller's key before it accepted the write.
        self.prover = prover
        self.max_record_bytes = int(self.config["message.max.bytes"])
        # What the edge holds events to: this producer's limit until the broker's topics
        # are read (refresh_limit), which may only lower it.
        self.limit = RecordLimit(self.max_record_bytes, "MEMSTREAM_MAX_RECORD_BYTES")
        # Wait a little longer than librdkafka's own retry budget before giving up.
        self.wait_s = int(self.config["message.timeout.ms"]) / 1000 + 5
        self._producer = Producer(self.config)
        self._retired: dict[int, tuple[Producer, float]] = {}  # id -> (client, last purge)
        self._swap = threading.Lock()
        # From "all brokers down" until the next delivery: requests need not wait for Kafka.
        self.broker_down = False
        EVENTS_PRODUCED.labels(component=component, topic=RAW)
        TRACES_DROPPED.labels(component=component, topic=CHECKOUTS)
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="kafka-delivery", daemon=True)
        self._poller.start()

    def _on_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.broker_down = True

    def _delivered(self) -> None:
        self.broker_down = False

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                self._producer.poll(0.1)
            except KafkaException as exc:
                if not _fatal(exc):
                    raise
                # An idempotent client the broker forgot (it restarted empty) fails for
                # good, often before the broker watch sees the restart: a fresh client
                # takes its place, or every later send would wait for reports nobody polls.
                log.warning("Kafka producer failed for good (%s): a new one", exc.args[0])
                self.reconnect()
            self._drain_retired()

    def reconnect(self) -> None:
        """Replace the client (the broker restarted empty); what the old one still holds is
        reported failed at once."""
        fresh = Producer(self.config)
        with self._swap:
            old, self._producer = self._producer, fresh
            self._retired[id(old)] = (old, time.monotonic())
        log.warning("broker restarted: new Kafka producer; unacknowledged sends fail over")
        self._drain_retired()

    def _drain_retired(self) -> None:
        """Fail what replaced clients hold (a send that raced the swap included) and let them
        go once empty and quiet; one still referenced by a blocked send is freed after it."""
        with self._swap:
            retired = list(self._retired.items())
        for key, (old, since) in retired:
            try:
                old.purge(in_queue=True, in_flight=True, blocking=False)
                old.poll(0)
            except KafkaException as exc:
                if not _fatal(exc):
                    raise  # a report callback's own error: ours, not the broker's
            if len(old):
                with self._swap:
                    self._retired[key] = (old, time.monotonic())
            elif time.monotonic() - since > RETIRED_S:
                with self._swap:
                    self._retired.pop(key, None)

    def reachable(self, timeout: float = 3.0) -> str | None:
        """None when Kafka answers and the raw topic exists, else the reason (blocking)."""
        try:
            md = self._producer.list_topics(timeout=timeout)
        except KafkaException as exc:
            return f"Kafka at {self.bootstrap} unreachable: {exc.args[0] if exc.args else exc}"
        if RAW not in md.topics:
            return f"topic {RAW} does not exist on {self.bootstrap}"
        return None

    def refresh_limit(self, timeout: float = 5.0) -> RecordLimit:
        """Read the topics' record limit from the broker (blocking); never above this
        producer's own."""
        self.limit = record_limit(self.bootstrap, self.max_record_bytes, timeout)
        log.info("record limit: %d bytes (%s)", self.limit.bytes, self.limit.source)
        return self.limit

    @property
    def seals(self) -> bool:
        """Are the values :meth:`encode` makes sealed?"""
        return self.sealer.keys is not None

    def encode(self, events: Sequence[Event]) -> list[bytes]:
        """The events as written to the raw topic (and the outbox): sealed when the API
        seals (blocking: the key store is on disk)."""
        return self.sealer.encode(events)

    async def produce(
        self, events: Sequence[Event], on_report: Report | None = None,
        wait_s: float | None = None, values: Sequence[bytes] | None = None,
    ) -> None:  # fmt: skip
        """Produce every event (``values``: as already encoded) and wait for all delivery
        reports (at most ``wait_s``); raises DeliveryFailed. ``on_report`` hears of each
        event, even after a timeout."""
        wait = self.wait_s if wait_s is None else wait_s
        loop = asyncio.get_running_loop()
        batch = _Batch(len(events), loop, self.component, on_report, self._delivered)
        await to_thread.run_sync(self._enqueue, events, batch, wait, values)
        try:
            await asyncio.wait_for(batch.future, wait)
        except TimeoutError:
            raise DeliveryFailed(
                f"no delivery report from Kafka at {self.bootstrap} within {wait:g}s",
                [e.id for e in events],
            ) from None
        if batch.failures:
            first_id, first_err = next(iter(batch.failures.items()))
            raise DeliveryFailed(
                f"{len(batch.failures)} of {len(events)} events not delivered to {RAW} "
                f"(first: {first_id}: {first_err})",
                list(batch.failures),
            )

    def _enqueue(
        self,
        events: Sequence[Event],
        batch: _Batch,
        wait: float,
        values: Sequence[bytes] | None = None,
    ) -> None:
        deadline = time.monotonic() + min(wait, self.wait_s)
        encoded = self.encode(events) if values is None else values
        for event, value in zip(events, encoded, strict=True):
            try:
                produce_with_backpressure(
                    self._producer,
                    RAW,
                    value,
                    headers=self._proof(RAW, value),
                    key=event.key.encode(),
                    on_delivery=batch.callback(event.id),
                    deadline=deadline,
                    record_id=event.id,
                )
            except DeliveryFailed as exc:
                # Not queued (refused, or the queue stayed full to the deadline): no report
                # will come for it.
                batch.settle(event.id, Refused.failed(exc))

    def send_tracked(
        self, topic: str, key: str, value: bytes, event_id: str, report: Report
    ) -> None:
        """One record whose delivery ``report`` hears of (outbox re-sends); waits for room
        in a full queue, up to the delivery wait."""

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                self._delivered()
            report(event_id, msg if err is None else Refused.of(err))

        try:
            produce_with_backpressure(
                self._producer, topic, value, key=key, on_delivery=on_delivery,
                max_block=self.wait_s, record_id=event_id, headers=self._proof(topic, value),
            )  # fmt: skip
        except DeliveryFailed as exc:
            report(event_id, Refused.failed(exc))  # not queued: no report will come

    def _proof(self, topic: str, value: bytes) -> list[tuple[str, str | bytes | None]] | None:
        """The headers that prove a raw record (none on other topics, or without a prover)."""
        return self.prover.headers(value) if self.prover is not None and topic == RAW else None

    def send(self, topic: str, key: str, value: bytes) -> None:
        """Fire-and-forget record (checkout traces); delivery is served by the poll thread."""
        try:
            self._producer.produce(topic, value, key=key)
        except BufferError:
            TRACES_DROPPED.labels(component=self.component, topic=topic).inc()

    def close(self, timeout: float = 10.0) -> None:
        """Stop polling, deliver what is queued (bounded), release the client."""
        self._stop.set()
        self._poller.join(timeout)
        remaining = self._producer.flush(timeout)
        if remaining:
            log.warning("%d events still undelivered at shutdown", remaining)
        self._producer.close()


def _fatal(exc: KafkaException) -> bool:
    """Is ``exc`` the client's fatal error (the client is done; a new one may succeed)?"""
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and error.fatal()
