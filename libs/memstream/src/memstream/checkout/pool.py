"""Steps over a candidate pool that read nothing: what accepted invalidations mark."""

from __future__ import annotations

from memstream.records.packet import Candidate
from memstream.records.projected import InvalidationRecord


def mark_invalidated(
    candidates: list[Candidate], found: list[InvalidationRecord]
) -> list[Candidate]:
    """``candidates`` with what ``found`` (oldest first) names marked: an event by its id, a
    fact by its id or its source event's. The earliest invalidation of an item holds."""
    first: dict[str, InvalidationRecord] = {}
    for record in found:
        first.setdefault(record.target_id, record)
    out = []
    for c in candidates:
        v = first.get(c.item_id)
        if v is None and c.kind == "fact":
            v = first.get(c.ref.event_id)
        if v is not None:
            c = c.model_copy(update={"invalidated_by": v.event_id, "invalidation_reason": v.reason})
        out.append(c)
    return out
