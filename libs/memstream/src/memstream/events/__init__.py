"""Event envelope models."""

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
from memstream.events.inbound import (
    InboundAdapter,
    InboundEnvelope,
    InboundEvent,
    parse_inbound,
)

__all__ = [
    "EVENT_TYPES",
    "Envelope",
    "Event",
    "EventAdapter",
    "EventIn",
    "EventListAdapter",
    "InboundAdapter",
    "InboundEnvelope",
    "InboundEvent",
    "Security",
    "parse_event",
    "parse_inbound",
]
