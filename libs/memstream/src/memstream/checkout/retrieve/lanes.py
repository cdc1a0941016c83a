"""Phase 1 of checkout: overfetch a candidate pool from every lane, fused by RRF.

Lanes: dense and sparse (BM25) over the vector index, speaker (the same hybrid search among
the events said by someone the query names), mention (among the events involving any entity
the query names), facts (current and past facts of those entities), chain
(the turns around the best hits) and recency (newest events, for "current" questions).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from memstream.checkout.model import Candidate, SynthesisPlan
from memstream.checkout.retrieve.candidates import event_candidate, fact_candidate, hit_candidate
from memstream.embed.port import Embedder
from memstream.graph.port import GraphStore
from memstream.vectors.port import Mode, VectorIndex

RRF_K = 60
MODES: tuple[Mode, ...] = ("dense", "sparse")
FACTS_PER_SUBJECT = 20
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
}


@dataclass
class Lanes:
    """Ranked item ids per lane, and the items themselves."""

    ranked: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    items: dict[str, Candidate] = field(default_factory=dict)

    def add(self, lane: str, cand: Candidate) -> None:
        if cand.item_id not in self.ranked[lane]:
            self.ranked[lane].append(cand.item_id)
        self.items.setdefault(cand.item_id, cand)

    def add_hit(self, lane: str, payload: dict[str, Any]) -> None:
        """An index hit; the candidate is built once, however many lanes return it."""
        if "event_id" in payload and "seq" in payload:
            known = self.items.get(str(payload["event_id"]))
            self.add(lane, known if known is not None else hit_candidate(payload))

    def fused(self) -> list[Candidate]:
        scores: dict[str, float] = defaultdict(float)
        lanes: dict[str, list[str]] = defaultdict(list)
        for lane, ids in self.ranked.items():
            for rank, item_id in enumerate(ids):
                scores[item_id] += LANE_WEIGHTS.get(lane, 1.0) / (RRF_K + rank + 1)
                lanes[item_id].append(lane)
        order = sorted(scores, key=lambda i: (-scores[i], i))
        return [
            self.items[i].model_copy(update={"score": round(scores[i], 6), "lanes": lanes[i]})
            for i in order
        ]


@dataclass
class Retriever:
    graph: GraphStore
    index: VectorIndex
    embedder: Embedder
    pool: int = 40

    def lane(
        self, tenant: str, query: str, mode: Mode, limit: int, stream: str | None = None
    ) -> list[Candidate]:
        """One index lane alone (the benchmarks' baselines)."""
        dense = self.embedder.embed([query])[0].tolist() if mode != "sparse" else None
        hits = self.index.query(
            tenant, dense, query, limit=limit, mode=mode, streams=[stream] if stream else None
        )
        return [hit_candidate(h.payload) for h in hits if "event_id" in h.payload]

    def _search(
        self,
        lanes: Lanes,
        lane: str,
        mode: Mode,
        tenant: str,
        dense: list[float],
        query: str,
        streams: list[str] | None,
        actors: list[str] | None = None,
        entities: list[str] | None = None,
    ) -> None:
        hits = self.index.query(
            tenant,
            dense,
            query,
            limit=self.pool,
            mode=mode,
            streams=streams,
            actors=actors,
            entities=entities,
        )
        for h in hits:
            lanes.add_hit(lane, h.payload)

    def retrieve(
        self,
        tenant: str,
        plan: SynthesisPlan,
        stream: str | None = None,
        timings: dict[str, float] | None = None,
    ) -> list[Candidate]:
        """The fused candidate pool, best first; ``timings`` collects ms per lane."""
        lanes = Lanes()
        clock = _LaneClock(timings)
        query = plan.query
        dense = self.embedder.embed([query])[0].tolist()
        streams = [stream] if stream else None
        clock.lap("embed")
        args = (tenant, dense, query, streams)
        for mode in MODES:
            self._search(lanes, mode, mode, *args)
            clock.lap(mode)
        entity_keys = list(plan.entities)
        if entity_keys:
            # Filtered lanes query dense and sparse apart: fused inside the index, a weak
            # dense ranking among one person's many turns buries the one turn that matches
            # the question's words.
            # A person's own words rarely repeat their name, so the global lanes rank turns
            # that address them ("Thanks, Noor!") above turns by them.
            for mode in MODES:
                self._search(lanes, f"speaker_{mode}", mode, *args, actors=entity_keys)
            clock.lap("speaker")
            # Events involving the entities, ranked by the question rather than by date: a
            # graph walk over a busy entity (everyone's city) costs more than it finds.
            for mode in MODES:
                self._search(lanes, f"mention_{mode}", mode, *args, entities=entity_keys)
            clock.lap("mention")
            for key in entity_keys:
                for f in self.graph.recent_facts(tenant, key, limit=FACTS_PER_SUBJECT):
                    lanes.add("fact", fact_candidate(f))
            clock.lap("fact")
        top = [c for c in lanes.fused()[:3] if c.kind == "event"]
        for c in top:
            for e in self.graph.chain(tenant, c.item_id, radius=1):
                lanes.add("chain", event_candidate(e))
        clock.lap("chain")
        if plan.operation == "latest_value" or stream is not None:
            for e in self.graph.recent(tenant, limit=10, stream=stream):
                lanes.add("recent", event_candidate(e))
            clock.lap("recent")
        return lanes.fused()


class _LaneClock:
    def __init__(self, sink: dict[str, float] | None) -> None:
        self.sink = sink
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        if self.sink is not None:
            self.sink[name] = round((now - self.last) * 1000, 3)
        self.last = now
