"""Candidates from what the lanes return: ledger events, graph facts and vector-index hits.

Events get their numbers and dates here, once per text, so synthesis never re-reads them.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from memstream.checkout.retrieve.facts import predicate_words
from memstream.projection.dates import dates
from memstream.projection.quantities import quantities
from memstream.records.packet import Candidate
from memstream.records.projected import EventRecord, FactView, SourceRef
from memstream.times import parse_ts

# A ledger event is a certain record of what was said or done (its truth is another matter,
# which facts and warnings carry).
EVENT_CONFIDENCE = 1.0


@functools.lru_cache(maxsize=20_000)
def _enriched(text: str, occurred_at: str) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    # The same events come back checkout after checkout; their numbers and dates do not change.
    return tuple(quantities(text)), tuple(dates(text, occurred_at))


def _enrich(text: str, occurred_at: str) -> dict[str, Any]:
    q, d = _enriched(text, occurred_at)
    return {"quantities": list(q), "dates": list(d)}


def event_candidate(e: EventRecord, entity_keys: list[str] | None = None) -> Candidate:
    """A ledger event read from the graph (chain and recency lanes)."""
    return Candidate(
        item_id=e.event_id,
        kind="event",
        text=e.text,
        ref=e.ref,
        type=e.type,
        agent=e.agent,
        occurred_at=e.occurred_at,
        user=e.user,
        metadata=e.metadata,
        caused_by=e.caused_by,
        entity_keys=entity_keys or [],
        confidence=EVENT_CONFIDENCE,
        **_enrich(e.text, e.occurred_at),
    )


def hit_candidate(payload: dict[str, Any]) -> Candidate:
    """An event from a vector-index hit's payload."""
    text = str(payload.get("text") or "")
    occurred = str(payload.get("occurred_at") or "")
    return Candidate(
        item_id=str(payload["event_id"]),
        kind="event",
        text=text,
        ref=SourceRef(
            tenant=str(payload["tenant"]),
            stream=str(payload["stream"]),
            seq=int(payload["seq"]),
            hash=str(payload["hash"]),
            event_id=str(payload["event_id"]),
        ),
        type=str(payload.get("type") or ""),
        agent=str(payload.get("agent") or ""),
        occurred_at=occurred,
        user=payload.get("user"),
        metadata=dict(payload.get("metadata") or {}),
        caused_by=[str(i) for i in payload.get("caused_by") or []],
        entity_keys=list(payload.get("entity_keys") or []),
        confidence=EVENT_CONFIDENCE,
        **_enrich(text, occurred),
    )


def fact_candidate(f: FactView, relevance: float | None = None) -> Candidate:
    """A graph fact, its text spelled out as ``subject predicate value unit``."""
    unit = f" {f.unit}" if f.unit else ""
    text = f"{f.subject_key} {predicate_words(f.predicate)} {f.value_text}{unit}"
    return Candidate(
        item_id=f.fact_id,
        kind="fact",
        text=text,
        ref=f.source,
        type="fact",
        agent="",
        occurred_at=f.valid_from,
        user=f.source_user,
        source_agent=f.source_agent,
        entity_keys=[k for k in (f.subject_key, f.object_key) if k],
        subject=f.subject_key,
        predicate=f.predicate,
        value=f.value,
        value_text=f.value_text,
        unit=f.unit,
        valid_from=f.valid_from,
        valid_to=f.valid_to,
        superseded_by=f.superseded_by,
        recorded_at=f.recorded_at,
        relevance=relevance,
        confidence=f.confidence,
    )


def known_by(c: Candidate, as_of: datetime) -> bool:
    """Did memory hold ``c`` at ``as_of``? Events by when they happened, facts by when they
    were recorded and became valid."""
    times = [c.occurred_at] if c.kind == "event" else [c.recorded_at, c.valid_from]
    return all((t := parse_ts(x)) is None or t <= as_of for x in times)
