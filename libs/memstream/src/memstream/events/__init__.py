"""Event envelope models (DESIGN.md §3.1)."""

from memstream.events.envelope import (
    EVENT_TYPES,
    Envelope,
    Event,
    EventAdapter,
    EventIn,
    EventListAdapter,
    Security,
    parse_event,
)

__all__ = [
    "EVENT_TYPES",
    "Envelope",
    "Event",
    "EventAdapter",
    "EventIn",
    "EventListAdapter",
    "Security",
    "parse_event",
]
