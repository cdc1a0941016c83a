"""Which evidence rows a plan may use: relevance, validity as_of, time window, confidence."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from memstream.checkout.model import (
    DEFAULT_CONFIDENCE,
    Candidate,
    EvidenceRow,
    Exclusion,
    ExclusionReason,
    SynthesisPlan,
)
from memstream.checkout.synthesis.evidence import numeric_plan
from memstream.projection.names import entity_key
from memstream.text.words import GENERIC_STEMS, STOP_STEMS, content_stems, stem, words
from memstream.times import parse_ts

# Operations over the history of a subject: superseded facts still count for them.
HISTORY_OPS = frozenset({"count", "list", "temporal_order", "temporal_interval", "absence"})
# Operations over a set of items: when no item names the focus terms, everything about the
# named entities may stand in (with a warning and lower confidence).
LOOSE_OPS = frozenset(
    {"count", "sum", "average", "argmax", "argmin", "list", "temporal_interval", "temporal_order"}
)


@dataclass(frozen=True)
class Focus:
    """What the question is about: content-word stems and entity keys."""

    terms: frozenset[str]
    entities: tuple[str, ...]


def focus_of(plan: SynthesisPlan) -> Focus:
    """Plan terms minus light verbs/measure words and the entity names themselves.

    When nothing specific is left, no entity is named and the plan is not numeric, the light
    verbs are the focus ("what did I buy?"); a numeric plan with no focus uses every value in
    its unit.
    """
    named = {stem(w) for e in plan.entities for w in words(e)}
    stems = [s for s in (stem(t) for t in plan.terms) if s not in named and s not in STOP_STEMS]
    focus = {s for s in stems if s not in GENERIC_STEMS}
    counting_units = plan.operation == "count" and plan.unit is not None
    if not focus and not plan.entities and not numeric_plan(plan) and not counting_units:
        focus = set(stems)
    return Focus(frozenset(focus), tuple(plan.entities))


def candidate_stems(c: Candidate) -> frozenset[str]:
    """Content stems of everything a candidate says (text, value, subject, entity keys)."""
    parts = [c.text, c.value_text or "", c.subject or "", *c.entity_keys]
    return content_stems(" ".join(parts))


def matches_entity(c: Candidate, key: str, stems: frozenset[str]) -> bool:
    """By entity key, subject or agent, or by every word of the name occurring in the text."""
    if key in c.entity_keys or key == c.subject or key == entity_key(c.agent):
        return True
    name = [stem(w) for w in words(key)]
    return bool(name) and all(w in stems for w in name)


def row_stems(row: EvidenceRow, c: Candidate) -> frozenset[str]:
    """A number's own words when its event holds several numbers, else the whole candidate."""
    if ":q" in row.row_id and len(c.quantities) > 1:
        return content_stems(row.label)
    return candidate_stems(c)


def relevant_rows(
    plan: SynthesisPlan,
    rows: list[EvidenceRow],
    by_id: Mapping[str, Candidate],
    loose: bool = False,
) -> list[tuple[EvidenceRow, int]]:
    """Rows about the plan's entities (if any) that share a focus term (if any), best first.

    Each row comes with its rank: 100 × entities matched + focus terms matched. ``loose``
    drops the focus-term requirement for rows about a named entity.
    """
    focus = focus_of(plan)
    scored: list[tuple[tuple[float, ...], EvidenceRow, int]] = []
    for i, row in enumerate(rows):
        c = by_id[row.support_id]
        cstems = candidate_stems(c)
        ents = sum(matches_entity(c, e, cstems) for e in focus.entities)
        if focus.entities and not ents:
            continue
        overlap = len(focus.terms & row_stems(row, c))
        if focus.terms and not overlap and not (loose and ents):
            continue
        key = (-ents, -overlap, 0 if c.kind == "fact" else 1, -c.score, i)
        scored.append((key, row, 100 * ents + overlap))
    return [(row, rank) for _, row, rank in sorted(scored, key=lambda kv: kv[0])]


def coverage(
    plan: SynthesisPlan, ids: list[str], by_id: Mapping[str, Candidate]
) -> tuple[float, float]:
    """Share of focus terms and of entities that the candidates ``ids`` mention together."""
    focus = focus_of(plan)
    cands = [by_id[i] for i in ids if i in by_id]
    union: frozenset[str] = frozenset().union(*(candidate_stems(c) for c in cands))
    lex = len(focus.terms & union) / len(focus.terms) if focus.terms else 1.0
    if not focus.entities:
        return lex, 1.0
    hit = [e for e in focus.entities if any(matches_entity(c, e, union) for c in cands)]
    return lex, len(hit) / len(focus.entities)


def confidence_of(c: Candidate) -> float:
    return DEFAULT_CONFIDENCE if c.confidence is None else c.confidence


def _overlaps(
    a: datetime | None, b: datetime | None, start: datetime | None, end: datetime | None
) -> bool:
    return (end is None or a is None or a < end) and (start is None or b is None or b > start)


def _inside(t: datetime, start: datetime | None, end: datetime | None) -> bool:
    return (start is None or t >= start) and (end is None or t < end)


def screen(
    plan: SynthesisPlan,
    rows: list[EvidenceRow],
    by_id: Mapping[str, Candidate],
    min_confidence: float,
) -> tuple[list[EvidenceRow], list[Exclusion]]:
    """Keep rows valid ``as_of`` and inside the time window; say why the others are out.

    Facts must be valid at the evaluation time (``as_of``, or the window's last instant);
    operations over history (count, list, order, interval, absence) also use facts that
    were valid earlier. Events after ``as_of`` do not exist yet.
    """
    as_of = parse_ts(plan.as_of)
    win = plan.time_window
    start, end = (parse_ts(win.start), parse_ts(win.end)) if win else (None, None)
    t_eval = as_of
    if end is not None:
        last = end - timedelta(microseconds=1)
        t_eval = min(as_of, last) if as_of else last
    history = plan.operation in HISTORY_OPS
    kept: list[EvidenceRow] = []
    out: dict[tuple[str, str], Exclusion] = {}

    def exclude(item: str, reason: ExclusionReason, detail: str) -> None:
        out.setdefault((item, reason), Exclusion(item_id=item, reason=reason, detail=detail))

    for row in rows:
        c = by_id[row.support_id]
        if confidence_of(c) < min_confidence:
            exclude(c.item_id, "low_confidence", f"confidence {confidence_of(c):.2f}")
            continue
        if c.kind == "fact":
            vf, vt = parse_ts(c.valid_from or c.occurred_at), parse_ts(c.valid_to)
            if as_of and vf and vf > as_of:
                exclude(c.item_id, "out_of_window", f"valid from {c.valid_from}, after as_of")
            elif win and not _overlaps(vf, vt, start, end):
                exclude(c.item_id, "out_of_window", f"not valid within {win.text}")
            elif not history and vt is not None and t_eval is not None and vt <= t_eval:
                by = f" by {c.superseded_by}" if c.superseded_by else ""
                exclude(c.item_id, "superseded", f"valid until {c.valid_to}{by}")
            elif not history and vf and t_eval and vf > t_eval:
                exclude(c.item_id, "out_of_window", f"valid from {c.valid_from}")
            else:
                kept.append(row)
            continue
        occurred, when = parse_ts(c.occurred_at), parse_ts(row.time)
        if as_of and occurred and occurred > as_of:
            exclude(c.item_id, "out_of_window", f"occurred {c.occurred_at}, after as_of")
        elif win and when is not None and not _inside(when, start, end):
            exclude(c.item_id, "out_of_window", f"{row.time} outside {win.text}")
        else:
            kept.append(row)
    return kept, list(out.values())
