"""What a write comes to: accepted with its position, or one typed refusal with its reason.

Every surface that writes events (HTTP, and through it MCP and the CLI; the SDK for its
validation, sealing and size) gets one of these from :mod:`memstream.intake`; the API only
maps a refusal to its status code and body. ``reason`` is the label the refusal is counted
under (``memstream_events_rejected_total``), ``count`` how many events it refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memstream.ledger.size import Oversized


@dataclass(frozen=True)
class Accepted:
    """Durable (spooled, or acknowledged by Kafka without an outbox): the ids in request
    order and the write's position, a token a read can wait for with ``after=``."""

    ids: list[str]
    position: str


@dataclass(frozen=True)
class FieldError:
    """One fault of a refused body: the event's index in the batch (0 for one event), the
    field's dotted path, the message and its type."""

    index: int
    field: str
    message: str
    type: str


@dataclass(frozen=True)
class Malformed:
    """The body is not one event or a batch of them (not JSON, nested too deep, wrong
    shape); ``errors`` names the place where it can."""

    detail: str
    errors: list[FieldError] = field(default_factory=list)
    count: int = 1
    reason: str = "malformed"


@dataclass(frozen=True)
class Invalid:
    """An event breaks the published models: every fault, by event and field."""

    detail: str
    errors: list[FieldError]
    count: int
    reason: str = "invalid"


@dataclass(frozen=True)
class Forbidden:
    """An event names what the writer may not write (another tenant)."""

    detail: str
    count: int
    reason: str = "tenant"


@dataclass(frozen=True)
class TooMany:
    """A batch past the most events a request may carry."""

    detail: str
    count: int
    reason: str = "too_large"


@dataclass(frozen=True)
class Oversize:
    """Events whose sealed record could pass the broker's record limit, each with the most
    bytes its ledger record could take."""

    detail: str
    limit: int
    too_large: list[Oversized]
    count: int
    reason: str = "too_large"


@dataclass(frozen=True)
class Purged:
    """An event reuses the id of a purged event: its key is destroyed, it is never written."""

    detail: str
    purged_ids: list[str]
    count: int
    reason: str = "purged"


@dataclass(frozen=True)
class Backlog:
    """The tenant's share of the outbox is full: retry later; nothing was accepted."""

    detail: str
    ids: list[str]
    count: int
    reason: str = "backlog"


@dataclass(frozen=True)
class Unavailable:
    """Not made durable (the outbox is full, Kafka did not acknowledge): send the same ids
    again; ``failed_ids`` are those known not to have arrived."""

    detail: str
    ids: list[str]
    failed_ids: list[str]
    count: int
    reason: str = "delivery"


Refusal = Malformed | Invalid | Forbidden | TooMany | Oversize | Purged | Backlog | Unavailable
Outcome = Accepted | Refusal
REASONS = ("too_large", "malformed", "tenant", "invalid", "delivery", "backlog", "purged")
