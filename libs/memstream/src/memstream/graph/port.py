"""``GraphStore``: the temporal graph of events, entities and facts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from memstream.records.latent import LatentArtifact
from memstream.records.projected import (
    EntityView,
    EventRecord,
    FactView,
    FeedbackRecord,
    GraphBatch,
    InvalidationRecord,
)
from memstream.scope import Scope
from memstream.store_errors import StoreRefused, StoreUnavailable


class GraphUnavailable(StoreUnavailable):
    """The graph server cannot be reached (down or restarting): retry later."""

    store = "graph"


class GraphRefused(StoreRefused):
    """The graph server refuses what a write or read carries (e.g. a NUL byte for FalkorDB)."""

    store = "graph"


@dataclass(frozen=True)
class PurgeScope:
    """What a purge of one subject reaches in the graph: the events linked to it and what
    was derived from them (ids only)."""

    event_ids: list[str]
    fact_ids: list[str]
    latent_ids: list[str]


@dataclass(frozen=True)
class InvalidationEntry:
    """One ``memory.invalidate`` entry as projected: a proposal, a decision or an acceptance;
    ``decisions`` = ``"<event id> <status>"`` of the entries that decide it."""

    event_id: str
    target_ids: list[str]
    reason: str
    status: str
    proposal_id: str | None
    at: str
    decisions: list[str]


class GraphWriter(Protocol):
    """What a projector does to its namespace: write what the ledger says, obey tombstones,
    keep its progress, rewrite and drop its files."""

    namespace: str

    def ensure_schema(self) -> None:
        """Create indexes/constraints (idempotent; the only per-backend DDL)."""

    def write(self, batch: GraphBatch) -> None:
        """MERGE events (+NEXT chain), entities, mentions and facts; supersede old facts."""

    def write_latents(self, artifacts: list[LatentArtifact]) -> None:
        """Upsert artifacts by id (the last record of an id wins, e.g. one with ``stale_at``),
        with ``DERIVED_FROM`` to their source events and ``SUPERSEDES`` to older artifacts,
        whichever arrives first."""

    def delete_latents(self, tenant: str, artifact_ids: list[str]) -> int:
        """Delete artifacts by id (a latent deletion record) with their edges; count removed."""

    def purge_events(self, tenant: str, event_ids: list[str]) -> dict[str, int]:
        """Obey a purge tombstone: delete the events, the facts drawn from them (re-closing
        the fact groups left behind), their mentions, the artifacts derived from them and the
        entities they leave with no mention and no fact. Counts removed per kind
        (``events, facts, entities, mentions, latents``); idempotent."""

    def record_progress(self, applied: Mapping[tuple[str, str, int], int]) -> None:
        """Keep what the projection applied: per (broker epoch, tenant, raw partition), the
        highest raw offset (max-merged: an older or redelivered batch never lowers it).
        Offsets only, no content; ``drop`` removes it with the namespace."""

    def compact(self) -> None:
        """Rewrite the backend's files so deleted data no longer lies in them (after a purge;
        slow: never on the path of ordinary writes)."""

    def drop(self) -> None:
        """Delete the whole namespace."""


class GraphReader(Protocol):
    """What a checkout reads (and lineage, search, the invalidation routes)."""

    namespace: str

    def latents(
        self,
        tenant: str,
        types: list[str] | None = None,
        stream: str | None = None,
        include_stale: bool = False,
        limit: int = 100,
    ) -> list[LatentArtifact]:
        """The tenant's artifacts (of ``types``, of one ``stream``), newest ``valid_from``
        first; stale ones only with ``include_stale``."""

    def latents_in(
        self,
        tenant: str,
        scope: Scope,
        types: list[str] | None = None,
        include_stale: bool = False,
        limit: int = 100,
    ) -> list[LatentArtifact]:
        """The tenant's artifacts resting on at least one event of ``scope``, newest
        ``valid_from`` first (their refs untouched: the caller keeps those in the scope)."""

    def latent(self, tenant: str, artifact_id: str) -> LatentArtifact | None:
        """One artifact by id, stale or not."""

    def latents_by_id(
        self, tenant: str, artifact_ids: list[str], refs: int | None = None
    ) -> list[LatentArtifact]:
        """The artifacts of ``artifact_ids`` that exist, stale or not, in the order asked
        (one query). With ``refs``, each keeps only its first ``refs`` source event refs
        (what a packet cites; the lineage of the artifact id has them all)."""

    def facts_from(
        self, tenant: str, event_ids: list[str], as_of: str | None = None
    ) -> list[FactView]:
        """Facts drawn from any of ``event_ids`` that are valid at ``as_of`` (None = now)."""

    def facts(
        self,
        tenant: str,
        as_of: str | None = None,
        subject_key: str | None = None,
        predicate: str | None = None,
        include_superseded: bool = False,
    ) -> list[FactView]:
        """Facts valid at ``as_of`` (ISO; None = now = open-ended), or all with history."""

    def recent_facts(
        self,
        tenant: str,
        subject_key: str,
        limit: int = 20,
        include_superseded: bool = True,
        as_of: str | None = None,
    ) -> list[FactView]:
        """The newest ``limit`` facts of a subject (history included by default); with
        ``as_of``, only facts recorded and valid from by then."""

    def changed_facts(
        self, tenant: str, limit: int = 50, as_of: str | None = None
    ) -> list[FactView]:
        """The newest ``limit`` facts closed by a successor (newest close first), then those
        successors; with ``as_of``, only facts memory had recorded by then."""

    def mentioning(
        self, tenant: str, entity_keys: list[str], limit: int = 50, as_of: str | None = None
    ) -> list[str]:
        """Ids of events that mention the entities themselves, newest first (and, with
        ``as_of``, that had happened by then)."""

    def fact(self, tenant: str, fact_id: str) -> FactView | None:
        """One fact by id, whatever its validity."""

    def neighbourhood(
        self, tenant: str, entity_keys: list[str], limit: int = 50, as_of: str | None = None
    ) -> list[str]:
        """Event ids that mention the entities or their one-hop fact neighbours."""

    def chain(
        self, tenant: str, event_id: str, radius: int = 2, as_of: str | None = None
    ) -> list[EventRecord]:
        """The event and up to ``radius`` neighbours before/after it on its stream (that had
        happened by ``as_of``, if given)."""

    def chains(
        self, tenant: str, event_ids: list[str], radius: int = 2, as_of: str | None = None
    ) -> list[list[EventRecord]]:
        """:meth:`chain` of each of ``event_ids``, in their order (one read)."""

    def event(self, tenant: str, event_id: str) -> EventRecord | None: ...

    def events(self, tenant: str, event_ids: list[str]) -> list[EventRecord]:
        """The tenant's events among ``event_ids`` (unknown ids are left out)."""

    def recent(
        self, tenant: str, limit: int = 20, stream: str | None = None, as_of: str | None = None
    ) -> list[EventRecord]:
        """The tenant's newest events (of one stream, if given; up to ``as_of``, if given)."""

    def stream_page(
        self, tenant: str, stream: str, limit: int, before: int | None = None
    ) -> list[EventRecord]:
        """Up to ``limit`` of one stream's events in write order, newest first, each with a
        seq below ``before`` (if given)."""

    def feedback(
        self, tenant: str, target_ids: list[str], as_of: str | None = None
    ) -> list[FeedbackRecord]:
        """Feedback about the targets (oldest first), given by ``as_of`` if set."""

    def invalidations(
        self,
        tenant: str,
        target_ids: list[str],
        status: str | None = "accepted",
        as_of: str | None = None,
    ) -> list[InvalidationRecord]:
        """Invalidations naming the targets (of ``status``, None = any; made by ``as_of``)."""

    def invalidation_entries(
        self,
        tenant: str,
        status: str | None = None,
        limit: int = 100,
        event_id: str | None = None,
    ) -> list[InvalidationEntry]:
        """The tenant's memory.invalidate entries (of ``status``; the one ``event_id``),
        newest first, with their decisions."""

    def entities(self, tenant: str, limit: int = 100_000) -> list[EntityView]:
        """The tenant's entities with their role flags (for query-time resolution)."""

    def counts(self, tenant: str | None = None) -> dict[str, int]:
        """``{"events", "entities", "facts", "mentions"}`` (all tenants when None)."""


class GraphForgetter(Protocol):
    """What a purge asks of the graph: what a subject reaches, and whether it is gone."""

    namespace: str

    def purge_scope(self, tenant: str, entity_key: str, named: list[str]) -> PurgeScope:
        """The events a purge of ``entity_key`` covers (mentioned, speaking, either end of a
        fact, or among ``named``: events whose text names it, found by the caller) and the
        facts and latent artifacts derived from them; reads only."""

    def events_held(self, tenant: str, event_ids: list[str]) -> int:
        """How many of ``event_ids`` the graph still holds as the tenant's events (a count:
        no records read, however many ids a purge watches)."""

    def latents_by_id(
        self, tenant: str, artifact_ids: list[str], refs: int | None = None
    ) -> list[LatentArtifact]:
        """The artifacts of ``artifact_ids`` that exist, stale or not, in the order asked
        (one query). With ``refs``, each keeps only its first ``refs`` source event refs
        (what a packet cites; the lineage of the artifact id has them all)."""

    def derived_from(self, tenant: str, event_ids: list[str]) -> PurgeScope:
        """``event_ids`` with the facts drawn from them and the artifacts built from them."""

    def scope_events(self, tenant: str, scope: Scope) -> list[str]:
        """The ids of the tenant's events in ``scope`` (every field it names holds one of
        its values)."""

    def events(self, tenant: str, event_ids: list[str]) -> list[EventRecord]:
        """The tenant's events among ``event_ids`` (unknown ids are left out)."""

    def purge_tenant_subject(self, tenant: str, entity_key: str) -> dict[str, int]:
        """Delete an entity, its facts and the events mentioning it; counts removed."""


class GraphPoller(Protocol):
    """What a read given ``after=`` polls: how far the projection applied a tenant."""

    namespace: str

    def applied_raw(self, tenant: str) -> dict[tuple[str, int], int]:
        """The tenant's progress: (broker epoch, raw partition) -> highest raw offset applied
        (empty for a namespace that has applied nothing of the tenant)."""


class GraphStore(GraphWriter, GraphReader, GraphForgetter, GraphPoller, Protocol):
    """One projection namespace (a FalkorDB graph / a Neo4j database) of one version: every
    role above, as the one Cypher store implements them. A caller takes the role it needs.

    Every method raises :class:`GraphUnavailable` when the server cannot be reached and
    :class:`GraphRefused` when it refuses what the call carries; any other exception is a bug.
    """
