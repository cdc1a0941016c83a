"""Reranking the fused top of the pool with cheap features of each candidate (pure).

No cross-encoder ships as a wheel with its weights here, so the fused RRF score is scaled by
what a reader checks first: how many of the question's focus words the item says (stemmed),
whether it is said by or names an entity the question names, and whether other top items
are next to it in the same stream (a turn beside a hit is often its question or answer).
"""

from __future__ import annotations

from collections import defaultdict

from memstream.matching import focus_of
from memstream.records.packet import Candidate, SynthesisPlan
from memstream.text.names import entity_key
from memstream.text.words import content_stems

RERANK_TOP = 30  # the fused items reranked; the rest keep their place after them
NEAR = 2  # stream positions apart that count as adjacent
W_COVERAGE = 0.5  # all focus words said: x1.5
W_SPEAKER = 0.2
W_MENTION = 0.1
W_ADJACENT = 0.1  # per adjacent top item, at most two


def _adjacent(head: list[Candidate]) -> dict[str, int]:
    """For each event of ``head``, how many other events of ``head`` are within ``NEAR``
    positions of it in its stream."""
    by_stream: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for c in head:
        if c.kind == "event":
            by_stream[c.ref.stream].append((c.ref.seq, c.item_id))
    out: dict[str, int] = {}
    for seqs in by_stream.values():
        for seq, item in seqs:
            out[item] = sum(1 for s, i in seqs if i != item and abs(s - seq) <= NEAR)
    return out


def gain(c: Candidate, focus: frozenset[str], named: set[str], adjacent: int) -> float:
    """The factor ``c``'s fused score is scaled by (1.0: no feature)."""
    said = content_stems(c.text)
    coverage = len(focus & said) / len(focus) if focus else 0.0
    speaker = bool(c.agent) and entity_key(c.agent) in named
    mention = not named.isdisjoint(c.entity_keys)
    return (
        1.0
        + W_COVERAGE * coverage
        + W_SPEAKER * speaker
        + W_MENTION * mention
        + W_ADJACENT * min(adjacent, 2)
    )


def rerank(plan: SynthesisPlan, fused: list[Candidate], top: int = RERANK_TOP) -> list[Candidate]:
    """``fused`` with its first ``top`` items rescored by score x :func:`gain` and reordered
    (later steps, feedback priors among them, sort by the score)."""
    head, tail = fused[:top], fused[top:]
    focus = focus_of(plan).terms
    named = set(plan.entity_keys())
    near = _adjacent(head)
    scored = [(c.score * gain(c, focus, named, near.get(c.item_id, 0)), c) for c in head]
    scored.sort(key=lambda sc: -sc[0])  # stable: ties keep the fused order
    return [c.model_copy(update={"score": round(s, 6)}) for s, c in scored] + tail
