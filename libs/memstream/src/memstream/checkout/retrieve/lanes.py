"""Phase 1 of checkout: overfetch a candidate pool from every lane, fused by RRF.

Lanes: dense and sparse (BM25) over the vector index, speaker (the same hybrid search among
the events said by someone the query names), mention (among the events involving any entity
the query names), facts (current and past facts of those entities), chain
(the turns around the best hits), recency (newest events, for "current" questions), episode
(hierarchical: rank the episode latents, then the turns inside the best episodes), time (the
turns in the periods the question's dates name, resolved against the days of the best hits)
and hop (a second hop: the question searched again with the entities the best hits name and
the words they share that it does not say). The fused top can be reranked by cheap features
(``retrieve.rerank``); the sparse searches can add the question's related words
(``retrieve.expand``).
"""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from datetime import time as dt_time
from typing import Any

import numpy as np

from memstream.checkout.plan.anchored import (
    DayRange,
    Offset,
    in_ranges,
    named_ranges,
    offsets,
    spans_at,
    without_dates,
)
from memstream.checkout.retrieve.candidates import (
    event_candidate,
    fact_candidate,
    hit_candidate,
    known_by,
)
from memstream.checkout.retrieve.config import PLAIN, RetrievalConfig
from memstream.checkout.retrieve.coverage import covered
from memstream.checkout.retrieve.expand import related_terms
from memstream.checkout.retrieve.facts import PredicateRanker
from memstream.checkout.retrieve.features import Likeness, feature_rows
from memstream.checkout.retrieve.learned import LEARNED_TOP, learned_order
from memstream.checkout.retrieve.reach import (
    CHAIN_FROM,
    CHAIN_RADIUS,
    anchor_days,
    around,
    candidate_days,
    hop_keys,
    hop_terms,
)
from memstream.checkout.retrieve.rerank import rerank
from memstream.checkout.scoped import admits, facts_in
from memstream.embed.kept import KeptVectors
from memstream.embed.port import Embedder, TermNeighbours
from memstream.graph.port import GraphReader
from memstream.graph.validity import known_at
from memstream.matching import focus_words
from memstream.records.packet import Candidate, SynthesisPlan
from memstream.records.projected import FactView, VectorHit
from memstream.scope import WHOLE, Scope
from memstream.times import iso_utc, parse_ts
from memstream.vectors.port import Mode, Search, VectorIndex

RRF_K = 60
# Below a lane's vote depth (see ``Lanes.fused``) a rank counts this share of its vote: it
# orders the deep items among themselves, never above an item some lane ranked high.
DEEP_VOTE = 1e-3
MODES: tuple[Mode, ...] = ("dense", "sparse")
FACTS_PER_SUBJECT = 20
CHANGES = 50  # facts closed by a successor a change question reads (newest first)
LANE_WEIGHTS = {
    "dense": 1.0,
    "sparse": 1.0,
    # the filtered lanes query dense and sparse apart (see ``retrieve``): half each
    "speaker_dense": 0.5,
    "speaker_sparse": 0.5,
    "mention_dense": 0.3,
    "mention_sparse": 0.3,
    "fact": 1.2,
    "chain": 0.4,
    "recent": 0.5,
    "episode": 0.5,
    "time": 1.0,
    "hop_dense": 0.25,
    "hop_sparse": 0.25,
}
# Latent points one checkout reads (for latent context and the episode lane), and how many of
# the best episodes the episode lane searches inside.
LATENT_HITS = 8
TOP_EPISODES = 3
RECENT = 10  # events the recency lane adds
TIME_SEARCHES = 4  # periods the time lane searches inside (the rest only filter the pool)
# A question naming many dates or offsets (a pasted log) costs at most this many periods and
# anchor searches.
MAX_RANGES = 16
MAX_OFFSETS = 2
# The index bounds time from above only: a search up to a period's end is kept from its start,
# so it reads this many pools to leave enough inside the period.
TIME_OVERFETCH = 4
TIME_BOOST = 2.0  # the fused score of an item in a period the question names
OFFSET_ANCHORS = 3  # hits of "the trip" in "two weeks before the trip" whose days anchor it
LATENT = "latent"  # the batch's search for latent artifacts (not a lane of the pool)


# Graph reads a checkout starts before it needs them (see ``Retriever.retrieve``). A
# checkout waits for its own reads, so the pool only bounds how many run at once.
_GRAPH_READS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="checkout-graph")

# The lanes retrieve ledger events; latent artifacts' points share the index.
EVENTS = ["event"]
# Events about memory (feedback, invalidation, purge), not memories: never candidates.
CONTROL_TYPES = frozenset({"memory.feedback", "memory.invalidate", "memory.purge"})


# The head's texts come back checkout after checkout: their vectors are kept (``head_rows``).
_TEXT_VECTORS = KeptVectors()


@dataclass
class Lanes:
    """Ranked item ids per lane, and the items themselves: only those inside ``scope``."""

    scope: Scope = WHOLE
    ranked: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    items: dict[str, Candidate] = field(default_factory=dict)

    def add(self, lane: str, cand: Candidate) -> None:
        if cand.type in CONTROL_TYPES or not admits(self.scope, cand):
            return
        if cand.item_id not in self.ranked[lane]:
            self.ranked[lane].append(cand.item_id)
        self.items.setdefault(cand.item_id, cand)

    def add_hit(self, lane: str, payload: dict[str, Any]) -> None:
        """An index hit; the candidate is built once, however many lanes return it."""
        if "event_id" in payload and "seq" in payload:
            known = self.items.get(str(payload["event_id"]))
            self.add(lane, known if known is not None else hit_candidate(payload))

    def fused(self, depth: int | None = None) -> list[Candidate]:
        """Every item once, by weighted RRF over the lanes, best first.

        With ``depth`` a lane votes with its best ``depth`` items only; the rest of each lane
        stay in the pool (synthesis reads them), after every voted item. Many lanes search
        the same index with different filters, so an item ranked 30th by five of them would
        otherwise outvote the one item one lane ranks first.
        """
        scores, order = self._votes(depth)
        ranks: dict[str, dict[str, int]] = defaultdict(dict)
        for lane, ids in self.ranked.items():
            for rank, item_id in enumerate(ids):
                ranks[item_id][lane] = rank
        return [
            self.items[i].model_copy(
                update={
                    "score": round(scores[i], 6),
                    "lanes": list(ranks[i]),
                    "lane_ranks": ranks[i],
                }
            )
            for i in order
        ]

    def best(self, depth: int | None = None) -> list[Candidate]:
        """Every item once in :meth:`fused`'s order, as the lanes hold them (no fused score
        or lanes on them): for the lanes that read the best items while the pool still
        grows, without copying the whole pool each time."""
        return [self.items[i] for i in self._votes(depth)[1]]

    def _votes(self, depth: int | None) -> tuple[dict[str, float], list[str]]:
        """Each item's weighted RRF score, and the item ids best first."""
        scores: dict[str, float] = defaultdict(float)
        for lane, ids in self.ranked.items():
            weight = LANE_WEIGHTS.get(lane, 1.0)
            for rank, item_id in enumerate(ids):
                vote = weight / (RRF_K + rank + 1)
                scores[item_id] += vote if depth is None or rank < depth else vote * DEEP_VOTE
        return scores, sorted(scores, key=lambda i: (-scores[i], i))


@dataclass
class Retriever:
    """Every lane of one checkout; ``as_of`` (when a request gives it) bounds each of them."""

    graph: GraphReader
    index: VectorIndex
    embedder: Embedder
    pool: int = 40
    # The request's levers; PLAIN keeps ``/v1/recall`` and the benchmarks' baselines the
    # fused lanes alone. Time lane: ``_Run.time``; second hop: ``_Run.hop``; rerank:
    # ``retrieve.rerank``; expand: ``retrieve.expand``; votes: ``Lanes.fused``.
    config: RetrievalConfig = PLAIN
    k: int = 10  # the packet's k: how deep each lane votes with ``top_votes``

    def lane(
        self,
        tenant: str,
        query: str,
        mode: Mode,
        limit: int,
        scope: Scope = WHOLE,
        as_of: datetime | None = None,
    ) -> list[Candidate]:
        """One index lane alone (the benchmarks' baselines), inside ``scope``."""
        dense = self.embedder.embed([query])[0].tolist() if mode != "sparse" else None
        hits = self.index.query_batch(
            tenant, dense, query, [within(Search(limit, mode, kinds=EVENTS), scope)], as_of
        )[0]
        return [hit_candidate(h.payload) for h in hits if "event_id" in h.payload]

    def retrieve(
        self,
        tenant: str,
        plan: SynthesisPlan,
        scope: Scope = WHOLE,
        timings: dict[str, float] | None = None,
        as_of: datetime | None = None,
        latents: list[VectorHit] | None = None,
        explain: list[tuple[str, list[float]]] | None = None,
    ) -> list[Candidate]:
        """The fused candidate pool, best first; ``timings`` collects ms per lane,
        ``latents`` the latent artifacts' hits (for the packet's latent context) and
        ``explain`` the fused top (``LEARNED_TOP``) as a ranker reads it (item id,
        ``features.FEATURES``).

        With ``as_of`` every lane reads only what memory held then, and a last guard drops
        anything later, so no section of a packet can quote it. With ``scope`` every index
        search is filtered to it and every lane's item outside it is left out
        (``checkout.scoped``).
        """
        run = _Run(self, tenant, plan, scope, as_of, Lanes(scope), _LaneClock(timings))
        # The facts lane reads the graph for the names the plan holds (and, for a change, the
        # latest changes), nothing the searches find: its round trips run while the index
        # searches.
        reads_facts = bool(plan.entity_keys()) or plan.operation == "change"
        facts = _GRAPH_READS.submit(run.read_facts) if reads_facts else None
        run.embed()
        lever = self.config
        found = run.vector_lanes(latents is not None or lever.episode_lane)
        if facts is not None:
            run.facts(facts.result())
        if latents is not None:
            latents.extend(found)
        if lever.episode_lane:
            run.episodes(found)
        if lever.second_hop:
            run.hop()
        if lever.time_lane:
            run.time()
        run.chain()
        if plan.operation == "latest_value" or scope.stream is not None:
            run.recent()
        fused = run.in_time(run.fused())
        run.clock.lap("fuse")
        # the ranker's rows, computed once for the explanation and the learned order
        rows = run.head_rows(fused[:LEARNED_TOP]) if explain is not None or lever.learned else []
        if explain is not None:
            explain.extend(zip((c.item_id for c in fused), rows, strict=False))
        if lever.learned:
            fused = learned_order(fused, rows)
        elif lever.rerank:
            fused = rerank(plan, fused)
        if lever.coverage:
            fused = covered(plan, fused)
        return fused if as_of is None else [c for c in fused if known_by(c, as_of)]


@dataclass
class _Run:
    """One retrieval: the lanes filled one after another into ``lanes``."""

    r: Retriever
    tenant: str
    plan: SynthesisPlan
    scope: Scope
    as_of: datetime | None
    lanes: Lanes
    clock: _LaneClock
    vector: list[float] = field(default_factory=list)
    related: dict[str, float] | None = None  # the sparse query's added words (``expand``)
    ranges: list[DayRange] = field(default_factory=list)  # the periods the question names

    def fused(self) -> list[Candidate]:
        return self.lanes.fused(self.r.config.vote_depth(self.r.k))

    def best(self) -> list[Candidate]:
        return self.lanes.best(self.r.config.vote_depth(self.r.k))

    def head_rows(self, head: list[Candidate]) -> list[list[float]]:
        """The ranker's :func:`features.feature_rows` of ``head``, its likeness read from the
        embedder's vectors of the items (kept across checkouts) and of the question."""
        items = _TEXT_VECTORS.vectors(self.r.embedder, [c.text for c in head])
        likeness = Likeness.of(np.asarray(self.vector, dtype=np.float32), items)
        rows = feature_rows(self.plan, head, likeness)
        self.clock.lap("features")
        return rows

    def embed(self) -> None:
        self.vector = self.r.embedder.embed([self.plan.query])[0].tolist()
        if self.r.config.expand and isinstance(self.r.embedder, TermNeighbours):
            self.related = related_terms(self.plan, self.r.embedder) or None
        self.clock.lap("embed")

    def vector_lanes(self, latents: bool) -> list[VectorHit]:
        """Every index lane in one batch; returns the latent hits (when ``latents``).

        Dense and sparse go apart, each into its own lane. So do the filtered lanes: fused
        inside the index, a weak dense ranking among one person's many turns buries the one
        turn that matches the question's words. Speaker: the events said by someone the
        question names (a person's own words rarely repeat their name, so the global lanes
        rank turns that address them, "Thanks, Noor!", above turns by them). Mention: the
        events involving a named entity, ranked by the question rather than by date (a graph
        walk over a busy entity, everyone's city, costs more than it finds).
        """
        pool, scope = self.r.pool, self.scope
        lanes: list[tuple[str, Search]] = [
            (m, within(Search(pool, m, kinds=EVENTS), scope)) for m in MODES
        ]
        if keys := self.plan.entity_keys():
            lanes += [
                (f"speaker_{m}", within(Search(pool, m, kinds=EVENTS, actors=keys), scope))
                for m in MODES
            ]
            lanes += [
                (f"mention_{m}", within(Search(pool, m, kinds=EVENTS, entities=keys), scope))
                for m in MODES
            ]
        if latents:  # artifacts (episodes and others) the question finds, best first; a
            # scope's agents and users are not on their points: checked on their sources
            search = Search(LATENT_HITS, "hybrid", kinds=["latent"], streams=scope.stream)
            lanes.append((LATENT, search))
        results = self.r.index.query_batch(
            self.tenant, self.vector, self.plan.query, [s for _, s in lanes], as_of=self.as_of,
            related=self.related,
        )  # fmt: skip
        found: list[VectorHit] = []
        for (lane, _), hits in zip(lanes, results, strict=True):
            if lane == LATENT:
                found = hits
                continue
            for h in hits:
                self.lanes.add_hit(lane, h.payload)
        self.clock.lap("vectors")
        return found

    def read_facts(self) -> list[FactView]:
        """The newest facts of each subject the question names (graph reads only: safe on
        another thread while this run's lanes fill)."""
        as_of = iso_utc(self.as_of) if self.as_of is not None else None
        found: list[FactView] = []
        for key in self.plan.entity_keys():
            found += self.r.graph.recent_facts(
                self.tenant, key, limit=FACTS_PER_SUBJECT, as_of=as_of
            )
        if self.plan.operation == "change":  # "who changed jobs?" names no subject
            found += self.r.graph.changed_facts(self.tenant, limit=CHANGES, as_of=as_of)
        return list({f.fact_id: f for f in found}.values())

    def facts(self, found: list[FactView]) -> None:
        """The facts lane from :meth:`read_facts`: the question's predicates first."""
        if self.as_of is not None:
            found = known_at(found, self.as_of)
        found = facts_in(self.scope, found)
        ranker = PredicateRanker(self.r.embedder, focus_words(self.plan))
        scored = [(ranker.relevance(f.predicate), f) for f in found]
        scored.sort(key=lambda rf: (-(rf[0] or 0.0), rf[1].valid_to is not None, rf[1].fact_id))
        for rel, f in scored:
            self.lanes.add("fact", fact_candidate(f, rel))
        self.clock.lap("fact")

    def episodes(self, found: list[VectorHit]) -> None:
        """The turns inside the best episodes, ranked by the question: one search over the
        episodes' streams, kept to each episode's own events."""
        best = [h for h in found if h.payload.get("altitude") == "episode"][:TOP_EPISODES]
        ids = [str(h.payload.get("artifact_id")) for h in best]
        inside = {i for a in self.r.graph.latents_by_id(self.tenant, ids) for i in a.source_ids}
        if not inside:
            return
        streams = sorted({str(h.payload.get("stream")) for h in best})
        search = replace(
            within(Search(self.r.pool, "hybrid", kinds=["event"]), self.scope), streams=streams
        )
        hits = self.r.index.query_batch(
            self.tenant, self.vector, self.plan.query, [search], self.as_of, self.related
        )[0]
        for h in hits:
            if str(h.payload.get("event_id")) in inside:
                self.lanes.add_hit("episode", h.payload)
        self.clock.lap("episode")

    def hop(self) -> None:
        """The second hop: the question again, with the entities the best hits name and the
        words they share that it does not say ("what did Noor's mentor suggest?" finds the
        mentor's name in the first hits, then what that person said)."""
        best = self.best()
        extra = [*hop_keys(self.plan, best), *hop_terms(self.plan, best)]
        if not extra:
            return
        query = " ".join([self.plan.query, *extra])
        vector = self.r.embedder.embed([query])[0].tolist()
        searches = [within(Search(self.r.pool, m, kinds=EVENTS), self.scope) for m in MODES]
        results = self.r.index.query_batch(
            self.tenant, vector, query, searches, as_of=self.as_of, related=self.related
        )
        for mode, hits in zip(MODES, results, strict=True):
            for h in hits:
                self.lanes.add_hit(f"hop_{mode}", h.payload)
        self.clock.lap("hop")

    def time(self) -> None:
        """The time lane: the question's best turns inside each period its dates name (the
        pool may hold none of them); the periods are kept for :meth:`in_time`."""
        best = self.best()
        now = parse_ts(self.plan.as_of)
        anchors = anchor_days(best, now.date() if now is not None else None)
        ranges = named_ranges(self.plan.query, anchors)
        for off in offsets(self.plan.query)[:MAX_OFFSETS]:
            ranges += [off.around(d) for d in self._offset_anchors(off, anchors)]
        self.ranges = list(dict.fromkeys(ranges))[:MAX_RANGES]
        if self.ranges:
            text, vector = self._undated(anchors[-1] if anchors else None)
            for start, end in self.ranges[:TIME_SEARCHES]:
                for h in self._inside(start, end, text, vector)[: self.r.pool]:
                    self.lanes.add_hit("time", h.payload)
        self.clock.lap("time")

    def _undated(self, anchor: date | None) -> tuple[str, list[float]]:
        """The question without its dates, for the searches inside the periods they name.
        There every turn's key carries the same day: matched as words, the dates rank the
        day's shortest turns ("Ok!", "Bye!") first, not the one that answers."""
        bare = without_dates(self.plan.query, anchor) if anchor is not None else ""
        if bare == self.plan.query or not any(ch.isalnum() for ch in bare):
            return self.plan.query, self.vector
        return bare, self.r.embedder.embed([bare])[0].tolist()

    def in_time(self, fused: list[Candidate]) -> list[Candidate]:
        """``fused`` with the items that happened in or speak of a named period scaled up by
        ``TIME_BOOST`` (a period the question names is where its answer lies; the rest stays,
        after, since a period resolved against the wrong anchor must not hide the answer)."""
        if not self.ranges:
            return fused
        scored = [
            (c.score * (TIME_BOOST if in_ranges(candidate_days(c), self.ranges) else 1.0), c)
            for c in fused
        ]
        scored.sort(key=lambda sc: -sc[0])  # stable: ties keep the fused order
        return [c.model_copy(update={"score": round(s, 6)}) for s, c in scored]

    def _offset_anchors(self, off: Offset, anchors: list[date]) -> list[date]:
        """The days "two weeks before X" counts from: X's own date if it is one, else the
        days of X's best matches, else (no X) the question's anchors."""
        if not off.anchor_text:
            return anchors
        if anchors and (spans := spans_at(off.anchor_text, anchors[-1])):
            return [spans[0][2]]
        search = within(Search(OFFSET_ANCHORS, "sparse", kinds=EVENTS), self.scope)
        hits = self.r.index.query_batch(self.tenant, None, off.anchor_text, [search], self.as_of)[0]
        days = [ts.date() for h in hits if (ts := parse_ts(str(h.payload.get("occurred_at"))))]
        return list(dict.fromkeys(days))

    def _inside(self, start: date, end: date, text: str, vector: list[float]) -> list[VectorHit]:
        """The best turns for ``text`` (and its ``vector``) that happened in ``[start, end)``:
        searched up to the end, kept from the start (see ``TIME_OVERFETCH``)."""
        last = datetime.combine(end, dt_time.min, tzinfo=UTC) - timedelta(microseconds=1)
        bound = min(last, self.as_of) if self.as_of is not None else last
        search = within(Search(TIME_OVERFETCH * self.r.pool, "hybrid", kinds=EVENTS), self.scope)
        hits = self.r.index.query_batch(self.tenant, vector, text, [search], bound, self.related)[0]
        first = datetime.combine(start, dt_time.min, tzinfo=UTC)
        return [
            h for h in hits
            if (ts := parse_ts(str(h.payload.get("occurred_at")))) is not None and ts >= first
        ]  # fmt: skip

    def chain(self) -> None:
        """The chain lane: the turns that belong with the best hits (``reach.around``)."""
        as_of = iso_utc(self.as_of) if self.as_of is not None else None
        top = [c for c in self.best()[:CHAIN_FROM] if c.kind == "event"]
        chains = self.r.graph.chains(
            self.tenant, [c.item_id for c in top], radius=CHAIN_RADIUS, as_of=as_of
        )
        for hit, chain in zip(top, chains, strict=True):
            for e in around(hit.ref.seq, chain):
                self.lanes.add("chain", event_candidate(e))
        self.clock.lap("chain")

    def recent(self) -> None:
        """The newest events, read in order from the index's datetime index (a graph query
        would sort every event of the tenant)."""
        sc = self.scope
        recent = self.r.index.recent(
            self.tenant, RECENT, sc.stream, self.as_of, agents=sc.agent, users=sc.user
        )
        for h in recent:
            self.lanes.add_hit("recent", h.payload)
        self.clock.lap("recent")


def within(search: Search, scope: Scope) -> Search:
    """``search`` kept inside ``scope``: its streams, agents and users filter the index."""
    return replace(
        search,
        streams=scope.stream if scope.stream is not None else search.streams,
        agents=scope.agent if scope.agent is not None else search.agents,
        users=scope.user if scope.user is not None else search.users,
    )


class _LaneClock:
    def __init__(self, sink: dict[str, float] | None) -> None:
        self.sink = sink
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        if self.sink is not None:
            self.sink[name] = round((now - self.last) * 1000, 3)
        self.last = now
