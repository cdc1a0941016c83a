"""Builders for synthesis tests: hand-written candidates (shopping, travel, projects)."""

from __future__ import annotations

import itertools

from memstream.projection.dates import dates
from memstream.projection.quantities import quantities
from memstream.records.packet import Candidate, JsonScalar
from memstream.records.projected import SourceRef
from memstream.text.names import entity_key, name_candidates

NOW = "2024-06-12T10:00:00Z"
_seq = itertools.count(1)


def ref(event_id: str) -> SourceRef:
    return SourceRef(
        tenant="t1", stream="s", seq=next(_seq), hash=f"h-{event_id}", event_id=event_id
    )


def event(
    item_id: str,
    text: str,
    at: str = "2024-05-01T10:00:00Z",
    agent: str = "user",
    score: float = 0.0,
    confidence: float | None = 1.0,
    type: str = "message.user",
) -> Candidate:
    """An event candidate enriched the way the retriever does it."""
    keys = [entity_key(agent), *(entity_key(n) for n in name_candidates(text))]
    return Candidate(
        item_id=item_id,
        kind="event",
        text=text,
        ref=ref(item_id),
        type=type,
        agent=agent,
        occurred_at=at,
        score=score,
        entity_keys=list(dict.fromkeys(keys)),
        quantities=quantities(text),
        dates=dates(text, at),
        confidence=confidence,
    )


def fact(
    fact_id: str,
    subject: str,
    predicate: str,
    *,
    value: JsonScalar = None,
    obj: str | None = None,
    unit: str | None = None,
    valid_from: str = "2024-01-01T00:00:00Z",
    valid_to: str | None = None,
    superseded_by: str | None = None,
    confidence: float | None = 1.0,
) -> Candidate:
    """A fact candidate as the retriever reads it from the graph."""
    shown = obj if obj is not None else ("" if value is None else str(value))
    subject_key = entity_key(subject)
    keys = [subject_key] + ([entity_key(obj)] if obj else [])
    return Candidate(
        item_id=fact_id,
        kind="fact",
        text=f"{subject_key} {predicate.replace('_', ' ')} {shown}" + (f" {unit}" if unit else ""),
        ref=ref(fact_id.split("#")[0]),
        type="fact",
        agent="",
        occurred_at=valid_from,
        entity_keys=keys,
        subject=subject_key,
        predicate=predicate,
        value=value,
        value_text=shown,
        unit=unit,
        valid_from=valid_from,
        valid_to=valid_to,
        superseded_by=superseded_by,
        confidence=confidence,
    )
