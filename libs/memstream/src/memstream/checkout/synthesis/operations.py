"""Evidence operations: small pure functions over ledger rows → answer candidates."""

from __future__ import annotations

from collections.abc import Callable
from statistics import fmean

from memstream.checkout.synthesis.change import change
from memstream.checkout.synthesis.context import (
    Ctx,
    OpResult,
    is_fact,
    is_number,
    item_text,
    make_answer,
    num,
    when,
)
from memstream.checkout.synthesis.duplicates import dedupe, same_item
from memstream.checkout.synthesis.facts import facts_first
from memstream.checkout.synthesis.numbers import numbers
from memstream.checkout.synthesis.outcome import outcome
from memstream.checkout.synthesis.sides import side_name, side_rows, sides
from memstream.checkout.synthesis.span import span_of
from memstream.checkout.synthesis.temporal import latest_value, temporal_interval, temporal_order
from memstream.matching import numeric_plan
from memstream.records.packet import (
    EvidenceRow,
    JsonScalar,
    Operation,
    PacketWarning,
    SynthesisPlan,
)
from memstream.text.units import fmt_amount
from memstream.text.words import clip
from memstream.times import day_of

Op = Callable[[SynthesisPlan, list[EvidenceRow], Ctx], OpResult]
MAX_LIST = 10
SECONDARY = 0.8  # confidence factor of a total in a currency other than the main one


def lookup(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """The best-matching row: a fact's value, a number, a date, or an event's words."""
    res = OpResult()
    pool = facts_first(numbers(plan, rows, ctx).rows if numeric_plan(plan) else rows, ctx)
    if not pool:
        return res
    top = ctx.rank.get(pool[0].row_id, 0)
    tied = [r for r in pool if ctx.rank.get(r.row_id, 0) == top]
    best = max(tied, key=lambda r: (when(r), -tied.index(r)))  # newest of the best matches
    if plan.answer_type == "date":
        text: str = day_of(best.time) or best.label
        value: JsonScalar = text
    elif is_number(best.value):
        text, value = fmt_amount(num(best), best.unit), best.value
    elif plan.answer_type == "entity" and is_fact(best, ctx) and best.entity not in plan.entities:
        text, value = str(best.entity), best.entity
    elif is_fact(best, ctx):
        text, value = item_text(best, ctx, 200), best.value
    else:  # the clause about whom the question asks, when the memory says several things
        span = span_of(best.label, ctx.speakers.get(best.support_id, ""), plan)
        text, value = (span, span) if span else (item_text(best, ctx, 200), best.label)
    if is_number(best.value) and not is_fact(best, ctx):
        rivals = [
            r
            for r in pool[1:]
            if ctx.rank.get(r.row_id) == ctx.rank.get(best.row_id)
            and same_item(best, r.model_copy(update={"value": best.value}), ctx)
            and abs(num(r) - num(best)) > 1e-9
        ]
        if rivals:
            res.warnings.append(
                PacketWarning(
                    kind="contradiction",
                    message=f"other values for {clip(best.label, 60)}",
                    ids=[best.support_id, *(r.support_id for r in rivals)],
                )
            )
    res.answers.append(make_answer(text, value, best.unit, [best], ctx))
    return res


def _items(rows: list[EvidenceRow]) -> list[EvidenceRow]:
    return [r for r in rows if ":q" not in r.row_id]


def count(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """Distinct items; in a stated unit ("how many tickets"), the sum of those numbers."""
    res = OpResult()
    if plan.unit:
        got = numbers(plan, [r for r in rows if r.unit == plan.unit], ctx)
        if got.rows:
            total = sum(num(r) for r in got.rows)
            text = fmt_amount(total, got.unit)
            res.answers.append(make_answer(text, total, got.unit, got.rows, ctx, got.exclusions))
            return res
    kept, dups = dedupe(_items(rows), ctx)
    if kept:
        res.answers.append(make_answer(str(len(kept)), len(kept), None, kept, ctx, dups))
    return res


def _without_rates(rows: list[EvidenceRow], ctx: Ctx) -> list[EvidenceRow]:
    """Drop a rate ("$90 per night") when its item also states an amount in that unit."""
    return [
        r
        for r in rows
        if r.row_id not in ctx.rates
        or not any(
            o.support_id == r.support_id and o.unit == r.unit and o.row_id not in ctx.rates
            for o in rows
        )
    ]


def total(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """The sum of distinct values in one unit; other currencies get their own totals."""
    rows = _without_rates(rows, ctx)
    got = numbers(plan, rows, ctx)
    res = OpResult(warnings=got.warnings)
    if not got.rows:
        return res
    value = round(sum(num(r) for r in got.rows), 6)
    text = f"{fmt_amount(value, got.unit)} in total"
    res.answers.append(make_answer(text, value, got.unit, got.rows, ctx, got.exclusions))
    # No unit stated: each other unit of the same kind gets a total of its own, unconverted.
    others = [] if plan.unit is not None else [r.unit for r in got.mismatched]
    for unit in dict.fromkeys(others):
        alt = numbers(plan.model_copy(update={"unit": unit}), rows, ctx)
        if alt.rows:
            value = round(sum(num(r) for r in alt.rows), 6)
            text = f"{fmt_amount(value, unit)} in total (in {unit}, not converted)"
            cand = make_answer(text, value, unit, alt.rows, ctx, alt.exclusions)
            conf = round(cand.confidence * SECONDARY, 3)
            res.answers.append(cand.model_copy(update={"confidence": conf}))
    return res


def average(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """The mean of distinct values in one unit."""
    got = numbers(plan, rows, ctx)
    res = OpResult(warnings=got.warnings)
    if got.rows:
        value = round(fmean(num(r) for r in got.rows), 6)
        text = f"{fmt_amount(value, got.unit)} on average (of {len(got.rows)})"
        res.answers.append(make_answer(text, value, got.unit, got.rows, ctx, got.exclusions))
    return res


def _extreme(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx, highest: bool) -> OpResult:
    got = numbers(plan, rows, ctx)
    res = OpResult(warnings=got.warnings)
    if not got.rows:
        return res
    pick = max if highest else min
    best = pick(got.rows, key=num)
    name = str(best.entity) if is_fact(best, ctx) else clip(best.label, 80)
    text = f"{name} ({fmt_amount(num(best), got.unit)})"
    support = [best, *(r for r in got.rows if r is not best)]
    res.answers.append(make_answer(text, best.value, got.unit, support, ctx, got.exclusions))
    return res


def argmax(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """The item with the highest value (support: the winner first, then those compared)."""
    return _extreme(plan, rows, ctx, highest=True)


def argmin(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """The item with the lowest value."""
    return _extreme(plan, rows, ctx, highest=False)


def difference(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """The gap between the two things compared ("X than Y"), or between two lone values."""
    got = numbers(plan, rows, ctx)
    res = OpResult(warnings=got.warnings)
    split = sides(plan, ctx.focus)
    if split is not None:
        a_rows = side_rows(got.rows, split[0], split[1], ctx)
        b_rows = side_rows(got.rows, split[1], split[0], ctx)
        names = (side_name(split[0], plan.query), side_name(split[1], plan.query))
    elif len(got.rows) == 2:
        a_rows, b_rows = got.rows[:1], got.rows[1:]
        names = (clip(a_rows[0].label, 40), clip(b_rows[0].label, 40))
    else:
        a_rows, b_rows, names = got.rows, [], ("", "")
    if not a_rows or not b_rows:
        have = [r.support_id for r in a_rows + b_rows]
        res.warnings.append(
            PacketWarning(
                kind="missing_evidence",
                message="a difference needs a value for both sides; found "
                + ("one side only" if have else "neither side"),
                ids=list(dict.fromkeys(have)),
            )
        )
        return res
    a, b = sum(num(r) for r in a_rows), sum(num(r) for r in b_rows)
    gap = round(abs(a - b), 6)
    text = (
        f"{fmt_amount(gap, got.unit)} ({names[0]} {fmt_amount(a, got.unit)} vs "
        f"{names[1]} {fmt_amount(b, got.unit)})"
    )
    res.answers.append(make_answer(text, gap, got.unit, a_rows + b_rows, ctx, got.exclusions))
    return res


def listing(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """Distinct matching items, best first."""
    res = OpResult()
    kept, dups = dedupe(_items(rows) or rows, ctx)
    if kept:
        shown = kept[:MAX_LIST]
        values: list[JsonScalar] = [item_text(r, ctx) for r in shown]
        more = f" (+{len(kept) - len(shown)} more)" if len(kept) > len(shown) else ""
        text = "; ".join(str(v) for v in values) + more
        res.answers.append(make_answer(text, values, None, shown, ctx, dups))
    return res


def absence(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """ "Did … ever": yes with the evidence, else a cited-nothing "no record" answer."""
    res = OpResult()
    if rows:
        best = rows[0]
        res.answers.append(make_answer(f"Yes: {item_text(best, ctx)}", True, None, [best], ctx))
    else:
        res.answers.append(make_answer("No record of this in memory", False, None, [], ctx))
    return res


def outcome_or_world(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """An outcome over the task records the question finds; without any, it asks about the
    world ("did Bob fail his driving test?"): a yes/no or a lookup over what it finds."""
    if any(r.support_id in ctx.attempts for r in rows):
        return outcome(plan, rows, ctx)
    return (absence if plan.answer_type == "boolean" else lookup)(plan, rows, ctx)


OPERATIONS: dict[Operation, Op] = {
    "lookup": lookup,
    "count": count,
    "sum": total,
    "difference": difference,
    "average": average,
    "argmax": argmax,
    "argmin": argmin,
    "latest_value": latest_value,
    "temporal_interval": temporal_interval,
    "temporal_order": temporal_order,
    "list": listing,
    "absence": absence,
    "change": change,
    "outcome": outcome_or_world,
}


def run_operation(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """Apply the plan's operation to its (relevant, valid) rows."""
    return OPERATIONS[plan.operation](plan, rows, ctx)
