"""The evidence ledger: candidates normalised into rows an operation computes over."""

from __future__ import annotations

import re

from memstream.checkout.retrieve.facts import predicate_words
from memstream.matching import numeric_plan
from memstream.records.packet import Candidate, EvidenceRow, SynthesisPlan
from memstream.text.names import entity_key
from memstream.text.units import normalise_unit
from memstream.text.words import clip

_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[;\n]")
_CLAUSE_END = re.compile(r",\s|\s(?:and|but|plus|while|whereas)\s|:\s")
_LABEL_CHARS = 100
_RATE = re.compile(r"\s*(?:per|a|an|each|every|/)\s*[a-z]+", re.IGNORECASE)


def _bounds(text: str, start: int, end: int, splitter: re.Pattern[str]) -> tuple[int, int]:
    """The piece of ``text`` between the separators around ``start``..``end``."""
    left, right = 0, len(text)
    for m in splitter.finditer(text):
        if m.end() <= start:
            left = m.end()
        elif m.start() >= end:
            right = m.start()
            break
    return left, right


def _window(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> tuple[int, int]:
    """The sentence around a number, or its clause when the sentence holds other numbers."""
    a, b = _bounds(text, start, end, _SENTENCE_END)
    if sum(1 for s, _ in spans if a <= s < b) > 1:
        ca, cb = _bounds(text[a:b], start - a, end - a, _CLAUSE_END)
        a, b = a + ca, a + cb
    if b - a > _LABEL_CHARS:
        half = (_LABEL_CHARS - (end - start)) // 2
        a, b = max(a, start - half), min(b, end + half)
    return a, b


def _find_spans(c: Candidate) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    cursor = 0
    for q in c.quantities:
        pos = c.text.find(q.text, cursor)
        if pos < 0:
            pos = c.text.find(q.text)
        spans.append((pos, pos + len(q.text)) if pos >= 0 else (-1, -1))
        if pos >= 0:
            cursor = pos + len(q.text)
    return spans


def _date_in(c: Candidate, a: int, b: int) -> str | None:
    lowered = c.text.lower()
    for d in c.dates:
        pos = lowered.find(d.text.lower())
        if a <= pos < b:
            return d.date
    return None


def event_entity(c: Candidate) -> str:
    """The entity an event row is about: its first named entity, else its agent."""
    agent = entity_key(c.agent)
    named = [k for k in c.entity_keys if k and k != agent]
    return named[0] if named else (c.entity_keys[0] if c.entity_keys else agent)


def fact_row(c: Candidate) -> EvidenceRow:
    """One row for a fact: its value, unit, subject and start of validity."""
    value = c.value if c.value is not None else c.value_text
    return EvidenceRow(
        row_id=c.item_id,
        support_id=c.item_id,
        label=predicate_words(c.predicate or ""),
        value=value,
        unit=normalise_unit(c.unit),
        entity=c.subject,
        time=c.valid_from or c.occurred_at,
        ref=c.ref,
    )


def quantity_rows(c: Candidate) -> list[EvidenceRow]:
    """One row per number in an event, labelled with the words around it."""
    spans = _find_spans(c)
    rows: list[EvidenceRow] = []
    for i, (q, (start, end)) in enumerate(zip(c.quantities, spans, strict=True)):
        if start < 0:
            label, when = clip(c.text, _LABEL_CHARS), None
        else:
            a, b = _window(c.text, start, end, [s for s in spans if s[0] >= 0])
            label = " ".join(c.text[a:b].split()).strip(" ,;:-")
            sa, sb = _bounds(c.text, start, end, _SENTENCE_END)
            when = _date_in(c, sa, sb)
        rows.append(
            EvidenceRow(
                row_id=f"{c.item_id}:q{i}",
                support_id=c.item_id,
                label=label,
                value=q.value,
                unit=normalise_unit(q.unit),
                entity=event_entity(c),
                time=when or c.occurred_at,
                ref=c.ref,
            )
        )
    return rows


def text_row(c: Candidate) -> EvidenceRow:
    """One row for a whole event (non-numeric plans)."""
    return EvidenceRow(
        row_id=f"{c.item_id}:text",
        support_id=c.item_id,
        label=clip(c.text, 200),
        entity=event_entity(c),
        time=c.dates[0].date if c.dates else c.occurred_at,
        ref=c.ref,
    )


def is_text_row(row: EvidenceRow) -> bool:
    """A row made by :func:`text_row` (an event's whole text, no value of its own)."""
    return row.row_id == f"{row.support_id}:text"


def rate_rows(candidates: list[Candidate]) -> frozenset[str]:
    """Row ids of numbers stated as a rate ("$90 per night", "€40 a month", "$5/day")."""
    out: set[str] = set()
    for c in candidates:
        if c.kind != "event":
            continue
        for i, (start, end) in enumerate(_find_spans(c)):
            if start >= 0 and _RATE.match(c.text, end):
                out.add(f"{c.item_id}:q{i}")
    return frozenset(out)


def evidence_rows(plan: SynthesisPlan, candidates: list[Candidate]) -> list[EvidenceRow]:
    """Normalise candidates into evidence rows, in candidate order.

    Facts give one row each; an event that is the source of a fact in the pool is skipped
    (the fact stands for it). Events give one row per quantity for numeric plans (and for
    counts in a stated unit), and one row per event otherwise.
    """
    fact_sources = {c.ref.event_id for c in candidates if c.kind == "fact"}
    numeric = numeric_plan(plan)
    rows: list[EvidenceRow] = []
    for c in candidates:
        if c.kind == "fact":
            rows.append(fact_row(c))
            continue
        if c.item_id in fact_sources:
            continue
        if numeric or (plan.operation == "count" and plan.unit):
            rows += quantity_rows(c)
        if not numeric:
            rows.append(text_row(c))
    return rows
