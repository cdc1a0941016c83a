"""The one Cypher dialect of the graph port (common subset of Neo4j 5 and FalkorDB).

Values travel only as ``$params`` (batches as ``UNWIND $rows AS r``); nothing here is built
by string formatting. Timestamps are stored as fixed-width UTC ISO strings
(``YYYY-MM-DDTHH:MM:SS.ffffffZ``, see :func:`iso_z`) so that string comparison is time order.

Model: ``(:Event)-[:NEXT]->(:Event)`` per tenant/stream by ``seq``;
``(:Event)-[:MENTIONS {role}]->(:Entity)``; facts as
``(:Entity)-[:RELATES {fact_id, predicate, valid_from, valid_to, superseded_by, ...}]->(:Entity)``.
A value fact (no object entity) points at its own value node
``(:Entity {kind: 'value', key: 'value:<fact_id>'})``; ``kind = 'value'`` is reserved for these
and they are not counted as entities. Latent artifacts are
``(:Latent {artifact_id, artifact_type, altitude, ..., doc})`` with
``(:Latent)-[:DERIVED_FROM]->(:Event)`` per source event and ``(:Latent)-[:SUPERSEDES]->(:Latent)``.
Every node and edge carries ``tenant``.
"""

from __future__ import annotations

VALUE_KIND = "value"
VALUE_KEY_PREFIX = "value:"
IMPLICIT_ENTITY_KIND = "thing"  # entities first seen in a mention or fact, not an EntityRecord
MAX_CHAIN_RADIUS = 50  # must match the literal bound in CHAINS (bounds cannot be $params)

# -- writes -----------------------------------------------------------------------------------

# Events are immutable ledger entries. A node matched here is either a redelivered entry (the
# same values again) or the stub a latent artifact's DERIVED_FROM made before the entry arrived
# (see LINK_LATENT_SOURCES), which this fills in. Stubs have no ``seq``: event reads skip them.
_EVENT_PROPERTIES = """e.stream = r.stream, e.seq = r.seq, e.hash = r.hash,
  e.prev_hash = r.prev_hash, e.type = r.type, e.agent = r.agent, e.occurred_at = r.occurred_at,
  e.ingested_at = r.ingested_at, e.text = r.text, e.metadata_json = r.metadata_json,
  e.user = r.user, e.caused_by = r.caused_by
"""
MERGE_EVENTS = (
    """
UNWIND $rows AS r
MERGE (e:Event {tenant: r.tenant, event_id: r.event_id})
ON CREATE SET """
    + _EVENT_PROPERTIES
    + "ON MATCH SET "
    + _EVENT_PROPERTIES
)

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

# The role flags only ever turn on: what an entity has been stays true whatever came later.
MERGE_ENTITIES = """
UNWIND $rows AS r
MERGE (n:Entity {tenant: r.tenant, key: r.key})
SET n.name = r.name, n.kind = r.kind,
  n.actor = coalesce(n.actor, false) OR r.actor,
  n.subject = coalesce(n.subject, false) OR r.subject,
  n.user_side = coalesce(n.user_side, false) OR r.user_side,
  n.assistant_side = coalesce(n.assistant_side, false) OR r.assistant_side
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
  f.confidence = r.confidence, f.kind = r.kind, f.recorded_at = r.recorded_at,
  f.src_stream = r.src_stream,
  f.src_seq = r.src_seq, f.src_hash = r.src_hash, f.src_event_id = r.src_event_id,
  f.src_agent = r.src_agent, f.src_user = r.src_user
"""

# Recomputes one (tenant, subject, predicate) group from scratch, so the result does not
# depend on arrival order: sorted by (valid_from, fact_id), each fact is closed by the next.
# Only edges whose validity actually changes are written. An invalidated fact is no link of
# the chain (it closes nothing; its own valid_to is the invalidation's).
SUPERSEDE = """
UNWIND $rows AS r
MATCH (s:Entity {tenant: r.tenant, key: r.subject_key})-[f:RELATES]->(:Entity)
WHERE f.tenant = r.tenant AND f.predicate = r.predicate AND f.invalidated_at IS NULL
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

# A signal about a memory; immutable, like the ledger entry it comes from. Not
# linked to its target by an edge: a target may be a fact (an edge itself) or not projected yet.
MERGE_FEEDBACK = """
UNWIND $rows AS r
MERGE (b:Feedback {tenant: r.tenant, feedback_id: r.feedback_id})
ON CREATE SET b.event_id = r.event_id, b.target_id = r.target_id, b.signal = r.signal,
  b.certainty = r.certainty, b.source = r.source, b.task_id = r.task_id, b.outcome = r.outcome,
  b.family_json = r.family_json, b.at = r.at
"""

# Every target of a memory.invalidate entry: proposals, decisions, acceptances.
MERGE_INVALIDATIONS = """
UNWIND $rows AS r
MERGE (v:Invalidation {tenant: r.tenant, invalidation_id: r.invalidation_id})
ON CREATE SET v.event_id = r.event_id, v.target_id = r.target_id, v.reason = r.reason,
  v.status = r.status, v.proposal_id = r.proposal_id, v.at = r.at
"""

# How an accepted invalidation closes a fact: valid_to = its time (never before the fact's
# valid_from), out of the supersession chain. Of several, the earliest (then lowest event id)
# holds, whatever the arrival order. Returns the fact groups to re-chain.
_CLOSE_INVALIDATED = """
WHERE f.tenant = r.tenant AND (f.invalidated_at IS NULL OR r.at < f.invalidated_at
  OR (r.at = f.invalidated_at AND r.by < f.invalidated_by))
SET f.invalidated_at = r.at, f.invalidation_reason = r.reason, f.invalidated_by = r.by,
  f.valid_to = CASE WHEN r.at < f.valid_from THEN f.valid_from ELSE r.at END,
  f.superseded_by = null
WITH DISTINCT r.tenant AS tenant, s.key AS subject_key, f.predicate AS predicate
RETURN tenant, subject_key, predicate
"""

# Accepted invalidations arriving after their facts: the target is a fact id or the id of the
# event the facts come from (two queries, so each can use its edge index).
INVALIDATE_FACTS = (
    """
UNWIND $rows AS r
MATCH (s:Entity)-[f:RELATES {fact_id: r.target_id}]->(:Entity)"""
    + _CLOSE_INVALIDATED
)
INVALIDATE_SOURCE_FACTS = (
    """
UNWIND $rows AS r
MATCH (s:Entity)-[f:RELATES {src_event_id: r.target_id}]->(:Entity)"""
    + _CLOSE_INVALIDATED
)

# Facts arriving after an accepted invalidation of them (another stream may come first): each
# new fact takes the earliest one naming it or its source event. Runs before SUPERSEDE.
ADOPT_INVALIDATIONS = (
    """
UNWIND $rows AS q
UNWIND [q.fact_id, q.src_event_id] AS target
MATCH (v:Invalidation {target_id: target})
WHERE v.tenant = q.tenant AND v.status = $accepted
WITH q, v ORDER BY v.at, v.event_id
WITH q, collect(v)[0] AS v
WITH q, {tenant: q.tenant, at: v.at, reason: v.reason, by: v.event_id} AS r
MATCH (s:Entity)-[f:RELATES {fact_id: q.fact_id}]->(:Entity)"""
    + _CLOSE_INVALIDATED
)

# An artifact is re-sent with ``stale_at`` once a source is superseded: an upsert by id, the
# record received last wins. ``doc`` is the whole artifact (it reads back exactly); the other
# properties are what queries filter and sort on.
MERGE_LATENTS = """
UNWIND $rows AS r
MERGE (l:Latent {tenant: r.tenant, artifact_id: r.artifact_id})
SET l.artifact_type = r.artifact_type, l.altitude = r.altitude, l.summary = r.summary,
  l.stream = r.stream, l.group_key = r.group_key, l.valid_from = r.valid_from,
  l.valid_to = r.valid_to, l.created_at = r.created_at, l.stale_at = r.stale_at,
  l.review_status = r.review_status, l.confidence = r.confidence, l.doc = r.doc
"""

# The ledger and the latents topic are read independently, so an artifact may arrive before
# its source events: the event is MERGEd by the key MERGE_EVENTS uses, which fills it in later.
LINK_LATENT_SOURCES = """
UNWIND $rows AS r
MATCH (l:Latent {tenant: r.tenant, artifact_id: r.artifact_id})
MERGE (e:Event {tenant: r.tenant, event_id: r.event_id})
MERGE (l)-[:DERIVED_FROM {tenant: r.tenant}]->(e)
"""

# Likewise a superseded artifact not seen yet is a stub (no ``doc``) until its record arrives.
LINK_LATENT_SUPERSEDES = """
UNWIND $rows AS r
MATCH (l:Latent {tenant: r.tenant, artifact_id: r.artifact_id})
MERGE (o:Latent {tenant: r.tenant, artifact_id: r.supersedes})
MERGE (l)-[:SUPERSEDES {tenant: r.tenant}]->(o)
"""

# -- reads ------------------------------------------------------------------------------------

# As of a time, a fact exists only if memory had recorded it by then (facts projected
# before ``recorded_at`` existed count as recorded when they became valid).
_FACT_FILTER = """
WHERE f.tenant = $tenant
  AND ($predicate IS NULL OR f.predicate = $predicate)
  AND ($as_of IS NULL OR f.valid_from <= $as_of)
  AND ($as_of IS NULL OR coalesce(f.recorded_at, f.valid_from) <= $as_of)
  AND ($include_superseded
       OR ($as_of IS NULL AND f.valid_to IS NULL)
       OR ($as_of IS NOT NULL AND (f.valid_to IS NULL OR f.valid_to > $as_of)))
"""

_FACT_RETURN = """
RETURN f.fact_id AS fact_id, s.key AS subject_key, f.predicate AS predicate,
  CASE WHEN o.kind = 'value' THEN null ELSE o.key END AS object_key,
  f.value_json AS value_json, f.value_text AS value_text, f.unit AS unit,
  f.valid_from AS valid_from, f.valid_to AS valid_to, f.superseded_by AS superseded_by,
  f.confidence AS confidence, f.kind AS kind, f.recorded_at AS recorded_at,
  f.tenant AS tenant, f.src_stream AS src_stream,
  f.src_seq AS src_seq, f.src_hash AS src_hash, f.src_event_id AS src_event_id,
  f.src_agent AS src_agent, f.src_user AS src_user,
  f.invalidated_at AS invalidated_at, f.invalidation_reason AS invalidation_reason,
  f.invalidated_by AS invalidated_by
ORDER BY subject_key, predicate, valid_from, fact_id
"""

FACTS = "MATCH (s:Entity {tenant: $tenant})-[f:RELATES]->(o:Entity)" + _FACT_FILTER + _FACT_RETURN

# Facts drawn from some events (by the edge index on ``src_event_id``; endpoints unlabelled).
FACTS_FROM_EVENTS = (
    "UNWIND $event_ids AS id\nMATCH (s)-[f:RELATES {src_event_id: id}]->(o)"
    + _FACT_FILTER
    + _FACT_RETURN
)

# Unlabelled endpoints: FalkorDB then looks the edge up by its index instead of scanning.
FACT_BY_ID = (
    "MATCH (s)-[f:RELATES {fact_id: $fact_id}]->(o)\nWHERE f.tenant = $tenant" + _FACT_RETURN
)

FACTS_FOR_SUBJECT = (
    "MATCH (s:Entity {tenant: $tenant, key: $subject_key})-[f:RELATES]->(o:Entity)"
    + _FACT_FILTER
    + _FACT_RETURN
)

# The newest ``$limit`` facts of one subject (checkout's fact lane: bounded on busy subjects).
RECENT_FACTS_FOR_SUBJECT = (
    "MATCH (s:Entity {tenant: $tenant, key: $subject_key})-[f:RELATES]->(o:Entity)"
    + _FACT_FILTER
    + "WITH s, f, o ORDER BY f.valid_from DESC, f.fact_id DESC LIMIT $limit"
    + _FACT_RETURN
)

# The newest ``$limit`` facts closed by a successor (checkout's change questions that name no
# subject): the tenant's facts are walked once; invalidated facts closed nothing.
CHANGED_FACTS = (
    "MATCH (s:Entity {tenant: $tenant})-[f:RELATES]->(o:Entity)\n"
    "WHERE f.tenant = $tenant AND f.superseded_by IS NOT NULL AND f.invalidated_at IS NULL\n"
    "  AND ($as_of IS NULL OR coalesce(f.recorded_at, f.valid_from) <= $as_of)\n"
    "WITH s, f, o ORDER BY f.valid_to DESC, f.fact_id DESC LIMIT $limit" + _FACT_RETURN
)

# Facts by id, by the edge index on ``fact_id`` (unlabelled endpoints, as FACT_BY_ID).
FACTS_BY_ID = (
    "UNWIND $fact_ids AS id\nMATCH (s)-[f:RELATES {fact_id: id}]->(o)\nWHERE f.tenant = $tenant"
    + _FACT_RETURN
)

# Events mentioning the entities themselves, newest first (no fact hop: bounded work).
# ``$as_of`` (null = no bound) leaves out events that had not happened yet.
MENTIONING = """
UNWIND $keys AS k
MATCH (e:Event)-[m:MENTIONS]->(x:Entity {tenant: $tenant, key: k})
WHERE e.tenant = $tenant AND ($as_of IS NULL OR e.occurred_at <= $as_of)
WITH DISTINCT e
ORDER BY e.occurred_at DESC, e.seq DESC, e.event_id DESC
LIMIT $limit
RETURN e.event_id AS event_id
"""

NEIGHBOURHOOD = """
UNWIND $keys AS k
MATCH (x:Entity {tenant: $tenant, key: k})
OPTIONAL MATCH (x)-[f:RELATES]-(y:Entity)
WHERE f.tenant = $tenant AND y.tenant = $tenant
WITH x, collect(y) AS ys
UNWIND [x] + ys AS n
MATCH (e:Event)-[m:MENTIONS]->(n)
WHERE e.tenant = $tenant AND m.tenant = $tenant AND ($as_of IS NULL OR e.occurred_at <= $as_of)
WITH DISTINCT e
ORDER BY e.occurred_at DESC, e.seq DESC, e.event_id DESC
LIMIT $limit
RETURN e.event_id AS event_id
"""

# The tenant's entities for query-time resolution (value nodes are not entities).
ENTITIES = """
MATCH (n:Entity {tenant: $tenant})
WHERE coalesce(n.kind, '') <> 'value'
RETURN n.key AS key, n.name AS name, n.kind AS kind, coalesce(n.actor, false) AS actor,
  coalesce(n.subject, false) AS subject, coalesce(n.user_side, false) AS user_side,
  coalesce(n.assistant_side, false) AS assistant_side
ORDER BY key
LIMIT $limit
"""

_EVENT_COLUMNS = """
  n.tenant AS tenant, n.event_id AS event_id, n.stream AS stream, n.seq AS seq,
  n.hash AS hash, n.prev_hash AS prev_hash, n.type AS type, n.agent AS agent,
  n.occurred_at AS occurred_at, n.ingested_at AS ingested_at, n.text AS text,
  n.metadata_json AS metadata_json, n.user AS user, n.caused_by AS caused_by
"""

# ``seq IS NOT NULL``: an event stub (see MERGE_EVENTS) is not an event yet.
EVENT = (
    "MATCH (n:Event {tenant: $tenant, event_id: $event_id})\nWHERE n.seq IS NOT NULL\nRETURN"
    + _EVENT_COLUMNS
)

EVENTS = (
    "UNWIND $ids AS id\nMATCH (n:Event {tenant: $tenant, event_id: id})\n"
    "WHERE n.seq IS NOT NULL\nRETURN" + _EVENT_COLUMNS
)

# How many of the ids are still events of the tenant: a purge's watch asks it until 0.
EVENTS_HELD = (
    "UNWIND $ids AS id\nMATCH (n:Event {tenant: $tenant, event_id: id})\n"
    "WHERE n.seq IS NOT NULL\nRETURN count(n) AS held"
)

RECENT = (
    """
MATCH (n:Event)
WHERE n.tenant = $tenant AND n.seq IS NOT NULL AND ($stream IS NULL OR n.stream = $stream)
  AND ($as_of IS NULL OR n.occurred_at <= $as_of)
WITH n ORDER BY n.occurred_at DESC, n.seq DESC LIMIT $limit
RETURN"""
    + _EVENT_COLUMNS
)

# One stream's events in write order (ledger seq), newest first, below ``$before`` (null: from
# the newest): a page of a stream's listing, resumed from the last page's smallest seq.
STREAM_PAGE = (
    """
MATCH (n:Event)
WHERE n.tenant = $tenant AND n.stream = $stream AND n.seq IS NOT NULL
  AND ($before IS NULL OR n.seq < $before)
WITH n ORDER BY n.seq DESC LIMIT $limit
RETURN"""
    + _EVENT_COLUMNS
)

# Walks NEXT (not a seq window) so a gap in the projection ends the chain honestly.
# The chain around each of ``$event_ids``, by its position in the list (``at``) then seq: one
# round trip for the several chains a checkout reads.
CHAINS = (
    """
UNWIND range(0, size($event_ids) - 1) AS at
WITH at, $event_ids[at] AS id
MATCH (e:Event {tenant: $tenant, event_id: id})
WHERE e.seq IS NOT NULL AND ($as_of IS NULL OR e.occurred_at <= $as_of)
OPTIONAL MATCH p = (b:Event)-[:NEXT*1..50]->(e)
WHERE length(p) <= $radius AND b.tenant = $tenant AND ($as_of IS NULL OR b.occurred_at <= $as_of)
WITH at, e, collect(b) AS before
OPTIONAL MATCH q = (e)-[:NEXT*1..50]->(a:Event)
WHERE length(q) <= $radius AND a.tenant = $tenant AND ($as_of IS NULL OR a.occurred_at <= $as_of)
WITH at, e, before, collect(a) AS after
UNWIND before + [e] + after AS n
RETURN at,"""
    + _EVENT_COLUMNS
    + "ORDER BY at, seq"
)
# The same read with the walk bounded by the radius asked for (a bound cannot be a $param):
# FalkorDB walks every path up to the literal bound before ``length(p) <= $radius`` drops
# the long ones: a checkout's radius 1 read of 3 events took 1.27 ms with bound 50 and
# 0.80 ms with bound 1, the same rows (p50 of 400 pairs, 300k events on FalkorDB).
CHAINS_WITHIN = {
    radius: CHAINS.replace(f"*1..{MAX_CHAIN_RADIUS}]", f"*1..{max(radius, 1)}]")
    for radius in range(MAX_CHAIN_RADIUS + 1)
}

# Invalidations naming the targets (``$status`` null = any), oldest first.
INVALIDATIONS = """
UNWIND $targets AS target
MATCH (v:Invalidation {target_id: target})
WHERE v.tenant = $tenant AND ($status IS NULL OR v.status = $status)
  AND ($as_of IS NULL OR v.at <= $as_of)
RETURN v.tenant AS tenant, v.invalidation_id AS invalidation_id, v.event_id AS event_id,
  v.target_id AS target_id, v.reason AS reason, v.status AS status,
  v.proposal_id AS proposal_id, v.at AS at
ORDER BY v.at, v.invalidation_id
"""

# A tenant's invalidation entries of one status, newest first, with the decisions naming them
# (a proposal with none is still open).
INVALIDATION_LIST = """
MATCH (v:Invalidation)
WHERE v.tenant = $tenant AND ($status IS NULL OR v.status = $status)
  AND ($event_id IS NULL OR v.event_id = $event_id)
WITH v.event_id AS event_id, collect(v) AS vs
WITH event_id, vs, vs[0] AS v
OPTIONAL MATCH (d:Invalidation {proposal_id: event_id})
WHERE d.tenant = $tenant
WITH event_id, vs, v, collect(DISTINCT d.event_id + ' ' + d.status) AS decisions
RETURN event_id, v.reason AS reason, v.status AS status, v.proposal_id AS proposal_id,
  v.at AS at, [x IN vs | x.target_id] AS target_ids, decisions
ORDER BY at DESC, event_id
LIMIT $limit
"""

# ``$tenant`` null counts every tenant (the operator view).
FEEDBACK = """
UNWIND $targets AS target
MATCH (b:Feedback {target_id: target})
WHERE b.tenant = $tenant AND ($as_of IS NULL OR b.at <= $as_of)
RETURN b.tenant AS tenant, b.feedback_id AS feedback_id, b.event_id AS event_id,
  b.target_id AS target_id, b.signal AS signal, b.certainty AS certainty, b.source AS source,
  b.task_id AS task_id, b.outcome AS outcome, b.family_json AS family_json, b.at AS at
ORDER BY b.at, b.feedback_id
"""

COUNTS = """
OPTIONAL MATCH (e:Event) WHERE ($tenant IS NULL OR e.tenant = $tenant) AND e.seq IS NOT NULL
WITH count(e) AS events
OPTIONAL MATCH (n:Entity)
WHERE ($tenant IS NULL OR n.tenant = $tenant) AND coalesce(n.kind, '') <> 'value'
WITH events, count(n) AS entities
OPTIONAL MATCH (:Entity)-[f:RELATES]->() WHERE $tenant IS NULL OR f.tenant = $tenant
WITH events, entities, count(f) AS facts
OPTIONAL MATCH (:Event)-[m:MENTIONS]->() WHERE $tenant IS NULL OR m.tenant = $tenant
RETURN events, entities, facts, count(m) AS mentions
"""

# Newest first; stubs (no ``doc``: a superseded artifact not received yet) are left out.
LATENTS = """
MATCH (l:Latent {tenant: $tenant})
WHERE l.doc IS NOT NULL
  AND ($types IS NULL OR l.artifact_type IN $types)
  AND ($stream IS NULL OR l.stream = $stream)
  AND ($include_stale OR l.stale_at IS NULL)
WITH l ORDER BY l.valid_from DESC, l.artifact_id LIMIT $limit
RETURN l.doc AS doc
"""

# The same, narrowed to artifacts resting on at least one event of a scope (None: any value).
# Artifacts are read first and their sources after (the WITH): far fewer artifacts than events.
LATENTS_IN_SCOPE = """
MATCH (l:Latent {tenant: $tenant})
WHERE l.doc IS NOT NULL
  AND ($types IS NULL OR l.artifact_type IN $types)
  AND ($include_stale OR l.stale_at IS NULL)
WITH l
MATCH (l)-[:DERIVED_FROM]->(e:Event)
WHERE e.tenant = $tenant AND e.seq IS NOT NULL
  AND ($users IS NULL OR e.user IN $users)
  AND ($agents IS NULL OR e.agent IN $agents)
  AND ($streams IS NULL OR e.stream IN $streams)
WITH DISTINCT l
WITH l ORDER BY l.valid_from DESC, l.artifact_id LIMIT $limit
RETURN l.doc AS doc
"""

LATENTS_BY_ID = """
UNWIND $ids AS id
MATCH (l:Latent {tenant: $tenant, artifact_id: id})
WHERE l.doc IS NOT NULL
RETURN l.doc AS doc
"""

# -- purge ------------------------------------------------------------------------------------

PURGE_EVENT_IDS = """
MATCH (e:Event)-[m:MENTIONS]->(x:Entity {tenant: $tenant, key: $key})
WHERE e.tenant = $tenant AND m.tenant = $tenant
RETURN DISTINCT e.event_id AS event_id
"""

# Facts whose evidence is one of some events (``purge_events`` and the subject purge). Edge-index
# lookups keep endpoints unlabeled: FalkorDB would label-scan every Entity otherwise.
_FACTS_OF_EVENTS = """
UNWIND $event_ids AS id
MATCH (s)-[f:RELATES {src_event_id: id}]->(o)
WHERE f.tenant = $tenant
RETURN f.fact_id AS fact_id, s.key AS subject_key, f.predicate AS predicate, o.key AS object_key
"""
PURGE_EVENT_FACTS = _FACTS_OF_EVENTS

# Facts about the subject (either end) and facts whose evidence is a purged event.
PURGE_FACTS = (
    """
MATCH (s:Entity {tenant: $tenant, key: $key})-[f:RELATES]->(o:Entity)
WHERE f.tenant = $tenant
RETURN f.fact_id AS fact_id, s.key AS subject_key, f.predicate AS predicate, o.key AS object_key
UNION
MATCH (s:Entity)-[f:RELATES]->(o:Entity {tenant: $tenant, key: $key})
WHERE f.tenant = $tenant
RETURN f.fact_id AS fact_id, s.key AS subject_key, f.predicate AS predicate, o.key AS object_key
UNION"""
    + _FACTS_OF_EVENTS
)

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

# The entities some events mention: the only ones their removal can leave orphaned.
PURGE_MENTIONED = """
UNWIND $event_ids AS id
MATCH (e:Event {tenant: $tenant, event_id: id})-[m:MENTIONS]->(x:Entity)
RETURN DISTINCT x.key AS key
"""

# Artifacts derived from a purged event go whole (their summaries hold its text), stale or not.
# Each event is found by its index first (the WITH): written as one pattern, FalkorDB scans
# every artifact once per id, and a purge of a few thousand events held the graph for minutes.
DELETE_DERIVED_LATENTS = """
UNWIND $event_ids AS id
MATCH (e:Event {tenant: $tenant, event_id: id})
WITH e
MATCH (l:Latent)-[:DERIVED_FROM]->(e)
WHERE l.tenant = $tenant
WITH DISTINCT l
DETACH DELETE l
RETURN count(l) AS latents
"""

DELETE_EVENT_FEEDBACK = """
MATCH (b:Feedback)
WHERE b.tenant = $tenant AND b.event_id IN $event_ids
DELETE b
"""

# Invalidations written by purged events (their reason may hold its text) or naming them.
DELETE_EVENT_INVALIDATIONS = """
MATCH (v:Invalidation)
WHERE v.tenant = $tenant AND (v.event_id IN $event_ids OR v.target_id IN $event_ids)
DELETE v
"""

# Of the entities a purge touched, those left with no mention and no fact.
DELETE_ORPHANS = """
UNWIND $keys AS k
MATCH (x:Entity {tenant: $tenant, key: k})
WHERE NOT ()-[:MENTIONS]->(x) AND NOT (x)-[:RELATES]-()
DELETE x
RETURN count(x) AS entities
"""

LATENT_SOURCES = """
UNWIND $ids AS id
MATCH (l:Latent {tenant: $tenant, artifact_id: id})-[:DERIVED_FROM]->(e:Event)
RETURN DISTINCT e.event_id AS event_id
"""

# Artifacts deleted by id (a latent deletion record), with their edges.
DELETE_LATENTS = """
UNWIND $ids AS id
MATCH (l:Latent {tenant: $tenant, artifact_id: id})
DETACH DELETE l
RETURN count(l) AS latents
"""

# Event stubs (no ``seq``: made by a DERIVED_FROM before the entry arrived) nothing derives from.
DELETE_LOOSE_STUBS = """
UNWIND $event_ids AS id
MATCH (e:Event {tenant: $tenant, event_id: id})
WHERE e.seq IS NULL AND NOT ()-[:DERIVED_FROM]->(e)
DELETE e
"""

# -- progress (what the projection applied: offsets only, no content) ------------------------

# One node per (tenant, broker epoch, raw partition). The highest raw offset wins whatever
# the order batches arrive in: a redelivered or older batch never lowers it. A new node's
# ``x.raw`` is null, ``null > r.raw`` is null, and CASE takes the ELSE branch.
RECORD_PROGRESS = """
UNWIND $rows AS r
MERGE (x:Progress {tenant: r.tenant, epoch: r.epoch, partition: r.partition})
SET x.raw = CASE WHEN x.raw > r.raw THEN x.raw ELSE r.raw END
"""

APPLIED_RAW = """
MATCH (x:Progress {tenant: $tenant})
RETURN x.epoch AS epoch, x.partition AS partition, x.raw AS raw
"""

# Batched so a large namespace does not need one huge transaction (Neo4j's drop).
DELETE_SOME_NODES = """
MATCH (n)
WITH n LIMIT $limit
DETACH DELETE n
RETURN count(n) AS deleted
"""

# -- purge scope (read-only: what a purge of one subject would remove) -------------------------

# Events linked to the subject: it is mentioned, speaks (the agent is an actor mention), or is
# either end of a fact drawn from the event.
PURGE_SCOPE_EVENTS = """
MATCH (e:Event)-[m:MENTIONS]->(x:Entity {tenant: $tenant, key: $key})
WHERE e.tenant = $tenant AND m.tenant = $tenant
RETURN DISTINCT e.event_id AS event_id
UNION
MATCH (:Entity {tenant: $tenant, key: $key})-[f:RELATES]->(:Entity)
WHERE f.tenant = $tenant
RETURN DISTINCT f.src_event_id AS event_id
UNION
MATCH (:Entity)-[f:RELATES]->(:Entity {tenant: $tenant, key: $key})
WHERE f.tenant = $tenant
RETURN DISTINCT f.src_event_id AS event_id
"""

# Events in a scope (a purge by scope): each field, when given, one of its values. A field
# left out is passed as null and matches every event.
SCOPE_EVENTS = """
MATCH (e:Event {tenant: $tenant})
WHERE e.seq IS NOT NULL
  AND ($users IS NULL OR e.user IN $users)
  AND ($agents IS NULL OR e.agent IN $agents)
  AND ($streams IS NULL OR e.stream IN $streams)
RETURN e.event_id AS event_id
ORDER BY event_id
"""

# The artifacts built from some events (a purge's reach; the facts are PURGE_EVENT_FACTS).
# Each event by its index first, as in DELETE_DERIVED_LATENTS.
DERIVED_LATENT_IDS = """
UNWIND $event_ids AS id
MATCH (e:Event {tenant: $tenant, event_id: id})
WITH e
MATCH (l:Latent)-[:DERIVED_FROM]->(e)
WHERE l.tenant = $tenant
RETURN DISTINCT l.artifact_id AS artifact_id
"""
