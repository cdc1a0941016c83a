"""Forgetting a data subject or a scope: the workflow every surface calls (the HTTP routes,
and through them the CLI and the MCP ``forget`` tool).

plan (the live graph: the events linked to the subject, with a bounded search for events that
name it unlinked, or the events of the scope; a key with a scope of its own reaches only
those in it) →
tombstone (the caller makes it durable, as any event) → shred (the events' and traces' data
keys) → forget what this process holds in memory → watch the stores obey. A purge still
unfinished when the watch ends keeps being watched in the background.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from memstream.checkout.memory import PacketMemory
from memstream.events.envelope import MemoryPurge
from memstream.forget.metrics import PURGES, PendingPurges
from memstream.forget.purge import PlannedEvent, PurgeReport, is_complete, planned, tombstones
from memstream.forget.topics import Reach, TopicsOutcome
from memstream.forget.watch import WATCH_MAX_POLL_S, converged, follow_up, store_checks, watch
from memstream.graph.port import GraphForgetter, PurgeScope
from memstream.ledger.purge import subject_digest
from memstream.projection.live import LiveStores
from memstream.projection.purge import PurgeOrder
from memstream.scope import WHOLE, Scope
from memstream.shred.port import DataKeys
from memstream.text.names import entity_key, name_forms, names_in
from memstream.times import to_datetime

NAMED_CANDIDATES = 200  # the most a sparse search for the subject's name returns


class Forgetting(Protocol):
    """Something a process holds in memory that a purge must forget (a cache, recent
    packets): how much it holds of what the purge reaches, and forgetting it."""

    def held(self, tenant: str, ids: Set[str], subject_key: str) -> int: ...

    def forget(self, tenant: str, ids: Set[str], subject_key: str) -> int: ...


class NothingHeld:
    """A holder that is off in this process (summaries without a model): holds nothing."""

    def held(self, tenant: str, ids: Set[str], subject_key: str) -> int:
        return 0

    def forget(self, tenant: str, ids: Set[str], subject_key: str) -> int:
        return 0


def forget_ordered(
    order: PurgeOrder,
    memory: Mapping[str, Forgetting],
    named: Iterable[str],
    secret: bytes,
) -> dict[str, int]:
    """What a purge asks of the memory of a process that did not run it (another API
    replica), read from its tombstone: the events by id and the subject by keyed digest.
    ``named``: the entity keys this process's packets name, among which the digest finds the
    subject (a question that named it is forgotten even when it cited nothing purged)."""
    key = next(
        (
            k
            for k in dict.fromkeys(named)
            if subject_digest(secret, order.tenant, k) == order.subject
        ),
        "",
    )
    ids = set(order.event_ids)
    return {name: held.forget(order.tenant, ids, key) for name, held in memory.items()}


# The topics' part of a purge: shred the traces it reaches, report per topic.
PurgeTopics = Callable[[DataKeys, Reach, int, Iterable[str]], TopicsOutcome]


class NoSubject(ValueError):
    """The subject has no letter or digit: nothing in memory can be named so."""


@dataclass(frozen=True)
class PurgePlan:
    """What one purge reaches: ``subject`` as asked (a scope's label for a scope purge,
    whose ``key`` is empty), the ids, and the events listed for the report."""

    tenant: str
    subject: str
    key: str
    scope: PurgeScope
    events: list[PlannedEvent]

    @property
    def ids(self) -> set[str]:
        return {*self.scope.event_ids, *self.scope.fact_ids, *self.scope.latent_ids}

    @property
    def forms(self) -> frozenset[str]:
        """How text names the subject (none for a scope: it reaches by id only)."""
        return name_forms(self.subject, self.key) if self.key else frozenset()

    def report(
        self,
        removed: dict[str, int],
        tombstone_ids: list[str],
        completed: dict[str, bool],
        topics: TopicsOutcome | None,
    ) -> PurgeReport:
        """The report: a dry run without a tombstone, a purge with what each store did."""
        return PurgeReport(
            subject=self.subject,
            subject_key=self.key,
            removed=removed,
            dry_run=not tombstone_ids,
            events=self.events,
            tombstone_id=tombstone_ids[0] if tombstone_ids else None,
            tombstone_ids=tombstone_ids,
            completed=completed,
            complete=is_complete(completed),
            topics=topics.topics if topics else {},
            residual=topics.residual if topics else [],
        )


@dataclass
class ForgetService:
    """Purges of one process's tenants over the live stores. ``memory``: what it holds in
    memory, by the name the report counts it under; ``packets``: the recent packets whose
    traces a purge shreds; ``reread``: drops a tenant's caches that are cheap to read again
    (parsed artifacts, lexicons) after the purge and at each check, as a checkout may have
    read one meanwhile."""

    stores: LiveStores
    packets: PacketMemory
    reread: Callable[[str], None]
    keys: DataKeys
    topics: PurgeTopics
    archive: Path
    memory: Mapping[str, Forgetting]
    pending: PendingPurges
    component: str
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def plan(self, tenant: str, subject: str, within: Scope = WHOLE) -> PurgePlan:
        """What a purge of ``subject`` reaches inside ``within`` (the purging key's scope)
        (:class:`NoSubject`; ``NoProjection``)."""
        key = entity_key(subject)
        if not key:
            raise NoSubject(f"{subject!r} names no entity")
        graph = self.stores.graph()
        named = self._named_events(tenant, subject, key)
        reached = graph.purge_scope(tenant, key, named)
        return _planned(graph, tenant, subject, key, reached, within)

    def plan_scope(self, tenant: str, scope: Scope) -> PurgePlan:
        """What a purge of every event in ``scope`` reaches (``NoProjection``)."""
        graph = self.stores.graph()
        reached = graph.derived_from(tenant, graph.scope_events(tenant, scope))
        return _planned(graph, tenant, scope.label(), "", reached, WHOLE)

    def _named_events(self, tenant: str, subject: str, key: str) -> list[str]:
        """Events whose text names the subject without the extractor linking them (written
        in lower case, say): the best sparse matches, kept when they name it as whole words.
        A bounded search, not a scan: the dry run shows what it found."""
        forms = name_forms(subject, key)
        index = self.stores.open_index(self.stores.live())
        hits = index.query(
            tenant, None, subject, limit=NAMED_CANDIDATES, mode="sparse", kinds=["event"]
        )
        return sorted(
            str(h.payload["event_id"])
            for h in hits
            if "event_id" in h.payload and names_in(str(h.payload.get("text") or ""), forms)
        )

    def preview(self, plan: PurgePlan) -> PurgeReport:
        """The dry run: what would go, changing nothing."""
        removed = planned(plan.scope)
        for name, held in self.memory.items():
            removed[name] = held.held(plan.tenant, plan.ids, plan.key)
        PURGES.labels(self.component, "dry_run").inc()
        return plan.report(removed, [], {}, None)

    def tombstones(self, plan: PurgePlan) -> list[MemoryPurge]:
        """The ``memory.purge`` events for ``plan`` (several for a purge of many events);
        the caller makes them durable."""
        secret = self.keys.tenant_secret(plan.tenant)
        # A scope purge names no entity: its digest is of the scope's label, so no entity's
        # digest matches it (another process forgets by ids).
        named = plan.key or f"scope:{plan.subject}"
        return tombstones(plan.tenant, named, plan.scope, self.clock(), secret)

    def carry_out(self, plan: PurgePlan, tombstone_ids: list[str], wait_s: float) -> PurgeReport:
        """Once the tombstones are durable: shred, forget, watch up to ``wait_s``. Raises
        what reading the topics raised (the tombstones are in; sending the purge again
        finishes it: destroying a key twice is harmless)."""
        first = tombstone_ids[0]  # the purge's name in logs and metrics
        removed, topics = self._shred(plan)
        for name, held in self.memory.items():
            removed[name] = held.forget(plan.tenant, plan.ids, plan.key)
        self.reread(plan.tenant)
        checks = store_checks(self.stores, self.archive, plan.tenant, plan.scope)

        def check() -> dict[str, bool]:
            done = converged(checks, f"purge {first}")
            self.reread(plan.tenant)  # a checkout may have read one since
            return done

        completed = watch(check, wait_s, WATCH_MAX_POLL_S)
        complete = is_complete(completed)
        PURGES.labels(self.component, "complete" if complete else "incomplete").inc()
        if not complete:
            follow_up(self.pending, first, check)
        return plan.report(removed, tombstone_ids, completed, topics)

    def _shred(self, plan: PurgePlan) -> tuple[dict[str, int], TopicsOutcome]:
        """Destroy the data keys of what the purge removes: the events' (every sealed copy
        in raw, ledger, archive and dead letters), then the checkout traces' that name the
        subject or cite what it removes (this process's recent packets included: their
        traces may not be in the topic yet)."""
        tenant, scope = plan.tenant, plan.scope
        events = self.keys.destroy(tenant, "event", scope.event_ids)
        # The latent builder destroys the keys of every artifact ever built from the events
        # when the tombstone reaches it; the ones the live graph names go here already.
        artifacts = self.keys.destroy(tenant, "latent", scope.latent_ids)
        recent = self.packets.reaching(tenant, plan.ids, plan.key)
        reach = Reach(tenant, plan.forms, plan.ids)
        outcome = self.topics(self.keys, reach, events, recent)
        removed = planned(scope) | {"data_keys": events, "artifact_keys": artifacts}
        return removed | {"checkout_traces": outcome.traces_shredded}, outcome


def _planned(
    graph: GraphForgetter,
    tenant: str,
    subject: str,
    key: str,
    reached: PurgeScope,
    within: Scope,
) -> PurgePlan:
    """The plan of a purge of what ``reached`` names (its events inside ``within`` when that
    names a scope, and what derives from those), with the events listed in time order."""
    records = graph.events(tenant, reached.event_ids)
    if not within.empty:
        records = [e for e in records if within.admits(user=e.user, agent=e.agent, stream=e.stream)]
        reached = graph.derived_from(tenant, [e.event_id for e in records])
    listed = sorted(
        (
            PlannedEvent(
                event_id=e.event_id,
                stream=e.stream,
                agent=e.agent,
                user=e.user,
                occurred_at=to_datetime(e.occurred_at),
            )
            for e in records
        ),
        key=lambda p: (p.occurred_at, p.event_id),
    )
    return PurgePlan(tenant, subject, key, reached, listed)
