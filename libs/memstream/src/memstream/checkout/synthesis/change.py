"""Change: values replaced by others, read from the facts' validity intervals.

A change is a fact closed by its successor (``superseded_by``): the old value with its
``valid_to``, the new one with its ``valid_from``, both cited. "Did Bob change jobs?" is yes
with the latest such pair, or — memory holding no replacement — a cited-nothing no that
asks the user; "who changed jobs?" names the subjects with a change; "what changed for Bob
since Monday?" lists the changes whose new value begins in the question's period. Only the
facts the question finds count (its entities, and its words or a predicate that means them);
events tell no change by themselves.
"""

from __future__ import annotations

from memstream.checkout.synthesis.context import (
    Ctx,
    OpResult,
    inside,
    is_fact,
    item_text,
    make_answer,
    name_of,
    when,
)
from memstream.records.packet import EvidenceRow, JsonScalar, SynthesisPlan
from memstream.times import day_of

MAX_CHANGES = 10
Pair = tuple[EvidenceRow, EvidenceRow]  # (old, new)


def pairs_of(rows: list[EvidenceRow], ctx: Ctx) -> list[Pair]:
    """Each change with an end among ``rows`` (its other end from the pool's facts: the
    question may find only the new value's words), newest change first."""
    before = {new: old for old, new in ctx.successor.items()}
    pairs: dict[tuple[str, str], Pair] = {}
    for r in rows:
        if not is_fact(r, ctx):
            continue
        for old_id, new_id in ((r.support_id, ctx.successor.get(r.support_id)),
                               (before.get(r.support_id), r.support_id)):  # fmt: skip
            old, new = ctx.facts.get(old_id or ""), ctx.facts.get(new_id or "")
            if old is not None and new is not None:
                pairs[(old.support_id, new.support_id)] = (old, new)
    return sorted(pairs.values(), key=lambda p: (when(p[1]), p[1].support_id), reverse=True)


def told(old: EvidenceRow, new: EvidenceRow, ctx: Ctx) -> str:
    """``bob works at: Initech (until 2026-03-01) → Globex (from 2026-03-01)``."""
    until = day_of(ctx.valid_to.get(old.support_id) or new.time or "")
    return (
        f"{name_of(old.entity, ctx)} {old.label}: {item_text(old, ctx)} (until {until}) → "
        f"{item_text(new, ctx)} (from {day_of(new.time or '')})"
    )


def change(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """Whether, who or what changed (see the module docstring)."""
    pairs = [p for p in pairs_of(rows, ctx) if inside(plan.time_window, when(p[1]))]
    res = OpResult()
    if not pairs:
        if plan.answer_type == "boolean":
            res.answers.append(make_answer("No change of this on record", False, None, [], ctx))
        return res
    if plan.answer_type == "boolean":
        old, new = pairs[0]
        res.answers.append(make_answer(f"Yes: {told(old, new, ctx)}", True, None, [new, old], ctx))
        return res
    shown = pairs[:MAX_CHANGES]
    support = [r for p in shown for r in (p[1], p[0])]
    more = f" (+{len(pairs) - len(shown)} more)" if len(pairs) > len(shown) else ""
    if plan.answer_type == "entity":
        subjects: list[JsonScalar] = list(dict.fromkeys(name_of(p[1].entity, ctx) for p in shown))
        lines = "; ".join(told(o, n, ctx) for o, n in shown)
        text = f"{', '.join(str(s) for s in subjects)} ({lines}){more}"
        res.answers.append(make_answer(text, subjects, None, support, ctx))
        return res
    values: list[JsonScalar] = [told(o, n, ctx) for o, n in shown]
    res.answers.append(
        make_answer("; ".join(str(v) for v in values) + more, values, None, support, ctx)
    )
    return res
