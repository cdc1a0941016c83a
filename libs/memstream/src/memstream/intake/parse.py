"""A request body as events, or why not: validated whole before anything is produced.

Pure: bytes, the writer's tenant and the clock in; typed events or a typed refusal out. A
body is one event or ``{"events": [...]}``; every event is checked against the published
models in strict JSON mode (no ``"1"`` for 1, no number for a date), and a batch is refused
whole for one bad event, naming every fault by event index and field.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memstream.events import EVENT_TYPES, Event, InboundEvent, parse_inbound
from memstream.intake.outcomes import FieldError, Forbidden, Invalid, Malformed, TooMany
from memstream.scope import FIELDS, WHOLE, Scope
from memstream.wire import BodyFault, dotted, json_body, shorten

MAX_BATCH = 10_000
# Enough to fix a batch in one round trip without echoing 10k copies of one mistake.
MAX_REPORTED_ERRORS = 50
DEFAULT_AGENT = "api"


class EventBatch(BaseModel):
    """A batch body: every event is validated before any is produced."""

    model_config = ConfigDict(extra="forbid")
    events: list[InboundEvent] = Field(min_length=1, max_length=MAX_BATCH)


@dataclass(frozen=True)
class Parsed:
    """The body's events, typed and completed, and whether it was a batch."""

    events: list[Event]
    batch: bool


class _Refused(Exception):
    def __init__(self, refusal: Malformed | Invalid | Forbidden | TooMany) -> None:
        self.refusal = refusal


def parse_body(
    body: bytes,
    tenant: str,
    now: datetime,
    max_batch: int = MAX_BATCH,
    agent: str = DEFAULT_AGENT,
    scope: Scope = WHOLE,
) -> Parsed | Malformed | Invalid | Forbidden | TooMany:
    """The events of ``body`` for ``tenant`` (``id``, ``occurred_at`` = ``now`` and
    ``agent`` filled where left out), or the refusal of the whole body. ``scope``: the
    writer's key's; a field it fixes to one value is filled where left out, and an event
    outside it is refused (403)."""
    fixed = {f: v[0] for f in FIELDS if (v := scope.values(f)) is not None and len(v) == 1}
    try:
        items, batch = _items(body, max_batch)
        events = _complete(
            body, items, batch, tenant, now, fixed.get("agent", agent), fixed.get("user")
        )
        if not scope.empty:
            _inside(events, batch, scope)
    except _Refused as refused:
        return refused.refusal
    return Parsed(events, batch)


def outside(events: list[Event], batch: bool, scope: Scope) -> Forbidden | None:
    """The refusal of the first event outside ``scope`` (a key's), naming it and its field;
    None when every event is inside."""
    for i, e in enumerate(events):
        fields = {"user": e.user, "agent": e.agent, "stream": e.stream}
        for f in FIELDS:
            allowed = scope.values(f)
            if allowed is not None and fields[f] not in allowed:
                why = (
                    f"{where(i, batch)}.{f}: outside this key's scope ({scope.label()}); "
                    "nothing was accepted"
                )
                return Forbidden(why, len(events))
    return None


def _inside(events: list[Event], batch: bool, scope: Scope) -> None:
    refused = outside(events, batch, scope)
    if refused is not None:
        raise _Refused(refused)


def where(index: int, batch: bool) -> str:
    """How a refusal names an event: ``events[3]`` in a batch, ``event`` alone."""
    return f"events[{index}]" if batch else "event"


def _items(body: bytes, max_batch: int) -> tuple[list[Any], bool]:
    """The raw event objects and whether the body was a batch."""
    try:
        doc = json_body(body)
    except BodyFault as fault:
        raise _Refused(_malformed(fault)) from fault
    if not (isinstance(doc, dict) and "events" in doc):
        if isinstance(doc, dict):
            return [doc], False
        raise _Refused(Malformed('body must be one event object or {"events": [...]}'))
    extra = sorted(set(doc) - {"events"})
    items = doc["events"]
    if extra:
        why = f"unexpected top-level field(s) next to 'events': {', '.join(extra)}"
        raise _Refused(Malformed(why))
    if not isinstance(items, list):
        raise _Refused(Malformed("'events' must be a list"))
    if not items:
        raise _Refused(Malformed("'events' is empty; send at least one event"))
    if len(items) > max_batch:
        why = f"batch of {len(items)} events exceeds the limit of {max_batch}; split it"
        raise _Refused(TooMany(why, len(items)))
    return items, True


def _malformed(fault: BodyFault) -> Malformed:
    """The refusal of a body that holds no JSON document (``wire.json_body``): a place past
    the nesting limit or a string no store can hold is named as the event's field."""
    if fault.loc is None:
        return Malformed(fault.problem)
    doc = fault.doc
    batch = "events" in doc if isinstance(doc, dict) else fault.loc[:1] == ("events",)
    error = _located(fault.loc, fault.problem, fault.kind, batch)
    place = where(error.index, batch) + (f".{error.field}" * bool(error.field))
    return Malformed(f"{place}: {fault.rule}; nothing was accepted", [error])


def _complete(
    body: bytes,
    items: list[Any],
    batch: bool,
    tenant: str,
    now: datetime,
    agent: str,
    user: str | None,
) -> list[Event]:
    """Validate everything first: a batch is produced whole or not at all."""
    foreign = [
        (i, item["tenant"])
        for i, item in enumerate(items)
        if isinstance(item, dict)
        and isinstance(item.get("tenant"), str)
        and item["tenant"] != tenant
    ]
    if foreign:
        i, other = foreign[0]
        reason = (
            f"{where(i, batch)} names tenant {other!r} but the API key is bound to tenant "
            f"{tenant!r}" + (f" ({len(foreign)} such events)" if len(foreign) > 1 else "")
        )
        raise _Refused(Forbidden(reason, len(items)))
    purges = [
        i for i, it in enumerate(items) if isinstance(it, dict) and it.get("type") == "memory.purge"
    ]
    if purges:
        reason = (
            f"{where(purges[0], batch)} is a memory.purge: purges are planned and written by "
            "DELETE /v1/subjects/{subject}; nothing was accepted"
        )
        raise _Refused(Invalid(reason, [], len(items)))
    try:
        inbound = _validate(body, batch)
    except ValidationError as exc:
        raise _Refused(_invalid(exc, batch, len(items))) from exc
    return [e.complete(tenant, now=now, agent=agent, user=user) for e in inbound]


def _validate(body: bytes, batch: bool) -> list[InboundEvent]:
    """Strict JSON validation against the published models (raises ValidationError)."""
    if batch:
        return EventBatch.model_validate_json(body, strict=True).events
    return [parse_inbound(body)]


def _invalid(exc: ValidationError, batch: bool, count: int) -> Invalid:
    errors = list(_field_errors(exc, batch))
    first = errors[0]
    place = where(first.index, batch)
    path = f"{place}.{first.field}" if first.field else place
    more = f" (and {len(errors) - 1} more error(s))" if len(errors) > 1 else ""
    reason = f"{path}: {first.message}{more}; nothing was accepted"
    return Invalid(reason, errors[:MAX_REPORTED_ERRORS], count)


def _field_errors(exc: ValidationError, batch: bool) -> Iterator[FieldError]:
    for e in exc.errors(include_url=False):
        loc = tuple(e["loc"])
        if e["type"] in ("union_tag_invalid", "union_tag_not_found"):
            loc = (*loc[:2], "type") if batch else ("type",)
        yield _located(loc, e["msg"], e["type"], batch)


def _located(loc: tuple[int | str, ...], message: str, kind: str, batch: bool) -> FieldError:
    """An error at ``loc`` (from the body's root) as the event index and its field."""
    index = 0
    if batch and len(loc) >= 2 and loc[0] == "events" and isinstance(loc[1], int):
        index, loc = loc[1], loc[2:]
    if loc and loc[0] in EVENT_TYPES:
        loc = loc[1:]  # the discriminator tag pydantic puts first is not a field
    return FieldError(index=index, field=dotted(loc), message=shorten(message), type=kind)
