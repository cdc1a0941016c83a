"""``POST /v1/events``: validate a whole batch, produce it, wait for Kafka's acknowledgement."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pydantic_core
from fastapi import APIRouter, Request, status
from fastapi.responses import JSONResponse, Response
from memstream.events import EVENT_TYPES, Event, InboundEvent, parse_inbound
from memstream.kafka.produce import DeliveryFailed
from memstream.ledger.size import oversized, refusal
from memstream.metrics import API_REFUSED, EVENTS_RECEIVED, EVENTS_REJECTED
from memstream.shred.sealer import KeyDestroyed
from memstream.wire import (
    BODY_MAX_DEPTH,
    Position,
    deepest,
    dotted,
    lone_surrogate,
    shorten,
    strings,
    too_deep,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from memstream_api.auth import Tenant
from memstream_api.context import context, serving
from memstream_api.errors import (
    AUTH,
    RETRY_AFTER_S,
    WRITE_REFUSALS,
    ErrorBody,
    retry_after,
    unavailable,
)
from memstream_api.outbox import Outbox, OutboxFull, TenantBacklog
from memstream_api.positions import POSITION_DESCRIPTION, WritePositions, Writing
from memstream_api.producing import BatchProducer
from memstream_api.slots import IngestSlots

COMPONENT = "api"
log = logging.getLogger(__name__)
DEFAULT_AGENT = "api"
PURGE = "memory.purge"  # refused here: DELETE /v1/subjects/{subject} plans and writes it
PATH = "/v1/events"
MAX_BATCH = 10_000
# Enough to fix a batch in one round trip without echoing 10k copies of one mistake.
MAX_REPORTED_ERRORS = 50

UNPROCESSABLE = status.HTTP_422_UNPROCESSABLE_CONTENT

router = APIRouter(tags=["ingest"])


class EventBatch(BaseModel):
    """A batch body: every event is validated before any is produced."""

    model_config = ConfigDict(extra="forbid")
    events: list[InboundEvent] = Field(min_length=1, max_length=MAX_BATCH)


class Accepted(BaseModel):
    accepted: int
    ids: list[str] = Field(description="event ids in request order (generated when not given)")
    position: Position = Field(description=POSITION_DESCRIPTION)


class FieldError(BaseModel):
    index: int = Field(description="position of the event in the batch (0 for a single event)")
    field: str
    message: str
    type: str


class ValidationErrorBody(BaseModel):
    detail: str
    errors: list[FieldError]


class PurgedIdsBody(BaseModel):
    detail: str
    purged_ids: list[str] = Field(
        description="the batch's ids that a purge shredded: never written again"
    )


class DeliveryErrorBody(BaseModel):
    detail: str
    ids: list[str] = Field(
        description="every id of the batch: resend with these to stay idempotent"
    )
    failed_ids: list[str]


REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"$ref": "#/components/schemas/EventIn"},
                        {"$ref": "#/components/schemas/EventBatch"},
                    ]
                }
            }
        },
    }
}


REJECT_REASONS = ("too_large", "malformed", "tenant", "invalid", "delivery", "backlog", "purged")


def init_metrics() -> None:
    """Create the ingest series at 0, so rates read 0 before the first event or refusal."""
    EVENTS_RECEIVED.labels(component=COMPONENT)
    for reason in REJECT_REASONS:
        EVENTS_REJECTED.labels(component=COMPONENT, reason=reason)


class _Rejected(Exception):
    def __init__(self, response: Response, reason: str, count: int) -> None:
        self.response, self.reason, self.count = response, reason, count


def _error(
    code: int, detail: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    return JSONResponse({"detail": detail, **extra}, status_code=code, headers=headers)


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


def count_too_large(path: str) -> None:
    """The body limit (``memstream_api.limits``) refused a request to ``path`` unread."""
    if path == PATH:
        EVENTS_REJECTED.labels(component=COMPONENT, reason="too_large").inc()


def _items(body: bytes, max_batch: int) -> tuple[list[Any], bool]:
    """The raw event objects and whether the body was a batch."""
    try:
        doc = pydantic_core.from_json(body)
    except ValueError as exc:
        raise _Rejected(_undecodable(body, exc), "malformed", 1) from exc
    deep = too_deep(doc, BODY_MAX_DEPTH)
    if deep is not None:
        raise _Rejected(_too_deep(deep, isinstance(doc, dict) and "events" in doc), "malformed", 1)
    if isinstance(doc, dict) and "events" in doc:
        extra = sorted(set(doc) - {"events"})
        if extra:
            reason = f"unexpected top-level field(s) next to 'events': {', '.join(extra)}"
            raise _Rejected(_error(UNPROCESSABLE, reason, errors=[]), "malformed", 1)
        items = doc["events"]
        if not isinstance(items, list):
            raise _Rejected(
                _error(UNPROCESSABLE, "'events' must be a list", errors=[]), "malformed", 1
            )
        if not items:
            reason = "'events' is empty; send at least one event"
            raise _Rejected(_error(UNPROCESSABLE, reason, errors=[]), "malformed", 1)
        if len(items) > max_batch:
            reason = f"batch of {len(items)} events exceeds the limit of {max_batch}; split it"
            raise _Rejected(
                _error(status.HTTP_413_CONTENT_TOO_LARGE, reason), "too_large", len(items)
            )
        return items, True
    if isinstance(doc, dict):
        return [doc], False
    reason = 'body must be one event object or {"events": [...]}'
    raise _Rejected(_error(UNPROCESSABLE, reason, errors=[]), "malformed", 1)


def _too_deep(loc: tuple[int | str, ...], batch: bool) -> JSONResponse:
    error = _located(loc, f"nests deeper than {BODY_MAX_DEPTH} levels", "json_too_deep", batch)
    where = (f"events[{error.index}]" if batch else "event") + (
        f".{error.field}" * bool(error.field)
    )
    reason = f"{where}: a request body nests at most {BODY_MAX_DEPTH} levels; nothing was accepted"
    return _error(UNPROCESSABLE, reason, errors=[error.model_dump()])


def _undecodable(body: bytes, exc: ValueError) -> JSONResponse:
    """The 422 for a body pydantic cannot parse. Nesting past its limit is named by its place;
    a lone surrogate (``"\\ud800"``) is valid JSON but not valid Unicode, so no store can hold
    it: the answer names the field that holds one."""
    deep = deepest(body, BODY_MAX_DEPTH)
    if deep is not None:
        return _too_deep(deep, deep[:1] == ("events",))
    try:
        doc = json.loads(body)  # the standard library reads lone surrogates
    except (ValueError, RecursionError):
        doc = None
    for loc, text, _is_key in strings(doc):
        problem = lone_surrogate(text)
        if problem is not None:
            batch = isinstance(doc, dict) and "events" in doc
            error = _located(loc, problem, "string_unicode", batch)
            where = f"events[{error.index}]" if batch else "event"
            reason = f"{where}.{error.field}: {problem}; nothing was accepted"
            return _error(UNPROCESSABLE, reason, errors=[error.model_dump()])
    return _error(UNPROCESSABLE, f"body is not valid JSON: {shorten(str(exc))}", errors=[])


def _foreign(items: list[Any], tenant: str) -> list[tuple[int, str]]:
    """Events naming another tenant: refused (403) before any other check of their content."""
    return [
        (i, item["tenant"])
        for i, item in enumerate(items)
        if isinstance(item, dict)
        and isinstance(item.get("tenant"), str)
        and item["tenant"] != tenant
    ]


def _validate(body: bytes, batch: bool) -> list[InboundEvent]:
    """Strict JSON validation against the published models (raises ValidationError)."""
    if batch:
        return EventBatch.model_validate_json(body, strict=True).events
    return [parse_inbound(body)]


def _complete(body: bytes, items: list[Any], batch: bool, tenant: str) -> list[Event]:
    """Validate everything first: a batch is produced whole or not at all."""

    def where(index: int) -> str:
        return f"events[{index}]" if batch else "event"

    foreign = _foreign(items, tenant)
    if foreign:
        i, other = foreign[0]
        reason = (
            f"{where(i)} names tenant {other!r} but the API key is bound to tenant {tenant!r}"
            + (f" ({len(foreign)} such events)" if len(foreign) > 1 else "")
        )
        raise _Rejected(_error(status.HTTP_403_FORBIDDEN, reason), "tenant", len(items))
    purges = [
        i
        for i, item in enumerate(items)
        if isinstance(item, dict) and item.get("type") == "memory.purge"
    ]
    if purges:
        reason = (
            f"{where(purges[0])} is a memory.purge: purges are planned and written by "
            "DELETE /v1/subjects/{subject}; nothing was accepted"
        )
        raise _Rejected(_error(UNPROCESSABLE, reason), "invalid", len(items))
    try:
        inbound = _validate(body, batch)
    except ValidationError as exc:
        errors = list(_field_errors(exc, batch))
        first = errors[0]
        path = f"{where(first.index)}.{first.field}" if first.field else where(first.index)
        more = f" (and {len(errors) - 1} more error(s))" if len(errors) > 1 else ""
        reason = f"{path}: {first.message}{more}; nothing was accepted"
        body_errors = [e.model_dump() for e in errors[:MAX_REPORTED_ERRORS]]
        raise _Rejected(
            _error(UNPROCESSABLE, reason, errors=body_errors), "invalid", len(items)
        ) from exc
    return [e.complete(tenant, agent=DEFAULT_AGENT) for e in inbound]


@router.post(
    "/v1/events",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=Accepted,
    summary="Ingest one event or a batch",
    openapi_extra=REQUEST_BODY,
    responses={
        **AUTH,
        403: {"model": ErrorBody, "description": "an event names another tenant"},
        **WRITE_REFUSALS,
        409: {
            "model": PurgedIdsBody,
            "description": "an event reuses the id of a purged event (its data key is "
            "destroyed, so it is never written again); nothing accepted",
        },
        422: {"model": ValidationErrorBody, "description": "invalid event; nothing accepted"},
        **unavailable(
            "not accepted (spool full, Kafka did not acknowledge, or the key store is "
            "unreadable); resend the same ids",
            DeliveryErrorBody | ErrorBody,
        ),
    },
)
async def post_events(request: Request, tenant: Tenant) -> Response | Accepted:
    """Body: one event, or ``{"events": [...]}``. The API key's tenant fills ``tenant``.

    Returns 202 once the events are durable: spooled (fsync) in the outbox, from where they
    reach the ledger whatever single process dies; without an outbox, once Kafka has
    acknowledged every event (acks=all).
    """
    slots: IngestSlots = context(request).ingest_slots
    if not slots.take(tenant):
        API_REFUSED.labels(COMPONENT, "tenant_ingest_open").inc()
        detail = (
            f"tenant {tenant} already has {slots.per_tenant} ingest requests open, the most "
            f"allowed at once; retry after {RETRY_AFTER_S} s"
        )
        return _error(status.HTTP_429_TOO_MANY_REQUESTS, detail, headers=retry_after())
    try:
        return await _ingest(request, tenant)
    finally:
        slots.give(tenant)


async def _ingest(request: Request, tenant: str) -> Response | Accepted:
    try:
        # Within the route's limit: memstream_api.limits refused a larger body unread.
        body = await request.body()
        items, batch = _items(body, context(request).max_batch)
        events = _complete(body, items, batch, tenant)
    except _Rejected as rejected:
        EVENTS_REJECTED.labels(component=COMPONENT, reason=rejected.reason).inc(rejected.count)
        return rejected.response
    written = await deliver(request, events, batch)
    if isinstance(written, Response):
        return written
    return Accepted(accepted=len(events), ids=[e.id for e in events], position=written)


async def deliver(request: Request, events: list[Event], batch: bool = False) -> Response | str:
    """Make validated events (of one tenant) durable, the one way every route does: their
    position once they are (spooled in the outbox, or acknowledged by Kafka without one),
    else the 409 (an id of a purged event), 413 (an event can never fit the broker's record
    limit), 429 (the tenant's outbox share is full) or 503 to answer. Nothing of a refused
    batch is produced."""
    up = serving(request)
    producer: BatchProducer = up.producer
    try:
        values = await run_in_threadpool(producer.encode, events)
    except KeyDestroyed as exc:
        EVENTS_REJECTED.labels(component=COMPONENT, reason="purged").inc(len(events))
        purged = [i for _, i in exc.refs][:MAX_REPORTED_ERRORS]
        return _error(status.HTTP_409_CONFLICT, str(exc), purged_ids=purged)
    limit = producer.limit.bytes
    found = oversized(events, values, limit, sealed=producer.seals)
    if found:
        EVENTS_REJECTED.labels(component=COMPONENT, reason="too_large").inc(len(events))
        too_large = [{"index": o.index, "id": o.event_id, "bytes": o.bound} for o in found]
        return _error(
            status.HTTP_413_CONTENT_TOO_LARGE,
            refusal(found, limit, batch),
            limit=limit,
            too_large=too_large[:MAX_REPORTED_ERRORS],
        )
    EVENTS_RECEIVED.labels(component=COMPONENT).inc(len(events))
    ids = [e.id for e in events]
    positions: WritePositions = up.positions
    writing = await positions.start(events[0].tenant)
    outbox: Outbox | None = up.outbox
    if outbox is not None:
        wait_s = context(request).settings.outbox_ack_wait_s
        spooled = await _spool(outbox, events, values, wait_s, writing)
        if isinstance(spooled, Response):
            return spooled
        return writing.token(len(events), spooled)
    try:
        await producer.produce(events, on_report=writing.report, values=values)
    except DeliveryFailed as exc:
        EVENTS_REJECTED.labels(component=COMPONENT, reason="delivery").inc(len(exc.failed_ids))
        response = _error(
            status.HTTP_503_SERVICE_UNAVAILABLE, exc.reason, ids=ids, failed_ids=exc.failed_ids
        )
        response.headers.update(retry_after())
        return response
    return writing.token(len(events), None)


async def _spool(
    outbox: Outbox, events: list[Event], values: list[bytes], ack_wait_s: float, writing: Writing
) -> Response | int:
    """Durable in the spool = accepted (the segment id is answered); Kafka's acknowledgement
    is awaited only briefly (a broker that is down or restarting gets the events from the
    outbox later)."""
    ids = [e.id for e in events]
    try:
        spooled = await outbox.accept(events, values, ack_wait_s, on_report=writing.report)
    except (OutboxFull, TenantBacklog) as exc:
        mine = isinstance(exc, TenantBacklog)
        EVENTS_REJECTED.labels(COMPONENT, "backlog" if mine else "delivery").inc(len(events))
        code = status.HTTP_429_TOO_MANY_REQUESTS if mine else status.HTTP_503_SERVICE_UNAVAILABLE
        response = _error(code, str(exc), ids=ids, failed_ids=ids)
        response.headers.update(retry_after())
        return response
    if spooled.pending is not None:
        log.info("accepted %d events into the outbox; Kafka pending: %s", len(ids), spooled.pending)
    return spooled.seg_id
