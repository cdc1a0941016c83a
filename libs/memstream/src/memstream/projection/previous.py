"""The message each message follows in its stream, for its context key (pure).

The previous message is the stream's entry at ``seq - 1`` when that entry is a message; a
projector finds it earlier in the same batch, or else among the points it already wrote (an
exact read by position, ``VectorIndex.at``). Both are what a replay from the start finds too:
the entry was projected before, unless a purge removed it, and then neither path finds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from memstream.projection.keys import MESSAGE_TYPES, Turn
from memstream.records.projected import Extraction


class Slot(NamedTuple):
    """One position in the ledger: a tenant's stream and a seq."""

    tenant: str
    stream: str
    seq: int


Stream = tuple[str, str]  # tenant, stream


@dataclass(frozen=True)
class Said:
    """A message as the key of the next one reads it."""

    event_id: str
    turn: Turn


# What a position holds for the next message's key: a message, or None (another event).
Known = Mapping[Slot, Said | None]


def follows(x: Extraction) -> Slot | None:
    """Where the message ``x`` follows from (None: not a message, or its stream's first)."""
    e = x.event
    if e.type not in MESSAGE_TYPES or e.seq <= 1:
        return None
    return Slot(e.tenant, e.stream, e.seq - 1)


def in_batch(extractions: list[Extraction]) -> dict[Slot, Said | None]:
    """Every position of the batch, with its message (None: not a message)."""
    return {
        Slot(x.event.tenant, x.event.stream, x.event.seq): (
            Said(x.event.event_id, Turn.of_event(x.event))
            if x.event.type in MESSAGE_TYPES
            else None
        )
        for x in extractions
    }


def last_of_streams(known: Known) -> dict[Stream, tuple[int, Said | None]]:
    """The last position of each stream among ``known``, with what it holds."""
    out: dict[Stream, tuple[int, Said | None]] = {}
    for slot, said in known.items():
        seen = out.get((slot.tenant, slot.stream))
        if seen is None or slot.seq > seen[0]:
            out[(slot.tenant, slot.stream)] = (slot.seq, said)
    return out


def missing(extractions: list[Extraction], known: Known) -> dict[Stream, list[int]]:
    """Positions, per tenant and stream, that messages of the batch follow and ``known``
    does not hold (to read from the index)."""
    out: dict[Stream, list[int]] = {}
    for x in extractions:
        slot = follows(x)
        if slot is not None and slot not in known:
            out.setdefault((slot.tenant, slot.stream), []).append(slot.seq)
    return out


def said_in(payloads: list[dict[str, Any]]) -> dict[Slot, Said | None]:
    """What event points' payloads hold, by position (None: not a message)."""
    return {
        Slot(str(p["tenant"]), str(p["stream"]), int(p["seq"])): (
            Said(str(p["event_id"]), Turn.of(p)) if p.get("type") in MESSAGE_TYPES else None
        )
        for p in payloads
        if p.get("kind") == "event"
    }
