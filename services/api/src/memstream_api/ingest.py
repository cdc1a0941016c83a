"""``POST /v1/events``: one event or a batch, through the write path (:mod:`memstream.intake`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, status
from fastapi.responses import JSONResponse, Response
from memstream.intake import Accepted as Written
from memstream.intake.positions import POSITION_DESCRIPTION
from memstream.metrics import API_REFUSED, EVENTS_REJECTED
from memstream.wire import Position
from pydantic import BaseModel, Field

from memstream_api.auth import Writer
from memstream_api.context import context
from memstream_api.errors import (
    AUTH,
    RETRY_AFTER_S,
    WRITE_REFUSALS,
    ErrorBody,
    retry_after,
    unavailable,
)
from memstream_api.slots import IngestSlots
from memstream_api.writes import (
    DeliveryErrorBody,
    PurgedIdsBody,
    ValidationErrorBody,
    answer,
    intake,
)

COMPONENT = "api"
PATH = "/v1/events"
TRACES_PATH = "/v1/traces"

router = APIRouter(tags=["ingest"])


class Accepted(BaseModel):
    accepted: int
    ids: list[str] = Field(description="event ids in request order (generated when not given)")
    position: Position = Field(description=POSITION_DESCRIPTION)


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


def take_slot(request: Request, tenant: str) -> JSONResponse | None:
    """One of the tenant's ingest slots (given back by the caller), or the 429 when all
    are open: a tenant's writes (events, traces) wait on each other, not on other tenants."""
    slots: IngestSlots = context(request).ingest_slots
    if slots.take(tenant):
        return None
    API_REFUSED.labels(COMPONENT, "tenant_ingest_open").inc()
    detail = (
        f"tenant {tenant} already has {slots.per_tenant} ingest requests open, the most "
        f"allowed at once; retry after {RETRY_AFTER_S} s"
    )
    return JSONResponse({"detail": detail}, status_code=429, headers=retry_after())


def count_too_large(path: str) -> None:
    """The body limit (``memstream_api.limits``) refused a request to ``path`` unread."""
    if path in (PATH, TRACES_PATH):
        EVENTS_REJECTED.labels(component=COMPONENT, reason="too_large").inc()


@router.post(
    "/v1/events",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=Accepted,
    summary="Ingest one event or a batch",
    openapi_extra=REQUEST_BODY,
    responses={
        **AUTH,
        403: {
            "model": ErrorBody,
            "description": "an event names another tenant or lies outside the key's scope, or "
            "the key may not write",
        },
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
async def post_events(request: Request, caller: Writer) -> Response | Accepted:
    """Body: one event, or ``{"events": [...]}``. The API key's tenant fills ``tenant``; a
    key with a scope fills the fields it fixes to one value, and refuses (403) an event
    outside it.

    Returns 202 once the events are durable: spooled (fsync) in the outbox, from where they
    reach the ledger whatever single process dies; without an outbox, once Kafka has
    acknowledged every event (acks=all).
    """
    tenant = caller.tenant
    if (busy := take_slot(request, tenant)) is not None:
        return busy
    try:
        # Within the route's limit: memstream_api.limits refused a larger body unread.
        body = await request.body()
        written = answer(await intake(request).accept(body, tenant, caller.scope))
    finally:
        context(request).ingest_slots.give(tenant)
    if isinstance(written, Written):
        return Accepted(accepted=len(written.ids), ids=written.ids, position=written.position)
    return written
