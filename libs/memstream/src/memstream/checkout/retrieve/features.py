"""What a candidate of the fused top looks like to a ranker: what the lanes and the plan
already know about it, as numbers (pure).

No feature is a word or a list of words: each is a rank, a score, a count or a flag the
retrieval computed anyway — every lane's rank of the item, how many lanes found it, the
share of the question's focus words it says, whether its speaker or an entity it names is one
the question names, how many of the other top items sit beside it in its stream, whether its
time is in the period the question names, its kind, type and length, and the operation and
answer type the plan recognised. The hand-set rerank (``retrieve.rerank``) reads the same
signals with fixed weights; the learned ranker (``retrieve.learned``) reads them all.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import get_args

import numpy as np
import numpy.typing as npt

from memstream.matching import focus_of
from memstream.records.packet import AnswerType, Candidate, Operation, SynthesisPlan
from memstream.text.names import entity_key
from memstream.text.words import content_stems
from memstream.times import parse_ts

NEAR = 2  # stream positions apart that count as adjacent
# The lanes of the pool (``retrieve.lanes.LANE_WEIGHTS`` names the same), each a feature.
LANES = (
    "dense",
    "sparse",
    "speaker_dense",
    "speaker_sparse",
    "mention_dense",
    "mention_sparse",
    "fact",
    "chain",
    "recent",
    "episode",
    "time",
    "hop_dense",
    "hop_sparse",
)
TYPES = ("message.user", "message.assistant", "observation", "fact", "tool.result")
OPERATIONS: tuple[str, ...] = get_args(Operation)
ANSWER_TYPES: tuple[str, ...] = get_args(AnswerType)
FEATURES: tuple[str, ...] = (
    "fused_rank",
    "fused_score_share",
    "lane_count",
    *(f"lane_{lane}" for lane in LANES),
    "coverage",
    "speaker",
    "mention",
    "adjacent",
    "in_window",
    "type",
    "tokens",
    "numbers",
    "dates",
    "relevance",
    "similarity",
    "similarity_gap",
    "near_top",
    "novel_coverage",
    "operation",
    "answer_type",
    "focus_terms",
    "named",
)


# The first items of the fused top each item is compared with in meaning (``near_top``): a
# second piece of a multi-part answer resembles the first piece more than the question.
TOP_LIKE = 3
UNKNOWN = -1.0  # a feature nobody could compute (no vectors)


@dataclass(frozen=True)
class Likeness:
    """How alike in meaning the items of a head are: each item's cosine with the question,
    and its best cosine with one of the first :data:`TOP_LIKE` other items."""

    to_query: list[float]
    to_top: list[float]

    @classmethod
    def of(cls, query: npt.NDArray[np.float32], items: npt.NDArray[np.float32]) -> Likeness:
        """From L2-normalised vectors: ``query`` (dim,) and ``items`` (n, dim), in head order."""
        if len(items) == 0:
            return cls([], [])
        to_query = items @ query
        pairs = items @ items[:TOP_LIKE].T
        n = min(TOP_LIKE, len(items))
        pairs[np.arange(n), np.arange(n)] = -1.0  # an item is not its own neighbour
        return cls([float(x) for x in to_query], [float(x) for x in pairs.max(axis=1)])

    @classmethod
    def unknown(cls, n: int) -> Likeness:
        """For a caller without vectors: every likeness feature :data:`UNKNOWN`."""
        return cls([UNKNOWN] * n, [UNKNOWN] * n)


@dataclass(frozen=True)
class Signals:
    """What a reader checks first about one item of the top (the hand-set rerank's input)."""

    coverage: float  # share of the question's focus words it says (stemmed)
    speaker: bool  # said by an entity the question names
    mention: bool  # names an entity the question names
    adjacent: int  # other top events within NEAR positions of it in its stream


def adjacency(head: list[Candidate]) -> dict[str, int]:
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


def signals(plan: SynthesisPlan, head: list[Candidate]) -> list[Signals]:
    """:class:`Signals` of each item of ``head``, in its order."""
    focus = focus_of(plan).terms
    named = set(plan.entity_keys())
    near = adjacency(head)
    out = []
    for c in head:
        said = content_stems(c.text)
        out.append(
            Signals(
                coverage=len(focus & said) / len(focus) if focus else 0.0,
                speaker=bool(c.agent) and entity_key(c.agent) in named,
                mention=not named.isdisjoint(c.entity_keys),
                adjacent=near.get(c.item_id, 0),
            )
        )
    return out


def _in_window(plan: SynthesisPlan, c: Candidate) -> float:
    """1: the item's time (or a date it states) is in the question's period; 0: it is not;
    -1: the question names no period."""
    window = plan.time_window
    if window is None:
        return -1.0
    start, end = parse_ts(window.start), parse_ts(window.end)
    times = [parse_ts(c.valid_from or c.occurred_at), *(parse_ts(d.date) for d in c.dates)]
    return float(
        any(
            t is not None and (start is None or t >= start) and (end is None or t < end)
            for t in times
        )
    )


def _index(value: str, known: tuple[str, ...]) -> float:
    return float(known.index(value)) if value in known else float(len(known))


def plan_features(plan: SynthesisPlan) -> list[float]:
    """What the plan recognised, as the last four :data:`FEATURES`: the operation, the answer
    type, how many focus words and how many named entities."""
    return [
        _index(plan.operation, OPERATIONS),
        _index(plan.answer_type, ANSWER_TYPES),
        float(len(focus_of(plan).terms)),
        float(len(plan.entity_keys())),
    ]


def _novel_coverage(plan: SynthesisPlan, head: list[Candidate]) -> list[float]:
    """For each item, the share of the question's focus words it says that no item before it
    says (the part of a many-part question only it answers)."""
    focus = focus_of(plan).terms
    seen: set[str] = set()
    out = []
    for c in head:
        said = content_stems(c.text) & focus
        out.append(len(said - seen) / len(focus) if focus else 0.0)
        seen |= said
    return out


def feature_rows(
    plan: SynthesisPlan, head: list[Candidate], likeness: Likeness
) -> list[list[float]]:
    """One row of :data:`FEATURES` per item of ``head`` (the fused top, best first)."""
    top = max((c.score for c in head), default=0.0) or 1.0
    plan_part = plan_features(plan)
    best_like = max(likeness.to_query, default=UNKNOWN)
    novel = _novel_coverage(plan, head)
    rows = []
    for rank, (c, s) in enumerate(zip(head, signals(plan, head), strict=True)):
        like = likeness.to_query[rank]
        lanes = [1.0 / (1 + c.lane_ranks[lane]) if lane in c.lane_ranks else 0.0 for lane in LANES]
        rows.append(
            [
                float(rank),
                c.score / top,
                float(len(c.lanes)),
                *lanes,
                s.coverage,
                float(s.speaker),
                float(s.mention),
                float(s.adjacent),
                _in_window(plan, c),
                _index(c.type, TYPES),
                float(len(c.text.split())),
                float(len(c.quantities)),
                float(len(c.dates)),
                c.relevance if c.relevance is not None else -1.0,
                like,
                best_like - like if like != UNKNOWN else UNKNOWN,
                likeness.to_top[rank],
                novel[rank],
                *plan_part,
            ]
        )
    return rows
