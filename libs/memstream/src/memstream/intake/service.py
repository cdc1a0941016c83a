"""The write path: validate → size → seal → outbox → produce → position, in one place.

"Nothing accepted is lost" is kept here. An event is answered :class:`Accepted` only once it
is durable: fsync'd in the outbox (from where it reaches the ledger whatever single process
dies), or acknowledged by Kafka (acks=all) where there is no outbox. Everything that can
refuse it does so before any of its batch is written: the body and the models
(:mod:`memstream.intake.parse`), an id a purge destroyed, a record that could never fit the
broker's limit, a tenant whose share of the outbox is full.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from anyio import to_thread

from memstream.events import Event
from memstream.intake.outbox import Outbox, OutboxFull, TenantBacklog
from memstream.intake.outcomes import (
    REASONS,
    Accepted,
    Backlog,
    Outcome,
    Oversize,
    Purged,
    Refusal,
    Unavailable,
)
from memstream.intake.parse import MAX_BATCH, Parsed, outside, parse_body
from memstream.intake.positions import WritePositions, Writing
from memstream.intake.producer import BatchProducer
from memstream.kafka.produce import DeliveryFailed
from memstream.ledger.size import oversized, refusal
from memstream.metrics import EVENTS_RECEIVED, EVENTS_REJECTED
from memstream.scope import WHOLE, Scope
from memstream.shred.sealer import EventSealer, KeyDestroyed

log = logging.getLogger(__name__)


def sealed_values(
    events: Sequence[Event], sealer: EventSealer, limit: int, batch: bool
) -> list[bytes] | Purged | Oversize:
    """The events as written (sealed when ``sealer`` holds a key store), or why none of them
    may be: an id a purge destroyed, a record that could pass the broker's ``limit``. The
    API's intake and the Kafka SDK check every batch so (blocking: the key store is on
    disk)."""
    try:
        values = sealer.encode(events)
    except KeyDestroyed as exc:
        return Purged(str(exc), [i for _, i in exc.refs], len(events))
    found = oversized(events, values, limit, sealed=sealer.keys is not None)
    if found:
        return Oversize(refusal(found, limit, batch), limit, found, len(events))
    return values


@dataclass
class Intake:
    """One process's write path (the API's): its producer, outbox and position signer."""

    producer: BatchProducer
    positions: WritePositions
    outbox: Outbox | None
    component: str = "api"
    ack_wait_s: float = 1.0  # how long a spooled write waits for Kafka before it answers
    max_batch: int = MAX_BATCH
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def __post_init__(self) -> None:
        EVENTS_RECEIVED.labels(component=self.component)
        for reason in REASONS:  # 0 from the start: rates read 0 before the first refusal
            EVENTS_REJECTED.labels(component=self.component, reason=reason)

    async def accept(self, body: bytes, tenant: str, scope: Scope = WHOLE) -> Outcome:
        """A request body (one event or ``{"events": [...]}``) written for ``tenant`` by a
        key limited to ``scope``."""
        parsed = parse_body(body, tenant, self.clock(), self.max_batch, scope=scope)
        if not isinstance(parsed, Parsed):
            return self.refused(parsed)
        return await self.write(parsed.events, parsed.batch)

    async def write(
        self, events: list[Event], batch: bool = False, scope: Scope = WHOLE
    ) -> Outcome:
        """Validated events of one tenant made durable, or the refusal; nothing of a refused
        batch is written. ``scope``: the writer's key's, which every event must be inside."""
        if not scope.empty and (refused := outside(events, batch, scope)) is not None:
            return self.refused(refused)
        producer = self.producer
        values = await to_thread.run_sync(
            sealed_values, events, producer.sealer, producer.limit.bytes, batch
        )
        if not isinstance(values, list):
            return self.refused(values)
        EVENTS_RECEIVED.labels(component=self.component).inc(len(events))
        writing = await self.positions.start(events[0].tenant)
        if self.outbox is not None:
            return await self._spool(events, values, writing)
        return await self._produce(events, values, writing)

    def refused(self, refusal: Refusal) -> Refusal:
        """Count ``refusal`` (``memstream_events_rejected_total``) and return it."""
        EVENTS_REJECTED.labels(component=self.component, reason=refusal.reason).inc(refusal.count)
        return refusal

    async def _spool(self, events: list[Event], values: list[bytes], writing: Writing) -> Outcome:
        """Durable in the spool = accepted (its segment is named in the position); Kafka's
        acknowledgement is awaited only briefly (a broker that is down or restarting gets the
        events from the outbox later)."""
        assert self.outbox is not None
        ids = [e.id for e in events]
        try:
            spooled = await self.outbox.accept(
                events, values, self.ack_wait_s, on_report=writing.report
            )
        except TenantBacklog as exc:
            return self.refused(Backlog(str(exc), ids, len(events)))
        except OutboxFull as exc:
            return self.refused(Unavailable(str(exc), ids, ids, len(events)))
        if spooled.pending is not None:
            log.info(
                "accepted %d events into the outbox; Kafka pending: %s", len(ids), spooled.pending
            )
        return Accepted(ids, writing.token(len(events), spooled.seg_id))

    async def _produce(self, events: list[Event], values: list[bytes], writing: Writing) -> Outcome:
        """Without an outbox: accepted once Kafka acknowledged every event."""
        ids = [e.id for e in events]
        try:
            await self.producer.produce(events, on_report=writing.report, values=values)
        except DeliveryFailed as exc:
            failed = Unavailable(exc.reason, ids, exc.failed_ids, len(exc.failed_ids))
            return self.refused(failed)
        return Accepted(ids, writing.token(len(events), None))
