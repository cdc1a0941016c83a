"""The one Cypher dialect of the graph port (common subset of Neo4j 5 and FalkorDB).

Values travel only as ``$params`` (batches as ``UNWIND $rows AS r``); nothing here is built
by string formatting. Timestamps are stored as fixed-width UTC ISO strings
(``YYYY-MM-DDTHH:MM:SS.ffffffZ``, see :func:`iso_z`) so that string comparison is time order.

Model (DESIGN §3.3): ``(:Event)-[:NEXT]->(:Event)`` per tenant/stream by ``seq``;
``(:Event)-[:MENTIONS {role}]->(:Entity)``; facts as
``(:Entity)-[:RELATES {fact_id, predicate, valid_from, valid_to, superseded_by, ...}]->(:Entity)``.
A value fact (no object entity) points at its own value node
``(:Entity {kind: 'value', key: 'value:<fact_id>'})``; ``kind = 'value'`` is reserved for these
and they are not counted as entities. Every node and edge carries ``tenant``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson

from memstream.projection.model import (
    EventRecord,
    FactRecord,
    FactView,
    GraphBatch,
    SourceRef,
)

VALUE_KIND = "value"
VALUE_KEY_PREFIX = "value:"
IMPLICIT_ENTITY_KIND = "thing"  # entities first seen in a mention or fact, not an EntityRecord
MAX_CHAIN_RADIUS = 50  # must match the literal bound in CHAIN (bounds cannot be $params)

# -- writes -----------------------------------------------------------------------------------

# Events are immutable ledger entries: set on create only, so redelivery writes nothing.
MERGE_EVENTS = """
UNWIND $rows AS r
MERGE (e:Event {tenant: r.tenant, event_id: r.event_id})
ON CREATE SET e.stream = r.stream, e.seq = r.seq, e.hash = r.hash, e.prev_hash = r.prev_hash,
  e.type = r.type, e.agent = r.agent, e.occurred_at = r.occurred_at,
  e.ingested_at = r.ingested_at, e.text = r.text, e.metadata_json = r.metadata_json
"""

# NEXT links appear as soon as both ends exist, whichever arrived first. Neighbours inside
# the batch are joined by event_id (a selective index lookup); only the batch's edges per
# stream need the (stream, seq) lookup of LINK_NEXT.
LINK_NEXT_BY_ID = """
UNWIND $rows AS r
MATCH (a:Event {tenant: r.tenant, event_id: r.prev_id})
MATCH (b:Event {tenant: r.tenant, event_id: r.event_id})
MERGE (a)-[:NEXT {tenant: r.tenant}]->(b)
"""

LINK_NEXT = """
UNWIND $rows AS r
MATCH (a:Event {tenant: r.tenant, stream: r.stream, seq: r.seq})
MATCH (b:Event {tenant: r.tenant, stream: r.stream, seq: r.next_seq})
MERGE (a)-[:NEXT {tenant: r.tenant}]->(b)
"""

MERGE_ENTITIES = """
UNWIND $rows AS r
MERGE (n:Entity {tenant: r.tenant, key: r.key})
SET n.name = r.name, n.kind = r.kind
"""

# A mention of an event not (yet) in the graph is dropped; the entity is created if missing.
MERGE_MENTIONS = """
UNWIND $rows AS r
MATCH (e:Event {tenant: r.tenant, event_id: r.event_id})
MERGE (n:Entity {tenant: r.tenant, key: r.entity_key})
ON CREATE SET n.name = r.entity_key, n.kind = $implicit_kind
MERGE (e)-[:MENTIONS {tenant: r.tenant, role: r.role}]->(n)
"""

# Validity (valid_to, superseded_by) is left to SUPERSEDE; a re-written fact_id changes nothing.
MERGE_FACTS = """
UNWIND $rows AS r
MERGE (s:Entity {tenant: r.tenant, key: r.subject_key})
ON CREATE SET s.name = r.subject_key, s.kind = $implicit_kind
MERGE (o:Entity {tenant: r.tenant, key: r.object_node_key})
ON CREATE SET o.name = r.object_name, o.kind = r.object_kind
MERGE (s)-[f:RELATES {tenant: r.tenant, fact_id: r.fact_id}]->(o)
ON CREATE SET f.predicate = r.predicate, f.value_json = r.value_json,
  f.value_text = r.value_text, f.unit = r.unit, f.valid_from = r.valid_from,
  f.confidence = r.confidence, f.kind = r.kind, f.src_stream = r.src_stream,
  f.src_seq = r.src_seq, f.src_hash = r.src_hash, f.src_event_id = r.src_event_id
"""

# Recomputes one (tenant, subject, predicate) group from scratch, so the result does not
# depend on arrival order: sorted by (valid_from, fact_id), each fact is closed by the next.
# Only edges whose validity actually changes are written.
SUPERSEDE = """
UNWIND $rows AS r
MATCH (s:Entity {tenant: r.tenant, key: r.subject_key})-[f:RELATES]->(:Entity)
WHERE f.tenant = r.tenant AND f.predicate = r.predicate
WITH r.tenant AS tenant, r.subject_key AS subject_key, r.predicate AS predicate, f
ORDER BY f.valid_from, f.fact_id
WITH tenant, subject_key, predicate, collect(f) AS fs
UNWIND range(0, size(fs) - 1) AS i
WITH fs[i] AS f, CASE WHEN i + 1 < size(fs) THEN fs[i + 1] ELSE null END AS nxt
WITH f,
  CASE WHEN nxt IS NULL THEN null ELSE nxt.valid_from END AS valid_to,
  CASE WHEN nxt IS NULL THEN null ELSE nxt.fact_id END AS superseded_by
WHERE coalesce(f.valid_to, '') <> coalesce(valid_to, '')
  OR coalesce(f.superseded_by, '') <> coalesce(superseded_by, '')
SET f.valid_to = valid_to, f.superseded_by = superseded_by
RETURN count(f) AS changed
"""

# -- reads ------------------------------------------------------------------------------------

_FACT_FILTER = """
WHERE f.tenant = $tenant
  AND ($predicate IS NULL OR f.predicate = $predicate)
  AND ($as_of IS NULL OR f.valid_from <= $as_of)
  AND ($include_superseded
       OR ($as_of IS NULL AND f.valid_to IS NULL)
       OR ($as_of IS NOT NULL AND (f.valid_to IS NULL OR f.valid_to > $as_of)))
"""

_FACT_RETURN = """
RETURN f.fact_id AS fact_id, s.key AS subject_key, f.predicate AS predicate,
  CASE WHEN o.kind = 'value' THEN null ELSE o.key END AS object_key,
  f.value_json AS value_json, f.value_text AS value_text, f.unit AS unit,
  f.valid_from AS valid_from, f.valid_to AS valid_to, f.superseded_by AS superseded_by,
  f.confidence AS confidence, f.kind AS kind, f.tenant AS tenant, f.src_stream AS src_stream,
  f.src_seq AS src_seq, f.src_hash AS src_hash, f.src_event_id AS src_event_id
ORDER BY subject_key, predicate, valid_from, fact_id
"""

FACTS = "MATCH (s:Entity {tenant: $tenant})-[f:RELATES]->(o:Entity)" + _FACT_FILTER + _FACT_RETURN

FACTS_FOR_SUBJECT = (
    "MATCH (s:Entity {tenant: $tenant, key: $subject_key})-[f:RELATES]->(o:Entity)"
    + _FACT_FILTER
    + _FACT_RETURN
)

NEIGHBOURHOOD = """
UNWIND $keys AS k
MATCH (x:Entity {tenant: $tenant, key: k})
OPTIONAL MATCH (x)-[f:RELATES]-(y:Entity)
WHERE f.tenant = $tenant AND y.tenant = $tenant
WITH x, collect(y) AS ys
UNWIND [x] + ys AS n
MATCH (e:Event)-[m:MENTIONS]->(n)
WHERE e.tenant = $tenant AND m.tenant = $tenant
WITH DISTINCT e
ORDER BY e.occurred_at DESC, e.seq DESC, e.event_id DESC
LIMIT $limit
RETURN e.event_id AS event_id
"""

_EVENT_COLUMNS = """
  n.tenant AS tenant, n.event_id AS event_id, n.stream AS stream, n.seq AS seq,
  n.hash AS hash, n.prev_hash AS prev_hash, n.type AS type, n.agent AS agent,
  n.occurred_at AS occurred_at, n.ingested_at AS ingested_at, n.text AS text,
  n.metadata_json AS metadata_json
"""

EVENT = "MATCH (n:Event {tenant: $tenant, event_id: $event_id})\nRETURN" + _EVENT_COLUMNS

# Walks NEXT (not a seq window) so a gap in the projection ends the chain honestly.
CHAIN = (
    """
MATCH (e:Event {tenant: $tenant, event_id: $event_id})
OPTIONAL MATCH p = (b:Event)-[:NEXT*1..50]->(e)
WHERE length(p) <= $radius AND b.tenant = $tenant
WITH e, collect(b) AS before
OPTIONAL MATCH q = (e)-[:NEXT*1..50]->(a:Event)
WHERE length(q) <= $radius AND a.tenant = $tenant
WITH e, before, collect(a) AS after
UNWIND before + [e] + after AS n
RETURN"""
    + _EVENT_COLUMNS
    + "ORDER BY seq"
)

# ``$tenant`` null counts every tenant (the operator view).
COUNTS = """
OPTIONAL MATCH (e:Event) WHERE $tenant IS NULL OR e.tenant = $tenant
WITH count(e) AS events
OPTIONAL MATCH (n:Entity)
WHERE ($tenant IS NULL OR n.tenant = $tenant) AND coalesce(n.kind, '') <> 'value'
WITH events, count(n) AS entities
OPTIONAL MATCH (:Entity)-[f:RELATES]->() WHERE $tenant IS NULL OR f.tenant = $tenant
WITH events, entities, count(f) AS facts
OPTIONAL MATCH (:Event)-[m:MENTIONS]->() WHERE $tenant IS NULL OR m.tenant = $tenant
RETURN events, entities, facts, count(m) AS mentions
"""

# -- purge ------------------------------------------------------------------------------------

PURGE_EVENT_IDS = """
MATCH (e:Event)-[m:MENTIONS]->(x:Entity {tenant: $tenant, key: $key})
WHERE e.tenant = $tenant AND m.tenant = $tenant
RETURN DISTINCT e.event_id AS event_id
"""

# Facts about the subject (either end) and facts whose evidence is a purged event. Edge-index
# lookups keep endpoints unlabeled: FalkorDB would label-scan every Entity otherwise.
PURGE_FACTS = """
MATCH (s:Entity {tenant: $tenant, key: $key})-[f:RELATES]->(:Entity)
WHERE f.tenant = $tenant
RETURN f.fact_id AS fact_id, s.key AS subject_key, f.predicate AS predicate
UNION
MATCH (s:Entity)-[f:RELATES]->(:Entity {tenant: $tenant, key: $key})
WHERE f.tenant = $tenant
RETURN f.fact_id AS fact_id, s.key AS subject_key, f.predicate AS predicate
UNION
UNWIND $event_ids AS id
MATCH (s)-[f:RELATES {src_event_id: id}]->()
WHERE f.tenant = $tenant
RETURN f.fact_id AS fact_id, s.key AS subject_key, f.predicate AS predicate
"""

# DELETE stays the last clause: FalkorDB silently skips a DELETE whose rows a later WITH
# filters away, so value nodes go in their own query (DETACH takes their edge along).
DELETE_VALUE_NODES = """
UNWIND $keys AS k
MATCH (v:Entity {tenant: $tenant, key: k})
WHERE v.kind = 'value'
DETACH DELETE v
"""

DELETE_FACTS = """
UNWIND $fact_ids AS id
MATCH ()-[f:RELATES {fact_id: id}]->()
WHERE f.tenant = $tenant
DELETE f
"""

DELETE_EVENTS = """
UNWIND $event_ids AS id
MATCH (e:Event {tenant: $tenant, event_id: id})
OPTIONAL MATCH (e)-[m:MENTIONS]->(:Entity)
WITH e, count(m) AS mentions
DETACH DELETE e
RETURN count(e) AS events, sum(mentions) AS mentions
"""

DELETE_ENTITY = """
MATCH (x:Entity {tenant: $tenant, key: $key})
DETACH DELETE x
RETURN count(x) AS entities
"""

# Batched so a large namespace does not need one huge transaction (Neo4j's drop).
DELETE_SOME_NODES = """
MATCH (n)
WITH n LIMIT $limit
DETACH DELETE n
RETURN count(n) AS deleted
"""


# -- the store logic both adapters share --------------------------------------------------------

Row = dict[str, Any]
Run = Callable[[str, dict[str, Any]], list[Row]]
_T = TypeVar("_T")


def iso_z(value: str) -> str:
    """Fixed-width UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ``; naive input is taken as UTC.

    The fixed width matters: ``…:00Z`` sorts after ``…:00.5Z`` as a string, so the ledger's
    variable-width ``isoformat`` cannot be compared as stored.
    """
    try:
        ts = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"not an ISO 8601 timestamp: {value!r}") from exc
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
        "confidence": f.confidence,
        "kind": f.kind,
        "src_stream": f.source.stream,
        "src_seq": f.source.seq,
        "src_hash": f.source.hash,
        "src_event_id": f.source.event_id,
    }


def _group_rows(groups: set[tuple[str, str, str]]) -> list[Row]:
    return [{"tenant": t, "subject_key": s, "predicate": p} for t, s, p in sorted(groups)]


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
        rows = [
            {"tenant": n.tenant, "key": n.key, "name": n.name, "kind": n.kind}
            for n in batch.entities
        ]
        steps.append((MERGE_ENTITIES, {"rows": rows}))
    if batch.mentions:
        rows = [
            {"tenant": m.tenant, "event_id": m.event_id, "entity_key": m.entity_key, "role": m.role}
            for m in batch.mentions
        ]
        steps.append((MERGE_MENTIONS, {"rows": rows, "implicit_kind": IMPLICIT_ENTITY_KIND}))
    if batch.facts:
        rows = [_fact_row(f) for f in batch.facts]
        steps.append((MERGE_FACTS, {"rows": rows, "implicit_kind": IMPLICIT_ENTITY_KIND}))
        groups = {(f.tenant, f.subject_key, f.predicate) for f in batch.facts}
        steps.append((SUPERSEDE, {"rows": _group_rows(groups)}))
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

    def write(self, batch: GraphBatch) -> None:
        """MERGE events (+NEXT), entities, mentions, facts; then recompute touched fact groups."""
        steps = batch_steps(batch)
        if steps:
            self._transact(lambda run: [run(q, p) for q, p in steps])

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
        history asserted up to ``as_of`` when it is given.
        """
        params: dict[str, Any] = {
            "tenant": tenant,
            "as_of": iso_z(as_of) if as_of is not None else None,
            "predicate": predicate,
            "include_superseded": include_superseded,
        }
        if subject_key is None:
            rows = self._read(FACTS, params)
        else:
            rows = self._read(FACTS_FOR_SUBJECT, {**params, "subject_key": subject_key})
        return [_fact_view(r) for r in rows]

    def neighbourhood(self, tenant: str, entity_keys: list[str], limit: int = 50) -> list[str]:
        """Ids of events mentioning the entities or their RELATES neighbours, newest first."""
        keys = sorted(set(entity_keys))
        if not keys or limit <= 0:
            return []
        rows = self._read(NEIGHBOURHOOD, {"tenant": tenant, "keys": keys, "limit": limit})
        return [str(r["event_id"]) for r in rows]

    def chain(self, tenant: str, event_id: str, radius: int = 2) -> list[EventRecord]:
        """The event and up to ``radius`` (at most 50) NEXT neighbours each side, by seq."""
        radius = max(0, min(radius, MAX_CHAIN_RADIUS))
        rows = self._read(CHAIN, {"tenant": tenant, "event_id": event_id, "radius": radius})
        return [_event_record(r) for r in rows]

    def event(self, tenant: str, event_id: str) -> EventRecord | None:
        rows = self._read(EVENT, {"tenant": tenant, "event_id": event_id})
        return _event_record(rows[0]) if rows else None

    def counts(self, tenant: str | None = None) -> dict[str, int]:
        """``{"events", "entities", "facts", "mentions"}``; value nodes are not entities."""
        rows = self._read(COUNTS, {"tenant": tenant})
        row = rows[0] if rows else {}
        return {k: int(row.get(k) or 0) for k in ("events", "entities", "facts", "mentions")}

    def purge_tenant_subject(self, tenant: str, entity_key: str) -> dict[str, int]:
        """Delete the entity, its facts, the events mentioning it and the facts drawn only from
        those events (a citation must never dangle); re-close the fact groups left behind."""
        return self._transact(lambda run: _purge(run, tenant, entity_key))


def _purge(run: Run, tenant: str, key: str) -> dict[str, int]:
    base = {"tenant": tenant, "key": key}
    event_ids = sorted({str(r["event_id"]) for r in run(PURGE_EVENT_IDS, base)})
    facts = run(PURGE_FACTS, {**base, "event_ids": event_ids})
    fact_ids = sorted({str(r["fact_id"]) for r in facts})
    # Groups of other subjects that lost a fact need their validity chain re-closed.
    groups = {(tenant, r["subject_key"], r["predicate"]) for r in facts if r["subject_key"] != key}
    if fact_ids:
        value_keys = [VALUE_KEY_PREFIX + fact_id for fact_id in fact_ids]
        run(DELETE_VALUE_NODES, {"tenant": tenant, "keys": value_keys})
        run(DELETE_FACTS, {"tenant": tenant, "fact_ids": fact_ids})
    events = mentions = 0
    if event_ids:
        row = run(DELETE_EVENTS, {"tenant": tenant, "event_ids": event_ids})[0]
        events, mentions = int(row["events"]), int(row["mentions"] or 0)
    entities = int(run(DELETE_ENTITY, base)[0]["entities"])
    if groups:
        run(SUPERSEDE, {"rows": _group_rows(groups)})
    return {"events": events, "entities": entities, "facts": len(fact_ids), "mentions": mentions}
