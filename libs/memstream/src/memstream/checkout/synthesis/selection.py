"""Which evidence rows a plan may use: relevance, validity as_of, time window, confidence."""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from datetime import datetime, timedelta

from memstream.matching import (
    PREDICATE_MATCH,
    candidate_stems,
    entities_matched,
    focus_of,
    matches_entity,
    row_stems,
    terms_matched,
    with_source,
)
from memstream.records.packet import (
    DEFAULT_CONFIDENCE,
    Candidate,
    EvidenceRow,
    Exclusion,
    ExclusionReason,
    SynthesisPlan,
    TimeWindow,
)
from memstream.times import parse_ts

# A feedback prior of ±1 moves a row by this many focus terms of relevance (see learning.priors).
PRIOR_WEIGHT = 1.0
# Operations over the history of a subject: superseded facts still count for them.
HISTORY_OPS = frozenset(
    {"count", "list", "temporal_order", "temporal_interval", "absence", "change"}
)
# Operations over a set of items: when no item names the focus terms, everything about the
# named entities may stand in (with a warning and lower confidence).
LOOSE_OPS = frozenset(
    {"count", "sum", "average", "argmax", "argmin", "list", "temporal_interval", "temporal_order"}
)


def relevant_rows(
    plan: SynthesisPlan,
    rows: list[EvidenceRow],
    by_id: Mapping[str, Candidate],
    loose: bool = False,
    earned: Set[str] = frozenset(),
) -> list[tuple[EvidenceRow, float]]:
    """Rows about the plan's entities (if any) that share a focus term (if any), best first.

    Each row comes with its rank: 100 × entities matched + focus terms matched + the
    candidate's bounded feedback prior × ``PRIOR_WEIGHT``. ``loose`` drops the focus-term
    requirement for rows about a named entity. ``earned``: support ids that qualify by their
    record (tasks asking this kind of question about these entities succeeded with them),
    counted as naming the entities. The prior only re-orders rows that qualify.
    """
    focus = focus_of(plan)
    scored: list[tuple[tuple[float, ...], EvidenceRow, float]] = []
    for i, row in enumerate(rows):
        c = by_id[row.support_id]
        proven = row.support_id in earned
        ents = (
            len(focus.entities)
            if proven
            else entities_matched(plan, focus.entities, c, candidate_stems(c))
        )
        if focus.entities and not ents:
            continue
        overlap = terms_matched(focus.terms, c, with_source(c, row_stems(row, c), by_id))
        if focus.terms and not overlap and not (loose and ents) and not proven:
            continue
        fit = c.relevance or 0.0
        learned = overlap + PRIOR_WEIGHT * c.prior
        key = (-ents, -learned, 0 if c.kind == "fact" else 1, -fit, -c.score, i)
        scored.append((key, row, 100 * ents + learned))
    return [(row, rank) for _, row, rank in sorted(scored, key=lambda kv: kv[0])]


def coverage(
    plan: SynthesisPlan, ids: list[str], by_id: Mapping[str, Candidate]
) -> tuple[float, float]:
    """Share of focus terms and of entities that the candidates ``ids`` mention together
    (all terms when one of them is a fact whose predicate matches the question)."""
    focus = focus_of(plan)
    cands = [by_id[i] for i in ids if i in by_id]
    union: frozenset[str] = frozenset().union(
        *(with_source(c, candidate_stems(c), by_id) for c in cands)
    )
    lex = len(focus.terms & union) / len(focus.terms) if focus.terms else 1.0
    if any(c.kind == "fact" and (c.relevance or 0.0) >= PREDICATE_MATCH for c in cands):
        lex = 1.0  # a fact whose predicate means what the question asks covers it
    if not focus.entities:
        return lex, 1.0
    hit = [
        e
        for e in focus.entities
        if any(matches_entity(c, k, union) for c in cands for k in plan.keys_of(e))
    ]
    return lex, len(hit) / len(focus.entities)


def confidence_of(c: Candidate) -> float:
    """A candidate's confidence, ``DEFAULT_CONFIDENCE`` when unknown."""
    return DEFAULT_CONFIDENCE if c.confidence is None else c.confidence


def _overlaps(
    a: datetime | None, b: datetime | None, start: datetime | None, end: datetime | None
) -> bool:
    return (end is None or a is None or a < end) and (start is None or b is None or b > start)


def _inside(t: datetime, start: datetime | None, end: datetime | None) -> bool:
    return (start is None or t >= start) and (end is None or t < end)


@dataclass(frozen=True)
class _Times:
    """The times a plan screens against: its ``as_of``, its window and the evaluation time."""

    as_of: datetime | None
    window: TimeWindow | None
    start: datetime | None
    end: datetime | None
    t_eval: datetime | None  # ``as_of``, or the window's last instant if that is earlier
    history: bool  # the operation covers a subject's history, not only its current state


def _times(plan: SynthesisPlan) -> _Times:
    as_of = parse_ts(plan.as_of)
    win = plan.time_window
    start, end = (parse_ts(win.start), parse_ts(win.end)) if win else (None, None)
    t_eval = as_of
    if end is not None:
        last = end - timedelta(microseconds=1)
        t_eval = min(as_of, last) if as_of else last
    return _Times(as_of, win, start, end, t_eval, plan.operation in HISTORY_OPS)


Verdict = tuple[ExclusionReason, str] | None  # why an item is out, or None to keep it


def _fact_verdict(c: Candidate, t: _Times) -> Verdict:
    """Facts must hold at the evaluation time; over a history, earlier facts count too."""
    vf, vt = parse_ts(c.valid_from or c.occurred_at), parse_ts(c.valid_to)
    win = t.window
    if t.as_of and vf and vf > t.as_of:
        return "out_of_window", f"valid from {c.valid_from}, after as_of"
    if win and not _overlaps(vf, vt, t.start, t.end):
        return "out_of_window", f"not valid within {win.text}"
    if not t.history and vt is not None and t.t_eval is not None and vt <= t.t_eval:
        by = f" by {c.superseded_by}" if c.superseded_by else ""
        return "superseded", f"valid until {c.valid_to}{by}"
    if not t.history and vf and t.t_eval and vf > t.t_eval:
        return "out_of_window", f"valid from {c.valid_from}"
    return None


def _event_verdict(row: EvidenceRow, c: Candidate, t: _Times) -> Verdict:
    """Events after ``as_of`` have not happened yet; a row's own time must be in the window."""
    occurred, when = parse_ts(c.occurred_at), parse_ts(row.time)
    win = t.window
    if t.as_of and occurred and occurred > t.as_of:
        return "out_of_window", f"occurred {c.occurred_at}, after as_of"
    if win and when is not None and not _inside(when, t.start, t.end):
        return "out_of_window", f"{row.time} outside {win.text}"
    return None


def screen(
    plan: SynthesisPlan,
    rows: list[EvidenceRow],
    by_id: Mapping[str, Candidate],
    min_confidence: float,
) -> tuple[list[EvidenceRow], list[Exclusion]]:
    """Keep rows valid ``as_of`` and inside the time window; say why the others are out.

    An invalidated memory is always out. Facts must be valid at the evaluation time
    (``as_of``, or the window's last instant); operations over history (count, list, order,
    interval, absence) also use facts that were valid earlier. Events after ``as_of`` do not
    exist yet. An item is excluded once per reason, however many of its rows go.
    """
    t = _times(plan)
    kept: list[EvidenceRow] = []
    out: dict[tuple[str, str], Exclusion] = {}
    for row in rows:
        c = by_id[row.support_id]
        verdict: Verdict
        if c.invalidated_by is not None:
            verdict = "invalidated", c.invalidation_reason or ""
        elif confidence_of(c) < min_confidence:
            verdict = "low_confidence", f"confidence {confidence_of(c):.2f}"
        elif c.kind == "fact":
            verdict = _fact_verdict(c, t)
        else:
            verdict = _event_verdict(row, c, t)
        if verdict is None:
            kept.append(row)
        else:
            reason, detail = verdict
            out.setdefault(
                (c.item_id, reason), Exclusion(item_id=c.item_id, reason=reason, detail=detail)
            )
    return kept, list(out.values())
