"""Python SDK: emit memory events to ``memory.events.raw`` through an idempotent producer.

``MemoryClient.connect(api_url, api_key)`` is the documented minimum: it asks the API for the
broker, its epoch, the record limit and whether content is sealed, proves the key on every
record (the sequencer ledgers nothing unproven: :mod:`memstream.proof`), and seals each event
under a data key the API makes for this key alone. Stack tools that run beside the data dir
build the client directly, with the key store and the stack's producer proof.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from types import TracebackType
from typing import Any

import orjson
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pydantic import ValidationError

from memstream.client import MemoryHttpClient
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
from memstream.proof import Prover
from memstream.scope import FIELDS, WHOLE, Scope
from memstream.settings import Settings
from memstream.shred.port import DataKeys, KeyKind
from memstream.shred.sealer import EventSealer, KeyDestroyed
from memstream.wire import dotted, shorten

COMPONENT = "sdk"
DATA_KEYS_PER_CALL = 1000  # the API's bound per request
PROGRESS_EVERY = 500  # events queued between two progress calls of emit_many
DEFAULT_MAX_RECORD_BYTES: int = Settings.model_fields["max_record_bytes"].default
log = logging.getLogger(__name__)


def _kafka_reason(exc: KafkaException) -> str:
    """A KafkaError's own words (its ``str()``), not its repr."""
    first = exc.args[0] if exc.args else exc
    return str(first.str() if hasattr(first, "str") else first)


class MemstreamSdkError(RuntimeError):
    """Base class of the SDK's errors."""


class BrokerUnavailableError(MemstreamSdkError):
    """The Kafka bootstrap address did not answer a metadata request in time."""


class TopicMissingError(MemstreamSdkError):
    """The broker answers but ``memory.events.raw`` does not exist (the stack is not set up)."""


class EventRefusedError(MemstreamSdkError, ValueError):
    """An event that cannot be written (invalid, or outside the key's scope): nothing of its
    batch was produced. One line naming the event (its index in the batch and its id) and
    the field; ``index``, ``event_id`` and ``field`` say the same."""

    def __init__(self, index: int, event_id: str | None, field: str, why: str) -> None:
        name = f"event {index}" + (f" ({event_id})" if event_id else "")
        super().__init__(f"{name}: {field}: {why}; nothing of the batch was produced")
        self.index, self.event_id, self.field = index, event_id, field


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
        keys: DataKeys | RemoteDataKeys | None = None,
        epoch: str = "",
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        prover: Prover | None = None,
        scope: Scope | None = None,
        user: str | None = None,
        **producer_overrides: Any,
    ) -> None:
        if not re.match(TENANT_PATTERN, tenant):
            raise ValueError(f"invalid tenant {tenant!r}: must match {TENANT_PATTERN}")
        self.bootstrap = bootstrap
        self.tenant = tenant
        self.agent = agent
        self.user = user  # the user of events that name none
        # The proof every record carries (without one the sequencer ledgers nothing), and
        # the key's scope, checked here too so a batch outside it is refused whole.
        self.prover = prover
        self.scope = scope or WHOLE
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
        self._open(max_record_bytes, connect_timeout, check_topic, producer_overrides)

    def _open(
        self, max_record_bytes: int, timeout: float, check_topic: bool, more: dict[str, Any]
    ) -> None:
        """The producer, once the broker answered (and has the raw topic), and the record
        limit every event is held to."""
        overrides: dict[str, Any] = {
            # Tansu and Kafka would otherwise create the raw topic with the wrong partition count.
            "allow.auto.create.topics": False,
            # Route librdkafka's logs through logging instead of raw lines on stderr.
            "logger": logging.getLogger("memstream.sdk.kafka"),
            "message.max.bytes": max_record_bytes,
        }
        overrides.update(more)
        self._producer = Producer(producer_config(self.bootstrap, **overrides))
        try:
            self._check_broker(timeout, check_topic)
        except MemstreamSdkError:
            self._producer.close()
            raise
        # Accepted means producible: every event is held to the topics' record limit (read
        # from the broker) before anything of its batch is queued.
        ceiling = int(overrides["message.max.bytes"])
        self.limit = (
            record_limit(self.bootstrap, ceiling, timeout)
            if check_topic
            else RecordLimit(ceiling, "message.max.bytes")
        )

    @classmethod
    def connect(
        cls,
        api_url: str,
        api_key: str,
        *,
        agent: str | None = None,
        user: str | None = None,
        bootstrap: str | None = None,
        timeout: float = 10.0,
        **options: Any,
    ) -> MemoryClient:
        """A client for ``api_key``'s tenant from the API's endpoint and the key alone: the
        broker (``bootstrap`` overrides the one the API names, when the client reaches it
        by another address), its epoch, the record limit, sealing, the key's scope (a scope
        that fixes one agent or user fills it in). ``MemstreamHttpError`` when the key may
        not write."""
        with MemoryHttpClient(api_url, api_key, timeout=timeout) as http:
            config = http.producer_config()
        scope = Scope.model_validate(config["scope"]) if config.get("scope") else WHOLE
        agent = agent or _only(scope.agent) or "sdk"
        keys = RemoteDataKeys(api_url, api_key, timeout) if config["seal"] else None
        return cls(
            bootstrap or str(config["bootstrap"]), str(config["tenant"]), agent,
            keys=keys, epoch=str(config["epoch"]),
            max_record_bytes=int(config["max_record_bytes"]), prover=Prover.for_key(api_key),
            scope=scope, user=user or _only(scope.user), **options,
        )  # fmt: skip

    def _check_broker(self, timeout: float, check_topic: bool) -> None:
        try:
            # No topic argument: asking for RAW by name may auto-create it on some brokers.
            md = self._producer.list_topics(timeout=timeout)
        except KafkaException as exc:
            raise BrokerUnavailableError(
                f"Kafka broker at {self.bootstrap} is unreachable "
                f"(no metadata within {timeout:g}s: {_kafka_reason(exc)}) — is the stack "
                "running (memstream up, memstream status) and is this its bootstrap address?"
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
        user: str | None = None,
    ) -> str:
        """Validate and queue one event; returns its id. Raises :class:`EventRefusedError`
        (invalid, or outside the key's scope) before producing."""
        fields: dict[str, Any] = {
            "id": id,
            "stream": stream,
            "type": type,
            "payload": dict(payload),
            "occurred_at": occurred_at,
            "agent": agent,
            "user": user,
            "parent_id": parent_id,
            "caused_by": list(caused_by),
            "metadata": dict(metadata or {}),
        }
        if security is not None:
            fields["security"] = security
        return self._produce(self._complete(fields, 0))

    def emit_event(self, event: Event | EventIn | Mapping[str, Any]) -> str:
        """Queue a prebuilt envelope (or an ``EventIn`` or a dict to complete); its id."""
        return self._produce(self._complete(event, 0))

    def emit_many(
        self,
        events: Iterable[Event | EventIn | Mapping[str, Any]],
        progress: Callable[[int], None] | None = None,
    ) -> list[str]:
        """Validate every event first, then queue them all: a bad one anywhere refuses the
        whole batch (:class:`EventRefusedError`, one line naming it and its field).
        ``progress`` is told how many are queued, every ``PROGRESS_EVERY`` and at the end."""
        completed = [self._complete(e, i) for i, e in enumerate(events)]
        values = self._sealed(completed)
        ids = []
        for e, v in zip(completed, values, strict=True):
            ids.append(self._produce(e, v))
            if progress is not None and len(ids) % PROGRESS_EVERY == 0:
                progress(len(ids))
        if progress is not None:
            progress(len(ids))
        return ids

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

    def _complete(self, event: Event | EventIn | Mapping[str, Any], index: int) -> Event:
        """The event as written: defaults filled in (this client's agent and user), held to
        its tenant and the key's scope; :class:`EventRefusedError` otherwise."""
        given = event.get("id") if isinstance(event, Mapping) else event.id
        try:
            if isinstance(event, Mapping):
                event = EventIn.model_validate(dict(event))
            done = (
                event.complete(self.tenant, agent=self.agent, user=self.user)
                if isinstance(event, EventIn)
                else event
            )
        except ValidationError as exc:
            EVENTS_REJECTED.labels(component=COMPONENT, reason="invalid").inc()
            first = exc.errors()[0]
            loc = first["loc"]
            kind = event.get("type") if isinstance(event, Mapping) else event.type
            if loc and loc[0] == kind:  # the union's tag: the field is the event's own
                loc = loc[1:]
            raise EventRefusedError(
                index, given if isinstance(given, str) else None,
                dotted(loc) or "event", shorten(first["msg"]),
            ) from None  # fmt: skip
        if done.tenant != self.tenant:
            EVENTS_REJECTED.labels(component=COMPONENT, reason="tenant").inc()
            why = f"{done.tenant!r} is not this client's tenant {self.tenant!r}"
            raise EventRefusedError(index, done.id, "tenant", why)
        outside = _outside(self.scope, done)
        if outside is not None:
            EVENTS_REJECTED.labels(component=COMPONENT, reason="scope").inc()
            why = f"outside this key's scope ({self.scope.label()})"
            raise EventRefusedError(index, done.id, outside, why)
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
                headers=self.prover.headers(value) if self.prover is not None else None,
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
        # Signed only beside the stack's key store: a remote client holds no tenant secret,
        # and an unsigned position is read as its tenant's all the same.
        stack_keys = None if isinstance(self.keys, RemoteDataKeys) else self.keys
        secret = None if stack_keys is None else stack_keys.tenant_secret(self.tenant)
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
            if isinstance(self.keys, RemoteDataKeys):
                self.keys.close()  # the client's own; a stack's store is its caller's

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
    bootstrap: str,
    events: Iterable[Event],
    keys: DataKeys | None = None,
    *,
    epoch: str = "",
    prover: Prover | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Emit envelopes of any tenants: one client per tenant (``keys``, ``epoch`` and
    ``prover`` as for :class:`MemoryClient`: the stack's tools prove as the stack), flushed
    on close; returns how many were emitted (DeliveryError names any that were not).
    ``progress`` is told how many of all are queued so far."""
    by_tenant: dict[str, list[Event]] = {}
    for e in events:
        by_tenant.setdefault(e.tenant, []).append(e)
    before = 0
    for tenant, batch in by_tenant.items():
        told = None if progress is None else partial(_plus, before, progress)
        with MemoryClient(bootstrap, tenant, keys=keys, epoch=epoch, prover=prover) as client:
            client.emit_many(batch, told)
        before += len(batch)
    return before


def _plus(before: int, progress: Callable[[int], None], done: int) -> None:
    progress(before + done)


def _only(values: list[str] | None) -> str | None:
    """The one value a scope field fixes, if it fixes exactly one."""
    return values[0] if values is not None and len(values) == 1 else None


def _outside(scope: Scope, event: Event) -> str | None:
    """The first field of ``event`` outside ``scope`` (None: inside it)."""
    given = {"user": event.user, "agent": event.agent, "stream": event.stream}
    for field in FIELDS:
        wanted = scope.values(field)
        if wanted is not None and given[field] not in wanted:
            return field
    return None


class RemoteDataKeys:
    """The data keys of a producer outside the stack, made by the API for its key alone
    (``POST /v1/data-keys``): what :class:`EventSealer` seals with. Keys already given are
    kept in memory, so a re-send seals under the same key without asking again."""

    def __init__(self, api_url: str, api_key: str, timeout: float = 10.0) -> None:
        self._http = MemoryHttpClient(api_url, api_key, timeout=timeout)
        self._given: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()

    def create_or_get(self, tenant: str, kind: KeyKind, ids: Iterable[str]) -> dict[str, bytes]:
        """The keys of ``ids`` this key may seal with; a purged id is absent (the sealer
        refuses it); an id whose key another writer made raises :class:`IdTakenError`."""
        wanted = list(dict.fromkeys(ids))
        with self._lock:
            missing = [i for i in wanted if (tenant, i) not in self._given]
        for start in range(0, len(missing), DATA_KEYS_PER_CALL):
            answer = self._http.data_keys(missing[start : start + DATA_KEYS_PER_CALL])
            if answer["taken"]:
                raise IdTakenError(list(answer["taken"]))
            with self._lock:
                for i, k in answer["keys"].items():
                    self._given[(tenant, i)] = base64.b64decode(k)
        with self._lock:
            return {i: self._given[(tenant, i)] for i in wanted if (tenant, i) in self._given}

    def close(self) -> None:
        self._http.close()


class IdTakenError(MemstreamSdkError, ValueError):
    """Event ids already written by another writer: an event id is one event's, for good."""

    def __init__(self, ids: Sequence[str]) -> None:
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        super().__init__(f"event id(s) {shown} belong to events another writer wrote")
        self.ids = list(ids)
