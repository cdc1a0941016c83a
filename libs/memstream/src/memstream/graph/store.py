"""The graph-store logic both adapters share; all Cypher comes from ``cypher.py``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

import orjson

from memstream.events.payloads import QuestionFamily
from memstream.graph.cypher import (
    ADOPT_INVALIDATIONS,
    APPLIED_RAW,
    CHAINS_WITHIN,
    CHANGED_FACTS,
    COUNTS,
    DELETE_DERIVED_LATENTS,
    DELETE_ENTITY,
    DELETE_EVENT_FEEDBACK,
    DELETE_EVENT_INVALIDATIONS,
    DELETE_EVENTS,
    DELETE_FACTS,
    DELETE_LATENTS,
    DELETE_LOOSE_STUBS,
    DELETE_ORPHANS,
    DELETE_VALUE_NODES,
    DERIVED_LATENT_IDS,
    ENTITIES,
    EVENT,
    EVENTS,
    EVENTS_HELD,
    FACT_BY_ID,
    FACTS,
    FACTS_BY_ID,
    FACTS_FOR_SUBJECT,
    FACTS_FROM_EVENTS,
    FEEDBACK,
    IMPLICIT_ENTITY_KIND,
    INVALIDATE_FACTS,
    INVALIDATE_SOURCE_FACTS,
    INVALIDATION_LIST,
    INVALIDATIONS,
    LATENT_SOURCES,
    LATENTS,
    LATENTS_BY_ID,
    LATENTS_IN_SCOPE,
    LINK_LATENT_SOURCES,
    LINK_LATENT_SUPERSEDES,
    LINK_NEXT,
    LINK_NEXT_BY_ID,
    MAX_CHAIN_RADIUS,
    MENTIONING,
    MERGE_ENTITIES,
    MERGE_EVENTS,
    MERGE_FACTS,
    MERGE_FEEDBACK,
    MERGE_INVALIDATIONS,
    MERGE_LATENTS,
    MERGE_MENTIONS,
    NEIGHBOURHOOD,
    PURGE_EVENT_FACTS,
    PURGE_EVENT_IDS,
    PURGE_FACTS,
    PURGE_MENTIONED,
    PURGE_SCOPE_EVENTS,
    RECENT,
    RECENT_FACTS_FOR_SUBJECT,
    RECORD_PROGRESS,
    SCOPE_EVENTS,
    STREAM_PAGE,
    SUPERSEDE,
    VALUE_KEY_PREFIX,
    VALUE_KIND,
)
from memstream.graph.port import GraphRefused, InvalidationEntry, PurgeScope
from memstream.graph.validity import known_at, valid_at
from memstream.records.latent import LatentArtifact
from memstream.records.projected import (
    EntityRecord,
    EntityView,
    EventRecord,
    FactRecord,
    FactView,
    FeedbackRecord,
    GraphBatch,
    InvalidationRecord,
    SourceRef,
)
from memstream.scope import Scope
from memstream.times import as_utc, iso_z, to_datetime, utc_z

Row = dict[str, Any]
# What ``purge_events`` counts.
PURGE_KINDS = ("events", "facts", "entities", "mentions", "latents")
Run = Callable[[str, dict[str, Any]], list[Row]]
_T = TypeVar("_T")


def _event_row(e: EventRecord) -> Row:
    return {
        "tenant": e.tenant,
        "event_id": e.event_id,
        "stream": e.stream,
        "seq": e.seq,
        "hash": e.hash,
        "prev_hash": e.prev_hash,
        "type": e.type,
        "agent": e.agent,
        "occurred_at": iso_z(e.occurred_at),
        "ingested_at": iso_z(e.ingested_at),
        "text": e.text,
        "metadata_json": orjson.dumps(e.metadata, option=orjson.OPT_SORT_KEYS).decode(),
        "user": e.user,
        "caused_by": e.caused_by,
    }


def _next_rows(events: list[EventRecord]) -> tuple[list[Row], list[Row]]:
    """(pairs joined by id inside the batch, (seq, seq + 1) pairs reaching outside it)."""
    at = {(e.tenant, e.stream, e.seq): e.event_id for e in events}
    by_id: list[Row] = []
    by_seq: list[Row] = []
    for (tenant, stream, seq), event_id in sorted(at.items()):
        prev_id = at.get((tenant, stream, seq - 1))
        if prev_id is not None:
            by_id.append({"tenant": tenant, "prev_id": prev_id, "event_id": event_id})
        else:
            by_seq.append({"tenant": tenant, "stream": stream, "seq": seq - 1, "next_seq": seq})
        if (tenant, stream, seq + 1) not in at:
            by_seq.append({"tenant": tenant, "stream": stream, "seq": seq, "next_seq": seq + 1})
    return by_id, by_seq


def _fact_row(f: FactRecord) -> Row:
    value_fact = f.object_key is None
    return {
        "tenant": f.tenant,
        "fact_id": f.fact_id,
        "subject_key": f.subject_key,
        "object_node_key": VALUE_KEY_PREFIX + f.fact_id if value_fact else f.object_key,
        "object_name": f.value_text if value_fact else f.object_key,
        "object_kind": VALUE_KIND if value_fact else IMPLICIT_ENTITY_KIND,
        "predicate": f.predicate,
        "value_json": orjson.dumps(f.value).decode(),
        "value_text": f.value_text,
        "unit": f.unit,
        "valid_from": iso_z(f.valid_from),
        "recorded_at": iso_z(f.recorded_at),
        "confidence": f.confidence,
        "kind": f.kind,
        "src_stream": f.source.stream,
        "src_seq": f.source.seq,
        "src_hash": f.source.hash,
        "src_event_id": f.source.event_id,
        "src_agent": f.source_agent,
        "src_user": f.source_user,
    }


def _entity_row(n: EntityRecord) -> Row:
    return {
        "tenant": n.tenant,
        "key": n.key,
        "name": n.name,
        "kind": n.kind,
        "actor": n.actor,
        "subject": n.subject,
        "user_side": n.side == "user",
        "assistant_side": n.side == "assistant",
    }


def _optional_z(value: str | None) -> str | None:
    return iso_z(value) if value is not None else None


def _group_rows(groups: set[tuple[str, str, str]]) -> list[Row]:
    return [{"tenant": t, "subject_key": s, "predicate": p} for t, s, p in sorted(groups)]


def _feedback_row(b: FeedbackRecord) -> Row:
    family = b.family.model_dump_json() if b.family is not None else None
    return {
        "tenant": b.tenant,
        "feedback_id": b.feedback_id,
        "event_id": b.event_id,
        "target_id": b.target_id,
        "signal": b.signal,
        "certainty": b.certainty,
        "source": b.source,
        "task_id": b.task_id,
        "outcome": b.outcome,
        "family_json": family,
        "at": iso_z(b.at),
    }


def _feedback_record(r: Row) -> FeedbackRecord:
    family = r["family_json"]
    return FeedbackRecord(
        tenant=r["tenant"],
        feedback_id=r["feedback_id"],
        event_id=r["event_id"],
        target_id=r["target_id"],
        signal=float(r["signal"]),
        certainty=float(r["certainty"]),
        source=r["source"],
        task_id=r["task_id"],
        outcome=r["outcome"],
        family=QuestionFamily.model_validate_json(family) if family else None,
        at=r["at"],
    )


def _invalidation_row(v: InvalidationRecord) -> Row:
    return {
        "tenant": v.tenant,
        "invalidation_id": v.invalidation_id,
        "event_id": v.event_id,
        "target_id": v.target_id,
        "reason": v.reason,
        "status": v.status,
        "proposal_id": v.proposal_id,
        "at": iso_z(v.at),
    }


def _invalidation_record(r: Row) -> InvalidationRecord:
    return InvalidationRecord(
        tenant=r["tenant"],
        invalidation_id=r["invalidation_id"],
        event_id=r["event_id"],
        target_id=r["target_id"],
        reason=r["reason"],
        status=r["status"],
        proposal_id=r["proposal_id"],
        at=r["at"],
    )


def _closing_rows(invalidations: list[InvalidationRecord]) -> list[Row]:
    """One row per accepted target: its earliest invalidation (then lowest event id)."""
    first: dict[tuple[str, str], InvalidationRecord] = {}
    for v in sorted(invalidations, key=lambda v: (iso_z(v.at), v.event_id)):
        if v.status == "accepted":
            first.setdefault((v.tenant, v.target_id), v)
    return [
        {
            "tenant": v.tenant,
            "target_id": v.target_id,
            "at": iso_z(v.at),
            "reason": v.reason,
            "by": v.event_id,
        }
        for v in first.values()
    ]


def close_invalidated(run: Run, invalidations: list[InvalidationRecord]) -> None:
    """Close the facts accepted invalidations name (by fact id or source event id) and
    re-chain their groups: the fact an invalidated one had superseded is current again."""
    rows = _closing_rows(invalidations)
    if not rows:
        return
    groups = {
        (str(g["tenant"]), str(g["subject_key"]), str(g["predicate"]))
        for query in (INVALIDATE_FACTS, INVALIDATE_SOURCE_FACTS)
        for g in run(query, {"rows": rows})
    }
    if groups:
        run(SUPERSEDE, {"rows": _group_rows(groups)})


def batch_steps(batch: GraphBatch) -> list[tuple[str, dict[str, Any]]]:
    """The queries (one per record kind) that write ``batch``, in dependency order."""
    steps: list[tuple[str, dict[str, Any]]] = []
    if batch.events:
        steps.append((MERGE_EVENTS, {"rows": [_event_row(e) for e in batch.events]}))
        by_id, by_seq = _next_rows(batch.events)
        if by_id:
            steps.append((LINK_NEXT_BY_ID, {"rows": by_id}))
        steps.append((LINK_NEXT, {"rows": by_seq}))
    if batch.entities:
        steps.append((MERGE_ENTITIES, {"rows": [_entity_row(n) for n in batch.entities]}))
    if batch.mentions:
        rows = [
            {"tenant": m.tenant, "event_id": m.event_id, "entity_key": m.entity_key, "role": m.role}
            for m in batch.mentions
        ]
        steps.append((MERGE_MENTIONS, {"rows": rows, "implicit_kind": IMPLICIT_ENTITY_KIND}))
    if batch.invalidations:
        rows = [_invalidation_row(v) for v in batch.invalidations]
        steps.append((MERGE_INVALIDATIONS, {"rows": rows}))
    if batch.facts:
        rows = [_fact_row(f) for f in batch.facts]
        steps.append((MERGE_FACTS, {"rows": rows, "implicit_kind": IMPLICIT_ENTITY_KIND}))
        adopt = [
            {"tenant": f.tenant, "fact_id": f.fact_id, "src_event_id": f.source.event_id}
            for f in batch.facts
        ]
        steps.append((ADOPT_INVALIDATIONS, {"rows": adopt, "accepted": "accepted"}))
        groups = {(f.tenant, f.subject_key, f.predicate) for f in batch.facts}
        steps.append((SUPERSEDE, {"rows": _group_rows(groups)}))
    if batch.feedback:
        steps.append((MERGE_FEEDBACK, {"rows": [_feedback_row(b) for b in batch.feedback]}))
    return steps


def _z(ts: datetime | None) -> str | None:
    return utc_z(as_utc(ts)) if ts is not None else None


def _latent_row(a: LatentArtifact) -> Row:
    return {
        "tenant": a.tenant,
        "artifact_id": a.artifact_id,
        "artifact_type": a.artifact_type,
        "altitude": a.altitude,
        "summary": a.summary,
        "stream": a.stream,
        "group_key": a.group_key,
        "valid_from": _z(a.valid_from),
        "valid_to": _z(a.valid_to),
        "created_at": _z(a.created_at),
        "stale_at": _z(a.stale_at),
        "review_status": a.review_status,
        "confidence": a.confidence,
        "doc": a.model_dump_json(),
    }


def latent_steps(artifacts: list[LatentArtifact]) -> list[tuple[str, dict[str, Any]]]:
    """The queries that upsert ``artifacts``; of one id's records the last one counts."""
    latest = list({(a.tenant, a.artifact_id): a for a in artifacts}.values())
    if not latest:
        return []
    sources = [
        {"tenant": a.tenant, "artifact_id": a.artifact_id, "event_id": event_id}
        for a in latest
        for event_id in dict.fromkeys(a.source_ids)
    ]
    supersedes = [
        {"tenant": a.tenant, "artifact_id": a.artifact_id, "supersedes": old}
        for a in latest
        for old in dict.fromkeys(a.supersedes)
    ]
    steps: list[tuple[str, dict[str, Any]]] = [
        (MERGE_LATENTS, {"rows": [_latent_row(a) for a in latest]})
    ]
    if sources:
        steps.append((LINK_LATENT_SOURCES, {"rows": sources}))
    if supersedes:
        steps.append((LINK_LATENT_SUPERSEDES, {"rows": supersedes}))
    return steps


def _fact_view(r: Row) -> FactView:
    value_json = r["value_json"]
    return FactView(
        fact_id=r["fact_id"],
        subject_key=r["subject_key"],
        predicate=r["predicate"],
        object_key=r["object_key"],
        value=orjson.loads(value_json) if value_json is not None else None,
        value_text=r["value_text"] or "",
        unit=r["unit"],
        valid_from=r["valid_from"],
        valid_to=r["valid_to"],
        superseded_by=r["superseded_by"],
        confidence=float(r["confidence"]),
        source=SourceRef(
            tenant=r["tenant"],
            stream=r["src_stream"],
            seq=int(r["src_seq"]),
            hash=r["src_hash"],
            event_id=r["src_event_id"],
        ),
        kind=r["kind"],
        recorded_at=r.get("recorded_at"),
        invalidated_at=r.get("invalidated_at"),
        invalidation_reason=r.get("invalidation_reason"),
        invalidated_by=r.get("invalidated_by"),
        source_agent=r.get("src_agent") or "",
        source_user=r.get("src_user"),
    )


def _event_record(r: Row) -> EventRecord:
    return EventRecord(
        tenant=r["tenant"],
        event_id=r["event_id"],
        stream=r["stream"],
        seq=int(r["seq"]),
        hash=r["hash"],
        prev_hash=r["prev_hash"],
        type=r["type"],
        agent=r["agent"],
        occurred_at=r["occurred_at"],
        ingested_at=r["ingested_at"],
        text=r["text"] or "",
        metadata=orjson.loads(r["metadata_json"] or "{}"),
        user=r.get("user"),
        caused_by=list(r.get("caused_by") or []),  # none on events projected before it
    )


class CypherGraphStore(ABC):
    """``GraphStore`` over the shared dialect; adapters supply transport and DDL only.

    Supersession rule: the facts of one (tenant, subject_key, predicate) are ordered by
    (valid_from, fact_id); the last is current (``valid_to`` null) and each other one gets
    ``valid_to`` = the next one's ``valid_from`` and ``superseded_by`` = its ``fact_id``. The
    group is recomputed whole on every write that touches it, so arrival order does not
    matter and re-writing a ``fact_id`` changes nothing. Re-asserting the same object or value
    is still a new fact and supersedes the old one; other subjects/predicates are untouched.
    Timestamps come back in :func:`iso_z` form.
    """

    namespace: str

    @abstractmethod
    def ensure_schema(self) -> None:
        """Create indexes/constraints (idempotent; the per-backend DDL shim)."""

    @abstractmethod
    def drop(self) -> None:
        """Delete the whole namespace."""

    @abstractmethod
    def _read(self, query: str, params: dict[str, Any]) -> list[Row]:
        """Run a read-only query; rows as column → value."""

    @abstractmethod
    def _transact(self, work: Callable[[Run], _T]) -> _T:
        """Run ``work`` with a query runner, in one transaction where the backend has them."""

    def _refusal(self, params: dict[str, Any]) -> str | None:
        """Why the backend cannot hold ``params``, when it can tell without a round trip."""
        return None

    def _refuse_early(self, steps: list[tuple[str, dict[str, Any]]]) -> None:
        """Raise GraphRefused before any step runs: a backend without transactions
        (FalkorDB) would otherwise keep the steps before the one it refuses."""
        for _query, params in steps:
            problem = self._refusal(params)
            if problem is not None:
                raise GraphRefused(problem, in_data=True)

    def write(self, batch: GraphBatch) -> None:
        """MERGE events (+NEXT), entities, mentions, invalidations, facts; then recompute
        touched fact groups and close what accepted invalidations name."""
        steps = batch_steps(batch)

        def work(run: Run) -> None:
            for query, params in steps:
                run(query, params)
            close_invalidated(run, batch.invalidations)

        if steps:
            self._refuse_early(steps)
            self._transact(work)

    def write_latents(self, artifacts: list[LatentArtifact]) -> None:
        """Upsert latent artifacts by id with their DERIVED_FROM and SUPERSEDES edges."""
        steps = latent_steps(artifacts)
        if steps:
            self._refuse_early(steps)
            self._transact(lambda run: [run(q, p) for q, p in steps])

    def latents(
        self,
        tenant: str,
        types: list[str] | None = None,
        stream: str | None = None,
        include_stale: bool = False,
        limit: int = 100,
    ) -> list[LatentArtifact]:
        """The tenant's artifacts (of some types, of one stream), newest ``valid_from`` first;
        stale ones only with ``include_stale``."""
        params = {
            "tenant": tenant,
            "types": types,
            "stream": stream,
            "include_stale": include_stale,
            "limit": limit,
        }
        rows = self._read(LATENTS, params)
        return [LatentArtifact.model_validate_json(r["doc"]) for r in rows]

    def latents_in(
        self,
        tenant: str,
        scope: Scope,
        types: list[str] | None = None,
        include_stale: bool = False,
        limit: int = 100,
    ) -> list[LatentArtifact]:
        """The tenant's artifacts resting on at least one event of ``scope``, newest first
        (their refs untouched: the caller keeps those in the scope)."""
        params = {
            "tenant": tenant,
            "types": types,
            "include_stale": include_stale,
            "limit": limit,
            "users": scope.user,
            "agents": scope.agent,
            "streams": scope.stream,
        }
        rows = self._read(LATENTS_IN_SCOPE, params)
        return [LatentArtifact.model_validate_json(r["doc"]) for r in rows]

    def latent(self, tenant: str, artifact_id: str) -> LatentArtifact | None:
        """One artifact by id, stale or not."""
        found = self.latents_by_id(tenant, [artifact_id])
        return found[0] if found else None

    def latents_by_id(
        self, tenant: str, artifact_ids: list[str], refs: int | None = None
    ) -> list[LatentArtifact]:
        """The artifacts of ``artifact_ids`` that exist, stale or not, in the order asked;
        with ``refs``, each with its first ``refs`` source event refs only."""
        if not artifact_ids:
            return []
        rows = self._read(LATENTS_BY_ID, {"tenant": tenant, "ids": artifact_ids})
        found = {a.artifact_id: a for a in (_artifact(r["doc"], refs) for r in rows)}
        return [found[i] for i in dict.fromkeys(artifact_ids) if i in found]

    def facts_from(
        self, tenant: str, event_ids: list[str], as_of: str | None = None
    ) -> list[FactView]:
        """Facts drawn from any of ``event_ids`` that are valid at ``as_of`` (None = now)."""
        if not event_ids:
            return []
        params: dict[str, Any] = {
            "tenant": tenant,
            "event_ids": list(dict.fromkeys(event_ids)),
            "as_of": _optional_z(as_of),
            "predicate": None,
            "include_superseded": False,
        }
        return [_fact_view(r) for r in self._read(FACTS_FROM_EVENTS, params)]

    def facts(
        self,
        tenant: str,
        as_of: str | None = None,
        subject_key: str | None = None,
        predicate: str | None = None,
        include_superseded: bool = False,
    ) -> list[FactView]:
        """Facts valid at ``as_of`` (None = current ones, ``valid_to`` null).

        ``include_superseded`` drops the ``valid_to`` condition: the whole history, or the
        history asserted up to ``as_of`` when it is given. With ``as_of``, validity is as
        memory knew it then (``graph.validity``): an invalidation made later does not count.
        """
        params: dict[str, Any] = {
            "tenant": tenant,
            "as_of": _optional_z(as_of),
            "predicate": predicate,
            # as_of: the history known by then, re-chained below as it stood then
            "include_superseded": include_superseded or as_of is not None,
        }
        if subject_key is None:
            rows = self._read(FACTS, params)
        else:
            rows = self._read(FACTS_FOR_SUBJECT, {**params, "subject_key": subject_key})
        views = [_fact_view(r) for r in rows]
        if as_of is None or include_superseded:
            return views
        at = to_datetime(iso_z(as_of))
        then = {f.fact_id: f for f in known_at(views, at) if valid_at(f, at)}
        return [then[f.fact_id] for f in views if f.fact_id in then]

    def recent_facts(
        self,
        tenant: str,
        subject_key: str,
        limit: int = 20,
        include_superseded: bool = True,
        as_of: str | None = None,
    ) -> list[FactView]:
        """The newest ``limit`` facts of a subject (history included by default), of those
        recorded and valid by ``as_of`` when given."""
        params: dict[str, Any] = {
            "tenant": tenant,
            "subject_key": subject_key,
            "as_of": _optional_z(as_of),
            "predicate": None,
            "include_superseded": include_superseded,
            "limit": limit,
        }
        return [_fact_view(r) for r in self._read(RECENT_FACTS_FOR_SUBJECT, params)]

    def changed_facts(
        self, tenant: str, limit: int = 50, as_of: str | None = None
    ) -> list[FactView]:
        """The newest ``limit`` facts closed by a successor, then those successors."""
        if limit <= 0:
            return []
        params = {"tenant": tenant, "limit": limit, "as_of": _optional_z(as_of)}
        closed = [_fact_view(r) for r in self._read(CHANGED_FACTS, params)]
        have = {f.fact_id for f in closed}
        ids = sorted({f.superseded_by for f in closed if f.superseded_by} - have)
        if not ids:
            return closed
        rows = self._read(FACTS_BY_ID, {"tenant": tenant, "fact_ids": ids})
        return closed + [_fact_view(r) for r in rows]

    def mentioning(
        self, tenant: str, entity_keys: list[str], limit: int = 50, as_of: str | None = None
    ) -> list[str]:
        """Ids of events that mention the entities themselves, newest first."""
        keys = sorted(set(entity_keys))
        if not keys or limit <= 0:
            return []
        params = {"tenant": tenant, "keys": keys, "limit": limit, "as_of": _optional_z(as_of)}
        rows = self._read(MENTIONING, params)
        return [str(r["event_id"]) for r in rows]

    def fact(self, tenant: str, fact_id: str) -> FactView | None:
        """One fact by id, whatever its validity."""
        rows = self._read(FACT_BY_ID, {"tenant": tenant, "fact_id": fact_id})
        return _fact_view(rows[0]) if rows else None

    def neighbourhood(
        self, tenant: str, entity_keys: list[str], limit: int = 50, as_of: str | None = None
    ) -> list[str]:
        """Ids of events mentioning the entities or their RELATES neighbours, newest first."""
        keys = sorted(set(entity_keys))
        if not keys or limit <= 0:
            return []
        params = {"tenant": tenant, "keys": keys, "limit": limit, "as_of": _optional_z(as_of)}
        rows = self._read(NEIGHBOURHOOD, params)
        return [str(r["event_id"]) for r in rows]

    def chain(
        self, tenant: str, event_id: str, radius: int = 2, as_of: str | None = None
    ) -> list[EventRecord]:
        """The event and up to ``radius`` (at most 50) NEXT neighbours each side, by seq;
        with ``as_of``, only those that had happened by then."""
        return self.chains(tenant, [event_id], radius, as_of)[0]

    def chains(
        self, tenant: str, event_ids: list[str], radius: int = 2, as_of: str | None = None
    ) -> list[list[EventRecord]]:
        """:meth:`chain` of each of ``event_ids``, in their order, in one read."""
        if not event_ids:
            return []
        radius = max(0, min(radius, MAX_CHAIN_RADIUS))
        params = {
            "tenant": tenant,
            "event_ids": event_ids,
            "radius": radius,
            "as_of": _optional_z(as_of),
        }
        found: list[list[EventRecord]] = [[] for _ in event_ids]
        for r in self._read(CHAINS_WITHIN[radius], params):
            found[int(r["at"])].append(_event_record(r))
        return found

    def event(self, tenant: str, event_id: str) -> EventRecord | None:
        rows = self._read(EVENT, {"tenant": tenant, "event_id": event_id})
        return _event_record(rows[0]) if rows else None

    def events(self, tenant: str, event_ids: list[str]) -> list[EventRecord]:
        """The tenant's events among ``event_ids`` (unknown ids are left out)."""
        if not event_ids:
            return []
        rows = self._read(EVENTS, {"tenant": tenant, "ids": list(dict.fromkeys(event_ids))})
        return [_event_record(r) for r in rows]

    def events_held(self, tenant: str, event_ids: list[str]) -> int:
        """How many of ``event_ids`` are still the tenant's events (a count, no records)."""
        if not event_ids:
            return 0
        rows = self._read(EVENTS_HELD, {"tenant": tenant, "ids": list(dict.fromkeys(event_ids))})
        return int(rows[0]["held"]) if rows else 0

    def recent(
        self, tenant: str, limit: int = 20, stream: str | None = None, as_of: str | None = None
    ) -> list[EventRecord]:
        """The tenant's newest events (of one stream, if given), up to ``as_of`` if given."""
        params = {"tenant": tenant, "stream": stream, "limit": limit, "as_of": _optional_z(as_of)}
        rows = self._read(RECENT, params)
        return [_event_record(r) for r in rows]

    def stream_page(
        self, tenant: str, stream: str, limit: int, before: int | None = None
    ) -> list[EventRecord]:
        """See :meth:`memstream.graph.port.GraphStore.stream_page`."""
        params = {"tenant": tenant, "stream": stream, "limit": limit, "before": before}
        return [_event_record(r) for r in self._read(STREAM_PAGE, params)]

    def feedback(
        self, tenant: str, target_ids: list[str], as_of: str | None = None
    ) -> list[FeedbackRecord]:
        """Feedback about the targets, oldest first; with ``as_of``, only what was given by then."""
        if not target_ids:
            return []
        targets = list(dict.fromkeys(target_ids))
        params = {"tenant": tenant, "targets": targets, "as_of": _optional_z(as_of)}
        return [_feedback_record(r) for r in self._read(FEEDBACK, params)]

    def invalidations(
        self,
        tenant: str,
        target_ids: list[str],
        status: str | None = "accepted",
        as_of: str | None = None,
    ) -> list[InvalidationRecord]:
        """Invalidations naming the targets (of ``status``; None = any), oldest first; with
        ``as_of``, only those made by then."""
        if not target_ids:
            return []
        params = {
            "tenant": tenant,
            "targets": list(dict.fromkeys(target_ids)),
            "status": status,
            "as_of": _optional_z(as_of),
        }
        return [_invalidation_record(r) for r in self._read(INVALIDATIONS, params)]

    def invalidation_entries(
        self,
        tenant: str,
        status: str | None = None,
        limit: int = 100,
        event_id: str | None = None,
    ) -> list[InvalidationEntry]:
        """The tenant's memory.invalidate entries (of ``status``; the one ``event_id``),
        newest first, each with the decisions that name it (an open proposal has none)."""
        params = {"tenant": tenant, "status": status, "limit": limit, "event_id": event_id}
        rows = self._read(INVALIDATION_LIST, params)
        return [
            InvalidationEntry(
                event_id=str(r["event_id"]),
                target_ids=sorted(str(t) for t in r["target_ids"]),
                reason=str(r["reason"]),
                status=r["status"],
                proposal_id=r["proposal_id"],
                at=str(r["at"]),
                decisions=sorted(str(d) for d in r["decisions"] or []),
            )
            for r in rows
        ]

    def entities(self, tenant: str, limit: int = 100_000) -> list[EntityView]:
        """The tenant's entities (value nodes left out), by key, at most ``limit``."""
        rows = self._read(ENTITIES, {"tenant": tenant, "limit": limit})
        return [
            EntityView(
                key=str(r["key"]),
                name=str(r["name"] or r["key"]),
                kind=str(r["kind"] or ""),
                actor=bool(r["actor"]),
                subject=bool(r["subject"]),
                user_side=bool(r["user_side"]),
                assistant_side=bool(r["assistant_side"]),
            )
            for r in rows
        ]

    def counts(self, tenant: str | None = None) -> dict[str, int]:
        """``{"events", "entities", "facts", "mentions"}``; value nodes are not entities."""
        rows = self._read(COUNTS, {"tenant": tenant})
        row = rows[0] if rows else {}
        return {k: int(row.get(k) or 0) for k in ("events", "entities", "facts", "mentions")}

    def purge_scope(self, tenant: str, entity_key: str, named: list[str]) -> PurgeScope:
        """The events a purge of ``entity_key`` covers (linked to it, or among ``named``:
        events found to name it in text) and what was derived from them."""
        base = {"tenant": tenant, "key": entity_key}
        rows = self._read(PURGE_SCOPE_EVENTS, base)
        linked = {str(r["event_id"]) for r in rows if r["event_id"] is not None}
        return self.derived_from(tenant, sorted(linked | set(named)))

    def derived_from(self, tenant: str, event_ids: list[str]) -> PurgeScope:
        """``event_ids`` with the facts drawn from them and the artifacts built from them."""
        if not event_ids:
            return PurgeScope([], [], [])
        params = {"tenant": tenant, "event_ids": event_ids}
        facts = self._read(PURGE_EVENT_FACTS, params)
        latents = self._read(DERIVED_LATENT_IDS, params)
        return PurgeScope(
            event_ids=sorted(event_ids),
            fact_ids=sorted({str(r["fact_id"]) for r in facts}),
            latent_ids=sorted({str(r["artifact_id"]) for r in latents}),
        )

    def scope_events(self, tenant: str, scope: Scope) -> list[str]:
        """The ids of the tenant's events in ``scope``."""
        params = {
            "tenant": tenant,
            "users": scope.user,
            "agents": scope.agent,
            "streams": scope.stream,
        }
        return [str(r["event_id"]) for r in self._read(SCOPE_EVENTS, params)]

    def purge_tenant_subject(self, tenant: str, entity_key: str) -> dict[str, int]:
        """Delete the entity, its facts, the events mentioning it and the facts drawn only from
        those events (a citation must never dangle); re-close the fact groups left behind."""
        return self._transact(lambda run: _purge(run, tenant, entity_key))

    def purge_events(self, tenant: str, event_ids: list[str]) -> dict[str, int]:
        """Delete the events (and their stubs), the facts drawn from them with their value
        nodes, their mentions and feedback, the artifacts derived from them, and the entities
        they touched that are left with no mention and no fact; re-close the fact groups left
        behind. Counts removed per kind; a second call removes nothing."""
        ids = sorted(set(event_ids))
        if not ids:
            return dict.fromkeys(PURGE_KINDS, 0)
        return self._transact(lambda run: _purge_events(run, tenant, ids))

    def delete_latents(self, tenant: str, artifact_ids: list[str]) -> int:
        """Delete artifacts by id with their edges, and the event stubs only they pointed at."""
        if not artifact_ids:
            return 0
        ids = sorted(set(artifact_ids))

        def work(run: Run) -> int:
            sources = run(LATENT_SOURCES, {"tenant": tenant, "ids": ids})
            removed = _delete_latents(run, tenant, ids)
            stubs = sorted({str(r["event_id"]) for r in sources})
            if stubs:
                run(DELETE_LOOSE_STUBS, {"tenant": tenant, "event_ids": stubs})
            return removed

        return self._transact(work)

    def record_progress(self, applied: Mapping[tuple[str, str, int], int]) -> None:
        """Max-merge per (epoch, tenant, raw partition) the highest raw offset applied."""
        rows: list[Row] = [
            {"tenant": tenant, "epoch": epoch, "partition": p, "raw": raw}
            for (epoch, tenant, p), raw in sorted(applied.items())
        ]
        if rows:
            steps = [(RECORD_PROGRESS, {"rows": rows})]
            self._refuse_early(steps)
            self._transact(lambda run: [run(q, params) for q, params in steps])

    def applied_raw(self, tenant: str) -> dict[tuple[str, int], int]:
        """(epoch, raw partition) -> the highest raw offset of the tenant applied."""
        rows = self._read(APPLIED_RAW, {"tenant": tenant})
        return {(str(r["epoch"]), int(r["partition"])): int(r["raw"]) for r in rows}

    @abstractmethod
    def compact(self) -> None:
        """Make deleted data leave the backend's files (after a purge; slow)."""


def _count(rows: list[Row], column: str) -> int:
    return int(rows[0][column] or 0) if rows else 0


def _remove_facts(run: Run, tenant: str, facts: list[Row], purged_subject: str = "") -> int:
    """Delete the facts and their value nodes; re-close the fact groups they leave behind
    (the purged subject's own groups are gone whole)."""
    fact_ids = sorted({str(r["fact_id"]) for r in facts})
    if not fact_ids:
        return 0
    value_keys = [VALUE_KEY_PREFIX + fact_id for fact_id in fact_ids]
    run(DELETE_VALUE_NODES, {"tenant": tenant, "keys": value_keys})
    run(DELETE_FACTS, {"tenant": tenant, "fact_ids": fact_ids})
    groups = {
        (tenant, r["subject_key"], r["predicate"])
        for r in facts
        if r["subject_key"] != purged_subject
    }
    if groups:
        run(SUPERSEDE, {"rows": _group_rows(groups)})
    return len(fact_ids)


def _remove_events(run: Run, tenant: str, event_ids: list[str]) -> tuple[int, int]:
    """Delete the events (stubs too) with their edges: (events, mentions) removed."""
    if not event_ids:
        return 0, 0
    rows = run(DELETE_EVENTS, {"tenant": tenant, "event_ids": event_ids})
    return _count(rows, "events"), _count(rows, "mentions")


def _purge(run: Run, tenant: str, key: str) -> dict[str, int]:
    base = {"tenant": tenant, "key": key}
    event_ids = sorted({str(r["event_id"]) for r in run(PURGE_EVENT_IDS, base)})
    facts = run(PURGE_FACTS, {**base, "event_ids": event_ids})
    removed = _remove_facts(run, tenant, facts, purged_subject=key)
    events, mentions = _remove_events(run, tenant, event_ids)
    entities = int(run(DELETE_ENTITY, base)[0]["entities"])
    return {"events": events, "entities": entities, "facts": removed, "mentions": mentions}


def _purge_events(run: Run, tenant: str, event_ids: list[str]) -> dict[str, int]:
    """See :meth:`CypherGraphStore.purge_events`; every step is idempotent."""
    base = {"tenant": tenant, "event_ids": event_ids}
    touched = {str(r["key"]) for r in run(PURGE_MENTIONED, base)}
    facts = run(PURGE_EVENT_FACTS, base)
    touched |= {str(r[k]) for r in facts for k in ("subject_key", "object_key") if r[k]}
    # Before the events go: the artifacts are found through their DERIVED_FROM edges.
    latents = _count(run(DELETE_DERIVED_LATENTS, base), "latents")
    removed = _remove_facts(run, tenant, facts)
    run(DELETE_EVENT_FEEDBACK, base)
    run(DELETE_EVENT_INVALIDATIONS, base)
    events, mentions = _remove_events(run, tenant, event_ids)
    keys = sorted(k for k in touched if not k.startswith(VALUE_KEY_PREFIX))
    entities = 0
    if keys:
        entities = _count(run(DELETE_ORPHANS, {"tenant": tenant, "keys": keys}), "entities")
    return {
        "events": events,
        "facts": removed,
        "entities": entities,
        "mentions": mentions,
        "latents": latents,
    }


def _delete_latents(run: Run, tenant: str, artifact_ids: list[str]) -> int:
    rows = run(DELETE_LATENTS, {"tenant": tenant, "ids": artifact_ids})
    return _count(rows, "latents")


def _artifact(doc: str, refs: int | None) -> LatentArtifact:
    """An artifact's stored document, parsed; with ``refs``, cut to its first source refs
    before validation (an episode may rest on hundreds: validating them all was most of a
    checkout's artifact read)."""
    if refs is None:
        return LatentArtifact.model_validate_json(doc)
    data = orjson.loads(doc)
    data["source_event_refs"] = data["source_event_refs"][:refs]
    return LatentArtifact.model_validate(data)
