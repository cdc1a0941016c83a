"""What operations share: the context they read, the result they return, row accessors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from statistics import fmean

from memstream.records.packet import (
    DEFAULT_CONFIDENCE,
    AnswerCandidate,
    EvidenceRow,
    Exclusion,
    JsonScalar,
    PacketWarning,
    TimeWindow,
)
from memstream.records.projected import EntityView
from memstream.text.units import fmt_amount
from memstream.text.words import clip
from memstream.times import parse_ts

EPOCH = datetime(1, 1, 1, tzinfo=UTC)
# An attempt's metadata field naming the task it retries: the two are one history.
RETRY_OF = "retry_of"


@dataclass(frozen=True)
class Attempt:
    """A task record of the pool: a start or an outcome of one task id."""

    item_id: str
    task_id: str
    status: str  # "started", or the outcome's status
    says: str  # the goal, or what the outcome reports (its cause, for a failure)
    at: datetime
    retry_of: str | None
    follows: tuple[str, ...]  # the events it was caused by (``caused_by``)
    row: EvidenceRow  # how it is cited


@dataclass(frozen=True)
class Ctx:
    """What operations know besides the rows (all keyed by candidate item_id or row_id)."""

    confidence: Mapping[str, float]
    kinds: Mapping[str, str]
    speakers: Mapping[str, str]  # event id → entity key of its agent
    focus: frozenset[str]
    rank: Mapping[str, float] = field(default_factory=dict)  # row_id → relevance, higher first
    stems: Mapping[str, frozenset[str]] = field(default_factory=dict)  # row_id → its words
    valid_to: Mapping[str, str | None] = field(default_factory=dict)  # fact id → valid_to
    rates: frozenset[str] = frozenset()  # row ids of numbers stated as a rate
    dated: frozenset[str] = frozenset()  # row ids whose time is a date stated in the text
    echoes: frozenset[str] = frozenset()  # assistant messages (they restate what was said)
    successor: Mapping[str, str] = field(default_factory=dict)  # fact id → the fact closing it
    facts: Mapping[str, EvidenceRow] = field(default_factory=dict)  # every fact row, valid as_of
    attempts: Mapping[str, Attempt] = field(default_factory=dict)  # task records, by item id
    names: Mapping[str, EntityView] = field(default_factory=dict)  # the tenant's, by key


@dataclass
class OpResult:
    """What an operation returns: answers, extra exclusions and warnings."""

    answers: list[AnswerCandidate] = field(default_factory=list)
    exclusions: list[Exclusion] = field(default_factory=list)
    warnings: list[PacketWarning] = field(default_factory=list)


def is_number(value: JsonScalar) -> bool:
    """An int or float (a bool is not a number here)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def num(row: EvidenceRow) -> float:
    """A row's value as a float (0.0 if it has none)."""
    return float(row.value) if is_number(row.value) else 0.0  # type: ignore[arg-type]


def when(row: EvidenceRow) -> datetime:
    """A row's time; undated rows sort first."""
    return parse_ts(row.time) or EPOCH


def name_of(key: str | None, ctx: Ctx) -> str:
    """The name an entity goes by (its key when memory knows no other)."""
    known = ctx.names.get(key or "")
    return known.name if known is not None and known.name else key or ""


def inside(window: TimeWindow | None, t: datetime) -> bool:
    """Whether ``t`` falls in the question's window (any time, without one)."""
    if window is None:
        return True
    start, end = parse_ts(window.start), parse_ts(window.end)
    return (start is None or t >= start) and (end is None or t < end)


def is_fact(row: EvidenceRow, ctx: Ctx) -> bool:
    """Does the row come from a fact (rather than an event)?"""
    return ctx.kinds.get(row.support_id) == "fact"


def item_text(row: EvidenceRow, ctx: Ctx, limit: int = 80) -> str:
    """How a row reads as an answer item: a fact's value, an event's words."""
    if is_fact(row, ctx):
        if is_number(row.value):
            return fmt_amount(num(row), row.unit)
        return clip(f"{row.value}" + (f" {row.unit}" if row.unit else ""), limit)
    return clip(row.label, limit)


def make_answer(
    text: str,
    value: JsonScalar | list[JsonScalar],
    unit: str | None,
    rows: Iterable[EvidenceRow],
    ctx: Ctx,
    excluded: Iterable[Exclusion] = (),
) -> AnswerCandidate:
    """An answer citing the candidates behind ``rows``; confidence = their mean."""
    ids = list(dict.fromkeys(r.support_id for r in rows))
    conf = fmean(ctx.confidence.get(i, DEFAULT_CONFIDENCE) for i in ids) if ids else 0.0
    return AnswerCandidate(
        answer=text,
        value=value,
        unit=unit,
        confidence=round(conf, 3),
        support_ids=ids,
        excluded_ids=list(excluded),
    )
