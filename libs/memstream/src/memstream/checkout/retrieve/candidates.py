"""Candidates from what the lanes return: ledger events, graph facts and vector-index hits.

Events get their numbers and dates here, once per text, so synthesis never re-reads them.
"""

from __future__ import annotations

import functools
from typing import Any

from memstream.checkout.model import Candidate
from memstream.projection.dates import dates
from memstream.projection.model import EventRecord, FactView, SourceRef
from memstream.projection.quantities import quantities

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
        metadata=e.metadata,
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
        metadata=dict(payload.get("metadata") or {}),
        entity_keys=list(payload.get("entity_keys") or []),
        confidence=EVENT_CONFIDENCE,
        **_enrich(text, occurred),
    )


def fact_candidate(f: FactView, agent: str = "") -> Candidate:
    """A graph fact, its text spelled out as ``subject predicate value unit``."""
    unit = f" {f.unit}" if f.unit else ""
    text = f"{f.subject_key} {f.predicate.replace('_', ' ')} {f.value_text}{unit}"
    return Candidate(
        item_id=f.fact_id,
        kind="fact",
        text=text,
        ref=f.source,
        type="fact",
        agent=agent,
        occurred_at=f.valid_from,
        entity_keys=[k for k in (f.subject_key, f.object_key) if k],
        subject=f.subject_key,
        predicate=f.predicate,
        value=f.value,
        value_text=f.value_text,
        unit=f.unit,
        valid_from=f.valid_from,
        valid_to=f.valid_to,
        superseded_by=f.superseded_by,
        confidence=f.confidence,
    )
