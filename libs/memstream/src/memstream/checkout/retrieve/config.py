"""The retrieval levers as one frozen value, passed with each request.

A lever switches one retrieval or packet behaviour. A checkout starts from a preset and the
request's own switches override it (``with_switches``); nothing is set on a shared object, so
two requests with different levers never see each other's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

# With ``top_votes``, each lane's best VOTE_DEPTH x k items vote in the fusion (Lanes.fused).
VOTE_DEPTH = 2


@dataclass(frozen=True)
class RetrievalConfig:
    """Which levers are on. Each is measured on and off by ``memstream bench locomo``."""

    episode_lane: bool = False  # rank episodes, then the turns inside the best ones
    time_lane: bool = False  # the turns in the periods the question's dates name
    second_hop: bool = False  # search again with what the best hits name
    rerank: bool = False  # the fused top by term coverage, speakers, adjacency
    learned: bool = False  # the fused top by the learned ranker (instead of rerank)
    top_votes: bool = False  # each lane votes with its best VOTE_DEPTH x k items only
    text_rows: bool = False  # an evidence row for every relevant event's text
    expand: bool = False  # the keyword searches add the question's related words
    coverage: bool = False  # an aggregation question's top ordered session by session
    calibrated: bool = False  # answerability and confidence from the learned probability

    def vote_depth(self, k: int) -> int | None:
        """How many of each lane's best items vote in the fusion (None: all)."""
        return VOTE_DEPTH * k if self.top_votes else None

    def with_switches(self, switches: Mapping[str, bool | None]) -> RetrievalConfig:
        """This config with the levers ``switches`` names (None: keep this config's)."""
        known = {f.name for f in fields(self)}
        unknown = set(switches) - known
        if unknown:
            raise ValueError(f"unknown levers: {', '.join(sorted(unknown))}")
        return replace(self, **{k: v for k, v in switches.items() if v is not None})

    def as_meta(self) -> dict[str, bool]:
        """Every lever by the name a packet's ``meta`` reports it under."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


# Each lever by the one name a request switches it with and ``meta`` reports it under.
LEVERS: tuple[str, ...] = tuple(f.name for f in fields(RetrievalConfig))
# The fused lanes alone: ``/v1/recall``'s fused mode and the benchmarks' baselines.
PLAIN = RetrievalConfig()
# A checkout's default: on where a lever passed the keep rule of docs/benchmarks.md (LoCoMo
# Recall@10 measured on and off in one run: a gain of +0.01 or more, its paired interval
# above zero), off where it did not; the others are request switches.
CHECKOUT = RetrievalConfig(rerank=True, top_votes=True)
# Every lane, for a question whose answer is spread thin: slower, and on LoCoMo no better.
WIDE = replace(CHECKOUT, time_lane=True, episode_lane=True, second_hop=True, expand=True)
# The checkout preset with what was learned from labelled questions instead of the hand-set
# parts: the learned ranker for the rerank, the learned probability for the answerability rules.
LEARNED = replace(CHECKOUT, learned=True, calibrated=True)
PRESETS: dict[str, RetrievalConfig] = {
    "plain": PLAIN,
    "checkout": CHECKOUT,
    "learned": LEARNED,
    "wide": WIDE,
}
