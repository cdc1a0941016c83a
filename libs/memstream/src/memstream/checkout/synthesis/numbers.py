"""The numbers an arithmetic operation may use: one unit, no duplicates, nothing converted."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from memstream.checkout.synthesis.context import Ctx, is_number
from memstream.checkout.synthesis.duplicates import dedupe
from memstream.records.packet import EvidenceRow, Exclusion, PacketWarning, SynthesisPlan
from memstream.text.units import dimension, is_currency


def wants_money(plan: SynthesisPlan) -> bool:
    """Is the answer an amount of money (by answer type, stated currency or money words)?"""
    return plan.answer_type == "money" or is_currency(plan.unit) or plan.money


@dataclass
class Numbers:
    """The rows an operation computes over, in ``unit``, and what was left out and why."""

    rows: list[EvidenceRow]
    unit: str | None
    exclusions: list[Exclusion]
    warnings: list[PacketWarning]
    mismatched: list[EvidenceRow]  # same kind of measure in another unit (not converted)


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
            reason="unit_mismatch",
            detail=f"{r.unit} is not {unit} (not converted)",
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
    return Numbers(kept, unit, exclusions + dups, warnings, clash)
