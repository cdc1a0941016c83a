"""The two sides of a comparison ("X than Y", "X or Y", "between X and Y") and their rows."""

from __future__ import annotations

import re

from memstream.checkout.synthesis.context import Ctx
from memstream.records.packet import EvidenceRow, SynthesisPlan
from memstream.text.words import content_stems, stem, words

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
