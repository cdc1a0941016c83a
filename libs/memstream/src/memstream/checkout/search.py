"""Search at one altitude: events, facts, episodes or other latent artifacts.

Every hit names the ledger events beneath it (``sources``), so a caller searches high and
drills down with lineage. ``event``, ``episode`` and ``latent`` are one hybrid query (dense +
BM25, fused by RRF) over the index's event points or the artifacts' points of that altitude
(an artifact gone stale has no point). Facts have no points of their own: a fact is as
relevant as the event it was drawn from, so ``fact`` ranks the facts of a wider pool of event
hits by their source event's score. The query finds the evidence; the graph says which facts
that evidence established and which of them still hold (at ``as_of``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from memstream.checkout.retrieve.candidates import fact_candidate
from memstream.checkout.retrieve.lanes import CONTROL_TYPES, within
from memstream.embed.port import Embedder
from memstream.events.envelope import StreamName
from memstream.graph.port import GraphReader
from memstream.projection.latents import LATENT_KIND
from memstream.records.altitudes import Altitude
from memstream.records.packet import PacketWarning
from memstream.records.projected import FactView, VectorHit
from memstream.scope import SCOPE_DESCRIPTION, STREAM_SHORTHAND, WHOLE, Scope
from memstream.times import as_utc, iso_utc
from memstream.vectors.port import Search, VectorIndex
from memstream.wire import STORABLE, STRICT_INPUT, JsonInt, Position, RfcTimestamp

# Event hits whose facts the fact altitude ranks, per fact asked for (and at least).
SCOPED_READ = 5  # a scoped artifact search reads this many times k before the scope filters
FACT_POOL_PER_HIT = 5
FACT_POOL_MIN = 50
EVENT_KIND = "event"


class SearchRequest(BaseModel):
    """``POST /v1/search``."""

    model_config = STRICT_INPUT
    query: Annotated[str, Field(min_length=1, max_length=2000), STORABLE]
    altitude: Altitude = Field(
        default="event", description="event | fact | episode | latent: what kind of item to find"
    )
    k: JsonInt = Field(default=10, ge=1, le=50)
    as_of: RfcTimestamp | None = Field(
        default=None, description="only what memory held then (events, facts, artifacts)"
    )
    scope: Scope | None = Field(default=None, description=SCOPE_DESCRIPTION)
    stream: StreamName | None = Field(default=None, description=STREAM_SHORTHAND)
    after: Position | None = Field(
        default=None,
        description="a write's position: answer once every projection this read uses has "
        "applied it (bounded by MEMSTREAM_READ_AFTER_MAX_WAIT_S; past it, or when it can never "
        "be, the answer carries a stale warning naming what was not applied)",
    )


class SearchHit(BaseModel):
    """One item found; ``lineage(id)`` resolves it to its ledger events."""

    model_config = ConfigDict(frozen=True)
    id: str = Field(description="event id, fact id (`<event_id>#n`) or artifact id")
    kind: str = Field(
        description="within the altitude: the event type, `fact` or `preference`, or the "
        "artifact type"
    )
    altitude: Altitude
    text: str
    score: float = Field(description="relevance (RRF fusion); comparable within one search")
    sources: list[str] = Field(description="ids of the ledger events beneath the hit")


class SearchResult(BaseModel):
    hits: list[SearchHit]
    warnings: list[PacketWarning] = Field(
        default_factory=list,
        description="kind stale: the read was given after= and a projection had not applied "
        "that position when it answered",
    )


# -- ranking (pure) ---------------------------------------------------------------------------


def event_hit(hit: VectorHit) -> SearchHit | None:
    """An event point as a hit; None for events about memory (feedback, purge), which are
    not memories."""
    p = hit.payload
    if "event_id" not in p or p.get("type") in CONTROL_TYPES:
        return None
    event_id = str(p["event_id"])
    return SearchHit(
        id=event_id,
        kind=str(p.get("type") or EVENT_KIND),
        altitude="event",
        text=str(p.get("text") or p.get("type") or ""),
        score=hit.score,
        sources=[event_id],
    )


def latent_hit(hit: VectorHit) -> SearchHit | None:
    """An artifact's point as a hit, its sources the events it was derived from."""
    p = hit.payload
    if p.get("kind") != LATENT_KIND or "artifact_id" not in p:
        return None
    altitude: Altitude = "episode" if p.get("altitude") == "episode" else "latent"
    return SearchHit(
        id=str(p["artifact_id"]),
        kind=str(p.get("artifact_type") or LATENT_KIND),
        altitude=altitude,
        text=str(p.get("text") or ""),
        score=hit.score,
        sources=[str(s) for s in p.get("source_ids") or []],
    )


def fact_hits(facts: list[FactView], event_scores: dict[str, float], k: int) -> list[SearchHit]:
    """Facts scored by their source event's score, best first (a fact's id breaks ties, so
    the facts of one event keep their order); facts of events not scored are left out."""
    hits: dict[str, SearchHit] = {}
    for f in facts:
        score = event_scores.get(f.source.event_id)
        if score is None or f.fact_id in hits:
            continue
        hits[f.fact_id] = SearchHit(
            id=f.fact_id,
            kind=f.kind,
            altitude="fact",
            text=fact_candidate(f).text,
            score=score,
            sources=[f.source.event_id],
        )
    return sorted(hits.values(), key=lambda h: (-h.score, h.id))[:k]


def kept(hits: list[SearchHit | None], k: int) -> list[SearchHit]:
    """The first ``k`` hits that are hits, in rank order."""
    return [h for h in hits if h is not None][:k]


# -- the I/O shell ----------------------------------------------------------------------------


@dataclass
class Searcher:
    """One version's stores and embedder (the one its index was built with)."""

    graph: GraphReader
    index: VectorIndex
    embedder: Embedder

    def search(self, tenant: str, req: SearchRequest, scope: Scope = WHOLE) -> list[SearchHit]:
        """The best ``req.k`` items of ``req.altitude`` for the query, inside ``scope``: its
        events, the facts drawn from them, and the artifacts resting on one of them (whose
        ``sources`` then name only those)."""
        vector = self.embedder.embed([req.query])[0].tolist()
        as_of = as_utc(req.as_of) if req.as_of is not None else None
        if req.altitude == "fact":
            return self._facts(tenant, req, vector, as_of, scope)
        if req.altitude == "event":
            # Twice as many: events about memory are dropped after the query.
            found = self._query(tenant, req.query, vector, 2 * req.k, as_of, scope)
            return kept([event_hit(h) for h in found], req.k)
        limit = req.k if scope.empty else SCOPED_READ * req.k
        found = self._query(tenant, req.query, vector, limit, as_of, WHOLE, req.altitude)
        return self._sourced(tenant, scope, kept([latent_hit(h) for h in found], limit))[: req.k]

    def _query(
        self,
        tenant: str,
        query: str,
        vector: list[float],
        limit: int,
        as_of: datetime | None,
        scope: Scope,
        altitude: Altitude | None = None,
    ) -> list[VectorHit]:
        kind = EVENT_KIND if altitude is None else LATENT_KIND
        altitudes: list[str] | None = [altitude] if altitude is not None else None
        search = within(Search(limit, kinds=[kind], altitudes=altitudes), scope)
        return self.index.query_batch(tenant, vector, query, [search], as_of)[0]

    def _sourced(self, tenant: str, scope: Scope, hits: list[SearchHit]) -> list[SearchHit]:
        """The artifact hits with a source event in ``scope``, citing only those."""
        if scope.empty:
            return hits
        ids = list(dict.fromkeys(s for h in hits for s in h.sources))
        seen = {
            e.event_id
            for e in self.graph.events(tenant, ids)
            if scope.admits(user=e.user, agent=e.agent, stream=e.stream)
        }
        out = []
        for h in hits:
            sources = [s for s in h.sources if s in seen]
            if sources:
                out.append(h.model_copy(update={"sources": sources}))
        return out

    def _facts(
        self,
        tenant: str,
        req: SearchRequest,
        vector: list[float],
        as_of: datetime | None,
        scope: Scope,
    ) -> list[SearchHit]:
        pool = max(FACT_POOL_MIN, FACT_POOL_PER_HIT * req.k)
        found = self._query(tenant, req.query, vector, pool, as_of, scope)
        scores = {h.id: h.score for h in kept([event_hit(h) for h in found], pool)}
        facts = self.graph.facts_from(
            tenant, list(scores), as_of=iso_utc(as_of) if as_of is not None else None
        )
        return fact_hits(facts, scores, req.k)
