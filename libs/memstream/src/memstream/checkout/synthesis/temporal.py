"""Time operations: latest value, interval, order."""

from __future__ import annotations

import re
from datetime import datetime

from memstream.checkout.synthesis.context import (
    EPOCH,
    Ctx,
    OpResult,
    is_fact,
    is_number,
    item_text,
    make_answer,
    num,
    when,
)
from memstream.checkout.synthesis.duplicates import same_item
from memstream.checkout.synthesis.facts import facts_first
from memstream.checkout.synthesis.numbers import numbers
from memstream.checkout.synthesis.sides import side_name, side_rows, sides
from memstream.matching import numeric_plan
from memstream.records.packet import (
    EvidenceRow,
    Exclusion,
    JsonScalar,
    PacketWarning,
    SynthesisPlan,
)
from memstream.text.units import fmt_amount
from memstream.times import day_of, parse_ts

_DAYS_PER = {"second": 1 / 86400, "minute": 1 / 1440, "hour": 1 / 24, "day": 1.0,
             "week": 7.0, "month": 30.4375, "year": 365.25}  # fmt: skip


def _missing(message: str, rows: list[EvidenceRow] | None = None) -> PacketWarning:
    ids = list(dict.fromkeys(r.support_id for r in rows or []))
    return PacketWarning(kind="missing_evidence", message=message, ids=ids)


def latest_value(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """The newest valid value of the best-matching thing (facts before events).

    Older rows about the same thing are excluded as superseded by the newest.
    """
    res = OpResult()
    if any(is_fact(r, ctx) for r in rows):
        pool = facts_first(rows, ctx)
    else:
        pool = numbers(plan, rows, ctx).rows if numeric_plan(plan) else rows
    if not pool:
        return res
    top = max(ctx.rank.get(r.row_id, 0) for r in pool)
    pool = [r for r in pool if ctx.rank.get(r.row_id, 0) == top]
    newest = max(pool, key=lambda r: (when(r), -pool.index(r)))
    since = day_of(newest.time)
    if is_fact(newest, ctx):
        text = f"{item_text(newest, ctx, 200)} (since {since})"
        value: JsonScalar = newest.value
    elif is_number(newest.value):
        text, value = f"{fmt_amount(num(newest), newest.unit)} (as of {since})", newest.value
    else:
        text, value = f"{item_text(newest, ctx, 200)} (as of {since})", newest.label
    older = [
        Exclusion(
            item_id=r.support_id, reason="superseded", detail=f"older than {newest.support_id}"
        )
        for r in pool
        if r is not newest
        and when(r) < when(newest)
        and (
            r.entity == newest.entity
            or same_item(newest, r.model_copy(update={"value": newest.value}), ctx)
        )
        and (not is_fact(r, ctx) or r.label == newest.label)
    ]
    res.answers.append(make_answer(text, value, newest.unit, [newest], ctx, older))
    return res


def _duration(days: float, plan: SynthesisPlan) -> tuple[float, str]:
    unit = plan.unit if plan.unit in _DAYS_PER else "day"
    assert unit is not None
    value = days / _DAYS_PER[unit]
    return (round(value) if unit == "day" else round(value, 2)), unit


def _interval_answer(
    plan: SynthesisPlan,
    start: datetime,
    end: datetime,
    rows: list[EvidenceRow],
    ctx: Ctx,
    note: str,
) -> OpResult:
    days = abs((end - start).total_seconds()) / 86400
    value, unit = _duration(days, plan)
    text = f"{fmt_amount(value, unit)} ({note})"
    return OpResult(answers=[make_answer(text, value, unit, rows, ctx)])


def temporal_interval(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """How long: between the two things named, a fact's validity, or since one event."""
    timed = [r for r in rows if parse_ts(r.time)]
    if not timed:
        return OpResult(warnings=[_missing("no dated evidence for an interval")])
    if plan.answer_type == "date":
        first = timed[0]  # the best match ("since when …")
        text = day_of(first.time)
        return OpResult(answers=[make_answer(text, text, None, [first], ctx)])
    split = sides(plan, ctx.focus)
    if split is not None and (between := _between_sides(plan, timed, split, ctx)) is not None:
        return between
    if is_fact(timed[0], ctx):
        return _fact_validity(plan, timed[0], ctx)
    return _event_interval(plan, timed, ctx)


def _between_sides(
    plan: SynthesisPlan,
    timed: list[EvidenceRow],
    split: tuple[frozenset[str], frozenset[str]],
    ctx: Ctx,
) -> OpResult | None:
    """From the first mention of one side to the first of the other (None if one is missing)."""
    a = side_rows(timed, split[0], split[1], ctx)
    b = side_rows(timed, split[1], split[0], ctx)
    if not a or not b:
        return None
    ra, rb = min(a, key=when), min(b, key=when)
    note = f"{day_of(ra.time)} to {day_of(rb.time)}"
    return _interval_answer(plan, when(ra), when(rb), [ra, rb], ctx, note)


def _fact_validity(plan: SynthesisPlan, best: EvidenceRow, ctx: Ctx) -> OpResult:
    """How long the best-matching fact held: until it ended, else until ``as_of``."""
    c_end = _fact_end(best, ctx, parse_ts(plan.as_of))
    note = f"{day_of(best.time)} to {day_of(c_end.isoformat()) if c_end else 'now'}"
    return _interval_answer(plan, when(best), c_end or when(best), [best], ctx, note)


def _event_interval(plan: SynthesisPlan, timed: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """Since the best event ("how long ago", or a single date), else first to last event.

    Dates stated in the text beat the times the events were told, when there are two.
    """
    best = timed[0]
    as_of = parse_ts(plan.as_of)
    stated = [r for r in timed if r.row_id in ctx.dated]
    ordered = sorted((stated if len(stated) >= 2 else timed)[:5], key=when)
    q = plan.query.lower()
    if re.search(r"\bago\b|\bsince\b|\bhave\b|\bhas\b", q) or when(ordered[0]) == when(ordered[-1]):
        if as_of is None:
            return OpResult(warnings=[_missing("no as_of time to measure from", [best])])
        note = f"{day_of(best.time)} to {day_of(plan.as_of)}"
        return _interval_answer(plan, when(best), as_of, [best], ctx, note)
    first, last = ordered[0], ordered[-1]
    note = f"{day_of(first.time)} to {day_of(last.time)}"
    return _interval_answer(plan, when(first), when(last), [first, last], ctx, note)


def _fact_end(row: EvidenceRow, ctx: Ctx, as_of: datetime | None) -> datetime | None:
    end = parse_ts(ctx.valid_to.get(row.support_id))
    if end is not None and as_of is not None:
        return min(end, as_of)
    return end or as_of


def temporal_order(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """Which of two things came first, or the matching items in time order."""
    timed = [r for r in rows if when(r) > EPOCH]
    if not timed:
        return OpResult(warnings=[_missing("no dated evidence to order")])
    split = sides(plan, ctx.focus)
    if split is not None:
        a = side_rows(timed, split[0], split[1], ctx)
        b = side_rows(timed, split[1], split[0], ctx)
        if not a or not b:
            return OpResult(warnings=[_missing("only one of the two things is dated", a + b)])
        ra, rb = min(a, key=when), min(b, key=when)
        names = [side_name(split[0], plan.query), side_name(split[1], plan.query)]
        pair = [(ra, names[0]), (rb, names[1])]
        pair.sort(key=lambda p: when(p[0]))
        (r1, n1), (r2, n2) = pair
        text = f"{n1} ({day_of(r1.time)}) came before {n2} ({day_of(r2.time)})"
        return OpResult(answers=[make_answer(text, [n1, n2], None, [r1, r2], ctx)])
    ordered = sorted(timed[:10], key=when)
    values: list[JsonScalar] = [item_text(r, ctx, 60) for r in ordered]
    text = " → ".join(f"{v} ({day_of(r.time)})" for v, r in zip(values, ordered, strict=True))
    return OpResult(answers=[make_answer(text, values, None, ordered, ctx)])
