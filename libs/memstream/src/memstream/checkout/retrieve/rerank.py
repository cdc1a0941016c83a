"""Reranking the fused top of the pool with cheap features of each candidate (pure).

No cross-encoder ships as a wheel with its weights here, so the fused RRF score is scaled by
what a reader checks first: how many of the question's focus words the item says (stemmed),
whether it is said by or names an entity the question names, and whether other top items
are next to it in the same stream (a turn beside a hit is often its question or answer).
"""

from __future__ import annotations

from memstream.checkout.retrieve.features import Signals, signals
from memstream.records.packet import Candidate, SynthesisPlan

RERANK_TOP = 30  # the fused items reranked; the rest keep their place after them
W_COVERAGE = 0.5  # all focus words said: x1.5
W_SPEAKER = 0.2
W_MENTION = 0.1
W_ADJACENT = 0.1  # per adjacent top item, at most two


def gain(s: Signals) -> float:
    """The factor an item's fused score is scaled by (1.0: no signal)."""
    return (
        1.0
        + W_COVERAGE * s.coverage
        + W_SPEAKER * s.speaker
        + W_MENTION * s.mention
        + W_ADJACENT * min(s.adjacent, 2)
    )


def rerank(plan: SynthesisPlan, fused: list[Candidate], top: int = RERANK_TOP) -> list[Candidate]:
    """``fused`` with its first ``top`` items rescored by score x :func:`gain` and reordered
    (later steps, feedback priors among them, sort by the score)."""
    head, tail = fused[:top], fused[top:]
    scored = [(c.score * gain(s), c) for c, s in zip(head, signals(plan, head), strict=True)]
    scored.sort(key=lambda sc: -sc[0])  # stable: ties keep the fused order
    return [c.model_copy(update={"score": round(s, 6)}) for s, c in scored] + tail
