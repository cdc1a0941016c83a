"""Python SDK: emit memory events to ``memory.events.raw`` through an idempotent producer."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

import orjson
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pydantic import ValidationError

from memstream.events import Event, EventIn, Security
from memstream.events.envelope import TENANT_PATTERN
from memstream.intake.outcomes import Purged
from memstream.intake.service import sealed_values
from memstream.kafka.clients import producer_config
from memstream.kafka.produce import DeliveryFailed, produce_with_backpressure
from memstream.kafka.topics import RAW, RecordLimit, record_limit
from memstream.ledger.size import Oversized
from memstream.metrics import EVENTS_PRODUCED, EVENTS_RECEIVED, EVENTS_REJECTED
from memstream.position import Acknowledged, Position, encode_write
from memstream.settings import Settings
from memstream.shred.port import DataKeys
from memstream.shred.sealer import EventSealer, KeyDestroyed

COMPONENT = "sdk"
DEFAULT_MAX_RECORD_BYTES: int = Settings.model_fields["max_record_bytes"].default
log = logging.getLogger(__name__)


class MemstreamSdkError(RuntimeError):
    """Base class of the SDK's errors."""


class BrokerUnavailableError(MemstreamSdkError):
    """The Kafka bootstrap address did not answer a metadata request in time."""


class TopicMissingError(MemstreamSdkError):
    """The broker answers but ``memory.events.raw`` does not exist (the stack is not set up)."""


class EventTooLargeError(MemstreamSdkError, ValueError):
    """An event whose ledger record could pass the broker's record limit: nothing of its
    batch was produced. ``oversized`` names each such event with its bound; ``limit`` is
    the limit in bytes."""

    def __init__(self, message: str, oversized: Sequence[Oversized], limit: int) -> None:
        super().__init__(message)
        self.oversized = list(oversized)
        self.limit = limit


@dataclass(frozen=True)
class DeliveryFailure:
    event_id: str
    key: str
    error: str


class DeliveryError(MemstreamSdkError, DeliveryFailed):
    """Some events were not acknowledged by Kafka; ``failures`` names each one.

    A :class:`memstream.kafka.produce.DeliveryFailed`, so one ``except`` catches the SDK's and
    the services' delivery failures alike.
    """

    def __init__(self, message: str, failures: Sequence[DeliveryFailure], undelivered: int = 0):
        super().__init__(message, [f.event_id for f in failures], undelivered)
        self.failures = list(failures)


class MemoryClient:
    """Emits events for one tenant. Not a context for reads: see the checkout API for that.

    ``producer_overrides`` are librdkafka settings, e.g. ``**{"linger.ms": 20}``. ``epoch``:
    the embedded broker's epoch (``read_epoch(data_dir)``), named in the positions
    :meth:`flush` returns; "" for a broker that does not restart empty.
    """

    def __init__(
        self,
        bootstrap: str,
        tenant: str,
        agent: str = "sdk",
        *,
        connect_timeout: float = 5.0,
        check_topic: bool = True,
        max_block: float = 30.0,
        keys: DataKeys | None = None,
        epoch: str = "",
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        **producer_overrides: Any,
    ) -> None:
        if not re.match(TENANT_PATTERN, tenant):
            raise ValueError(f"invalid tenant {tenant!r}: must match {TENANT_PATTERN}")
        self.bootstrap = bootstrap
        self.tenant = tenant
        self.agent = agent
        self.max_block = max_block
        # With the deployment's data key store, content is sealed before the first copy is
        # written; without it the raw topic holds it in the clear until its retention ends.
        self.sealer = EventSealer(keys)
        self.keys = keys
        # The broker this client writes to (read_epoch of the stack's data dir, "" without
        # an embedded broker): a producer never delivers to a broker restarted under it.
        self.epoch = epoch
        self._acks = Acknowledged()
        self.delivered = 0
        self.failed = 0
        self._failures: list[DeliveryFailure] = []
        self._lock = threading.Lock()
        self._closed = False
        self._queued = 0
        # Bound once: a labels() lookup per event costs as much as the produce itself.
        self._m_received = EVENTS_RECEIVED.labels(component=COMPONENT)
        self._m_produced = EVENTS_PRODUCED.labels(component=COMPONENT, topic=RAW)
        overrides: dict[str, Any] = {
            # Tansu and Kafka would otherwise create the raw topic with the wrong partition count.
            "allow.auto.create.topics": False,
            # Route librdkafka's logs through logging instead of raw lines on stderr.
            "logger": logging.getLogger("memstream.sdk.kafka"),
            "message.max.bytes": max_record_bytes,
        }
        overrides.update(producer_overrides)
        self._producer = Producer(producer_config(bootstrap, **overrides))
        try:
            self._check_broker(connect_timeout, check_topic)
        except MemstreamSdkError:
            self._producer.close()
            raise
        # Accepted means producible: every event is held to the topics' record limit (read
        # from the broker) before anything of its batch is queued.
        ceiling = int(overrides["message.max.bytes"])
        self.limit = (
            record_limit(bootstrap, ceiling, connect_timeout)
            if check_topic
            else RecordLimit(ceiling, "message.max.bytes")
        )

    def _check_broker(self, timeout: float, check_topic: bool) -> None:
        try:
            # No topic argument: asking for RAW by name may auto-create it on some brokers.
            md = self._producer.list_topics(timeout=timeout)
        except KafkaException as exc:
            raise BrokerUnavailableError(
                f"Kafka broker at {self.bootstrap} is unreachable "
                f"(no metadata within {timeout:g}s): {exc.args[0] if exc.args else exc}"
            ) from exc
        if check_topic and RAW not in md.topics:
            raise TopicMissingError(
                f"topic {RAW} does not exist on {self.bootstrap}; start the stack "
                "(`memstream up`) or create the topics first"
            )

    def emit(
        self,
        stream: str,
        type: str,
        payload: Mapping[str, Any],
        *,
        id: str | None = None,
        occurred_at: datetime | None = None,
        agent: str | None = None,
        parent_id: str | None = None,
        caused_by: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        security: Security | Mapping[str, Any] | None = None,
    ) -> str:
        """Validate and queue one event; returns its id. Raises ValidationError before producing."""
        fields: dict[str, Any] = {
            "id": id,
            "stream": stream,
            "type": type,
            "payload": dict(payload),
            "occurred_at": occurred_at,
            "agent": agent,
            "parent_id": parent_id,
            "caused_by": list(caused_by),
            "metadata": dict(metadata or {}),
        }
        if security is not None:
            fields["security"] = security
        try:
            event = EventIn.model_validate(fields).complete(self.tenant, agent=self.agent)
        except ValidationError:
            EVENTS_REJECTED.labels(component=COMPONENT, reason="invalid").inc()
            raise
        return self._produce(event)

    def emit_event(self, event: Event | EventIn) -> str:
        """Queue a prebuilt envelope (or an ``EventIn`` to complete); returns its id."""
        return self._produce(self._complete(event))

    def emit_many(self, events: Iterable[Event | EventIn]) -> list[str]:
        """Validate every event first, then queue them all; nothing is produced on a bad one."""
        completed = [self._complete(e) for e in events]
        values = self._sealed(completed)
        return [self._produce(e, v) for e, v in zip(completed, values, strict=True)]

    def _sealed(self, events: Sequence[Event]) -> list[bytes]:
        """The events as written, checked as the API's intake checks them
        (:func:`memstream.intake.service.sealed_values`): ``KeyDestroyed`` when one reuses
        the id of a purged event, :class:`EventTooLargeError` when one could pass the
        broker's record limit; nothing of the batch is queued."""
        values = sealed_values(events, self.sealer, self.limit.bytes, len(events) > 1)
        if isinstance(values, list):
            return values
        EVENTS_REJECTED.labels(component=COMPONENT, reason=values.reason).inc(values.count)
        if isinstance(values, Purged):
            raise KeyDestroyed([(self.tenant, i) for i in values.purged_ids])
        raise EventTooLargeError(values.detail, values.too_large, values.limit)

    def _complete(self, event: Event | EventIn) -> Event:
        try:
            done = (
                event.complete(self.tenant, agent=self.agent)
                if isinstance(event, EventIn)
                else event
            )
        except ValidationError:
            EVENTS_REJECTED.labels(component=COMPONENT, reason="invalid").inc()
            raise
        if done.tenant != self.tenant:
            EVENTS_REJECTED.labels(component=COMPONENT, reason="tenant").inc()
            raise ValueError(
                f"event {done.id} names tenant {done.tenant!r}; this client emits for "
                f"{self.tenant!r}"
            )
        return done

    def _produce(self, event: Event, value: bytes | None = None) -> str:
        if self._closed:
            raise MemstreamSdkError("MemoryClient is closed")
        key = event.key
        if value is None:
            (value,) = self._sealed([event])
        self._m_received.inc()
        try:
            produce_with_backpressure(
                self._producer,
                RAW,
                value,
                key=key.encode(),
                on_delivery=self._report,
                max_block=self.max_block,
                record_id=event.id,
            )
        except DeliveryFailed as exc:
            # Nothing was queued: refused (e.g. above message.max.bytes) or the queue stayed full.
            raise DeliveryError(
                f"event {event.id} to {self.bootstrap}: {exc.reason}",
                [DeliveryFailure(event.id, key, exc.reason)],
            ) from exc
        self._queued += 1
        if self._queued % 1000 == 0:  # serve delivery reports without a syscall per event
            self._producer.poll(0)
        return event.id

    def _report(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.delivered += 1
            self._m_produced.inc()
            partition, offset = msg.partition(), msg.offset()
            if partition is not None and offset is not None and offset >= 0:
                self._acks.add(partition, offset)
            return
        key = (msg.key() or b"").decode(errors="replace")
        try:
            event_id = str(orjson.loads(msg.value() or b"{}").get("id", "?"))
        except orjson.JSONDecodeError:
            event_id = "?"
        with self._lock:
            self.failed += 1
            self._failures.append(DeliveryFailure(event_id, key, err.str()))

    def flush(self, timeout: float = 30.0) -> str:
        """Wait for every queued event; raise DeliveryError naming failed or pending events.

        Returns the client's position: per raw partition the highest offset acknowledged so
        far, for a read to wait for with ``after=``. Signed with the tenant's secret when the
        client has the data key store, unsigned (``ms1u``) without it."""
        self._drain(timeout)
        return self.position()

    def _drain(self, timeout: float) -> None:
        remaining = self._producer.flush(timeout)
        with self._lock:
            failures, self._failures = self._failures, []
        if failures or remaining:
            parts = []
            if failures:
                shown = "; ".join(f"{f.event_id} ({f.key}): {f.error}" for f in failures[:5])
                more = f" and {len(failures) - 5} more" if len(failures) > 5 else ""
                parts.append(f"{len(failures)} event(s) failed: {shown}{more}")
            if remaining:
                parts.append(f"{remaining} still undelivered after {timeout:g}s")
            raise DeliveryError(
                f"delivery to {RAW} at {self.bootstrap}: " + "; ".join(parts),
                failures,
                remaining,
            )

    def position(self) -> str:
        """The position of every event acknowledged so far (see :meth:`flush`)."""
        raw, _ = self._acks.snapshot()
        secret = None if self.keys is None else self.keys.tenant_secret(self.tenant)
        return encode_write(Position(self.tenant, self.epoch, raw), secret)

    def close(self, timeout: float = 30.0) -> None:
        """Flush and release the producer; raises DeliveryError if anything was lost."""
        if self._closed:
            return
        try:
            self._drain(timeout)  # no position: nobody reads it, and the key store may be shut
        finally:
            self._closed = True
            self._producer.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        # Do not mask the body's exception with a delivery error raised on the way out.
        try:
            self.close()
        except DeliveryError as delivery:
            log.error("while handling %r: %s", exc, delivery)


def emit_by_tenant(
    bootstrap: str, events: Iterable[Event], keys: DataKeys | None = None, *, epoch: str = ""
) -> int:
    """Emit envelopes of any tenants: one client per tenant (``keys`` and ``epoch`` as for
    :class:`MemoryClient`), flushed on close; returns how many were emitted (DeliveryError
    names any that were not)."""
    by_tenant: dict[str, list[Event]] = {}
    for e in events:
        by_tenant.setdefault(e.tenant, []).append(e)
    for tenant, batch in by_tenant.items():
        with MemoryClient(bootstrap, tenant, keys=keys, epoch=epoch) as client:
            client.emit_many(batch)
    return sum(len(b) for b in by_tenant.values())
