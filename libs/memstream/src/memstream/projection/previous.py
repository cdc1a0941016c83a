"""The message each message follows in its stream, for its context key (pure).

The previous message is the stream's entry at ``seq - 1`` when that entry is a message; a
projector finds it earlier in the same batch, or else among the points it already wrote
(:func:`said_in` reads an index hit). Both are what a replay from the start finds too: the
entry was projected before, unless a purge removed it, and then neither path finds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memstream.projection.keys import MESSAGE_TYPES, Turn
from memstream.projection.model import Extraction
from memstream.times import to_datetime


@dataclass(frozen=True)
class Slot:
    """One position in the ledger: a tenant's stream and a seq."""

    tenant: str
    stream: str
    seq: int


@dataclass(frozen=True)
class Said:
    """A message as the key of the next one reads it."""

    event_id: str
    turn: Turn


def follows(x: Extraction) -> Slot | None:
    """Where the message ``x`` follows from (None: not a message, or its stream's first)."""
    e = x.event
    if e.type not in MESSAGE_TYPES or e.seq <= 1:
        return None
    return Slot(e.tenant, e.stream, e.seq - 1)


def in_batch(extractions: list[Extraction]) -> dict[Slot, Said]:
    """The batch's messages by position."""
    return {
        Slot(x.event.tenant, x.event.stream, x.event.seq): Said(
            x.event.event_id, Turn.of_event(x.event)
        )
        for x in extractions
        if x.event.type in MESSAGE_TYPES
    }


def missing(extractions: list[Extraction], known: Mapping[Slot, Said]) -> dict[Slot, datetime]:
    """Positions a message of the batch follows that the batch does not hold, each with the
    time of the message that follows it (an index finds the earlier one at or before it)."""
    out: dict[Slot, datetime] = {}
    for x in extractions:
        slot = follows(x)
        if slot is not None and slot not in known:
            out.setdefault(slot, to_datetime(x.event.occurred_at))
    return out


def said_in(slot: Slot, payloads: list[dict[str, Any]]) -> Said | None:
    """The message at ``slot`` among event points' payloads (a stream's newest first)."""
    for p in payloads:
        if (
            p.get("tenant") == slot.tenant
            and p.get("stream") == slot.stream
            and p.get("seq") == slot.seq
            and p.get("type") in MESSAGE_TYPES
            and p.get("kind") == "event"
        ):
            return Said(str(p["event_id"]), Turn.of(p))
    return None
