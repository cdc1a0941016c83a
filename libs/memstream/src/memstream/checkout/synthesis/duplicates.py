"""Duplicates: the same item mentioned twice (repeated, restated, or echoed by the assistant)."""

from __future__ import annotations

from memstream.checkout.synthesis.context import Ctx, is_fact, is_number, num, when
from memstream.records.packet import EvidenceRow, Exclusion
from memstream.text.words import GENERIC_STEMS, clip, content_stems, jaccard

NUMERIC_DUP = 0.5  # label similarity for the same number mentioned twice
TEXT_DUP = 0.8  # label similarity for the same event text repeated


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
