"""Shared parts of the evidence operations: context, results, de-duplication, units, sides."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from statistics import fmean

from memstream.checkout.model import (
    AnswerCandidate,
    EvidenceRow,
    Exclusion,
    JsonScalar,
    PacketWarning,
    SynthesisPlan,
)
from memstream.checkout.plan import MONEY_CUES
from memstream.text.units import dimension, fmt_amount, is_currency
from memstream.text.words import GENERIC_STEMS, clip, content_stems, jaccard, stem, words
from memstream.times import parse_ts

EPOCH = datetime(1, 1, 1, tzinfo=UTC)
NUMERIC_DUP = 0.5  # label similarity for the same number mentioned twice
TEXT_DUP = 0.8  # label similarity for the same event text repeated
MISMATCH = "unit_mismatch:"  # exclusion detail prefix (the contract has no such reason yet)


@dataclass(frozen=True)
class Ctx:
    """What operations know besides the rows (all keyed by candidate item_id or row_id)."""

    confidence: Mapping[str, float]
    kinds: Mapping[str, str]
    speakers: Mapping[str, str]  # event id → entity key of its agent
    focus: frozenset[str]
    rank: Mapping[str, int] = field(default_factory=dict)  # row_id → relevance (higher first)
    stems: Mapping[str, frozenset[str]] = field(default_factory=dict)  # row_id → its words
    valid_to: Mapping[str, str | None] = field(default_factory=dict)  # fact id → valid_to
    rates: frozenset[str] = frozenset()  # row ids of numbers stated as a rate
    dated: frozenset[str] = frozenset()  # row ids whose time is a date stated in the text
    echoes: frozenset[str] = frozenset()  # assistant messages (they restate what was said)


@dataclass
class OpResult:
    answers: list[AnswerCandidate] = field(default_factory=list)
    exclusions: list[Exclusion] = field(default_factory=list)
    warnings: list[PacketWarning] = field(default_factory=list)


def is_number(value: JsonScalar) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def num(row: EvidenceRow) -> float:
    return float(row.value) if is_number(row.value) else 0.0  # type: ignore[arg-type]


def when(row: EvidenceRow) -> datetime:
    return parse_ts(row.time) or EPOCH


def is_fact(row: EvidenceRow, ctx: Ctx) -> bool:
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
    conf = fmean(ctx.confidence.get(i, 0.5) for i in ids) if ids else 0.0
    return AnswerCandidate(
        answer=text,
        value=value,
        unit=unit,
        confidence=round(conf, 3),
        support_ids=ids,
        excluded_ids=list(excluded),
    )


def _label_stems(row: EvidenceRow) -> frozenset[str]:
    return frozenset(
        s for s in content_stems(row.label) if s not in GENERIC_STEMS and not s.isdigit()
    )


def _same_source(a: EvidenceRow, b: EvidenceRow, ctx: Ctx) -> bool:
    """Facts: the same subject. Events: the same speaker, or an assistant restating it."""
    if is_fact(a, ctx) or is_fact(b, ctx):
        return a.entity == b.entity
    sa, sb = ctx.speakers.get(a.support_id), ctx.speakers.get(b.support_id)
    return sa == sb or a.support_id in ctx.echoes or b.support_id in ctx.echoes


def same_item(a: EvidenceRow, b: EvidenceRow, ctx: Ctx) -> bool:
    """Two rows from different items that name the same thing with the same value and unit."""
    if a.support_id == b.support_id or a.unit != b.unit:
        return False
    if is_number(a.value) or is_number(b.value):
        if not (is_number(a.value) and is_number(b.value)) or abs(num(a) - num(b)) > 1e-9:
            return False
    elif str(a.value or "").strip().lower() != str(b.value or "").strip().lower():
        return False
    if not _same_source(a, b, ctx):
        return False
    sa, sb = _label_stems(a), _label_stems(b)
    if a.value is None:  # whole-event rows: only near-identical text is a repeat
        return jaccard(sa, sb) >= TEXT_DUP
    fa, fb = sa & ctx.focus, sb & ctx.focus
    if fa and fb:
        return jaccard(fa, fb) >= NUMERIC_DUP
    return jaccard(sa, sb) >= NUMERIC_DUP


def dedupe(rows: list[EvidenceRow], ctx: Ctx) -> tuple[list[EvidenceRow], list[Exclusion]]:
    """Keep the earliest mention of each item; later repeats are excluded as duplicates."""
    kept: list[EvidenceRow] = []
    out: list[Exclusion] = []
    order = {r.row_id: i for i, r in enumerate(rows)}
    for row in sorted(rows, key=lambda r: (when(r), order[r.row_id])):
        twin = next((k for k in kept if same_item(k, row, ctx)), None)
        if twin is None:
            kept.append(row)
        else:
            detail = f"duplicate of {twin.support_id}: {clip(row.label, 60)}"
            out.append(Exclusion(item_id=row.support_id, reason="duplicate", detail=detail))
    kept.sort(key=lambda r: order[r.row_id])
    return kept, out


def wants_money(plan: SynthesisPlan) -> bool:
    return (
        plan.answer_type == "money"
        or is_currency(plan.unit)
        or bool(MONEY_CUES.search(plan.query.lower()))
    )


@dataclass
class Numbers:
    rows: list[EvidenceRow]
    unit: str | None
    exclusions: list[Exclusion]
    warnings: list[PacketWarning]


def numbers(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> Numbers:
    """Deduplicated numeric rows in one unit (the stated one, else the most common).

    Money questions use currency rows only. Rows in another unit of the same kind (EUR when
    summing USD, miles when summing km) are excluded and warned about, never converted.
    """
    nums = [r for r in rows if is_number(r.value)]
    if wants_money(plan):
        nums = [r for r in nums if is_currency(r.unit)]
    unit = plan.unit
    if unit is None or (wants_money(plan) and not is_currency(unit)):
        counts = Counter(r.unit for r in nums)
        unit = max(counts, key=lambda u: counts[u], default=None) if counts else None
    kind = dimension(unit)
    same = [r for r in nums if r.unit == unit]
    clash = [r for r in nums if r.unit != unit and dimension(r.unit) == kind]
    exclusions = [
        Exclusion(
            item_id=r.support_id,
            reason="out_of_window",
            detail=f"{MISMATCH} {r.unit} is not {unit} (not converted)",
        )
        for r in clash
    ]
    warnings = []
    if clash:
        units = ", ".join(sorted({str(r.unit) for r in clash}))
        warnings.append(
            PacketWarning(
                kind="missing_evidence",
                message=f"{len(clash)} value(s) in {units} left out of the {unit} result",
                ids=list(dict.fromkeys(r.support_id for r in clash)),
            )
        )
    kept, dups = dedupe(same, ctx)
    return Numbers(kept, unit, exclusions + dups, warnings)


_SPLITS = [
    re.compile(p)
    for p in (
        r"\bthan\b",
        r"\bvs\.?\b|\bversus\b|\bcompared (?:to|with)\b",
        r"\bor\b",
        r"\bbefore\b|\bafter\b",
        r"\band\b",
    )
]


def sides(
    plan: SynthesisPlan, focus: frozenset[str]
) -> tuple[frozenset[str], frozenset[str]] | None:
    """The two things a comparison names ("X than Y", "X or Y", "between X and Y")."""
    named = frozenset(content_stems(" ".join(plan.entities)))
    keys = focus | named
    q = plan.query.lower()
    for pattern in _SPLITS:
        for m in pattern.finditer(q):
            left = content_stems(q[: m.start()]) & keys
            right = content_stems(q[m.end() :]) & keys
            a, b = left - right, right - left
            if a and b:
                return a, b
    return None


def side_rows(
    rows: list[EvidenceRow], side: frozenset[str], other: frozenset[str], ctx: Ctx
) -> list[EvidenceRow]:
    """Rows that mention this side and not the other."""
    out = []
    for r in rows:
        st = ctx.stems.get(r.row_id, frozenset())
        if st & side and not st & other:
            out.append(r)
    return out


def side_name(side: frozenset[str], query: str) -> str:
    """The query's own words for a side, in query order."""
    shown = [w for w in words(query) if stem(w) in side]
    return " ".join(dict.fromkeys(shown)) or " ".join(sorted(side))
