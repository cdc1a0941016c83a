"""``POST /v1/feedback``: explicit feedback from agents or people, into the ledger."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Request, status
from fastapi.responses import Response
from memstream.events.envelope import MemoryFeedback, StreamName
from memstream.events.payloads import MemoryFeedbackPayload
from memstream.intake import Accepted
from memstream.intake.positions import POSITION_DESCRIPTION
from memstream.learning.metrics import FEEDBACK_EVENTS
from memstream.projection.live import NoProjection
from memstream.wire import STORABLE, STRICT_INPUT, ItemId, Position
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from memstream_api.auth import Writer
from memstream_api.checkout_routes import unavailable_error
from memstream_api.context import serving
from memstream_api.errors import AUTH, BODY, WRITE_REFUSALS, ErrorBody, unavailable
from memstream_api.ingest import COMPONENT
from memstream_api.targets import not_found, unknown_targets
from memstream_api.writes import DeliveryErrorBody, answer, intake, stamp

router = APIRouter(tags=["learning"])
FEEDBACK_STREAM = "feedback"
EXAMPLE_TARGET = "evt-2041"  # the OpenAPI document's example id


class FeedbackIn(BaseModel):
    """A signal about memories: -1 harmful .. +1 helpful. It re-orders what a question
    retrieves on its own, within a bound; it never deletes or rewrites a memory."""

    model_config = STRICT_INPUT
    target_ids: list[ItemId] = Field(
        min_length=1,
        max_length=200,
        description="event or fact ids of the tenant's memory (e.g. from a packet)",
        examples=[[EXAMPLE_TARGET]],
    )
    signal: float = Field(ge=-1.0, le=1.0, description="-1 harmful .. +1 helpful")
    packet_id: ItemId | None = Field(
        default=None, description="the packet the memories came from (its question counts)"
    )
    reason: Annotated[str, Field(max_length=2000), STORABLE] | None = None
    stream: StreamName | None = Field(
        default=None,
        description="the ledger stream it goes to (default: the one the key's scope fixes, "
        "else feedback)",
    )


class FeedbackAccepted(BaseModel):
    id: str = Field(description="the memory.feedback event's id")
    position: Position = Field(description=POSITION_DESCRIPTION)


def init_metrics() -> None:
    FEEDBACK_EVENTS.labels(COMPONENT, "explicit")


@router.post(
    "/v1/feedback",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=FeedbackAccepted,
    summary="Explicit feedback on memories (a memory.feedback event)",
    responses={
        **BODY,
        **AUTH,
        **WRITE_REFUSALS,
        404: {
            "model": ErrorBody,
            "description": "a target names no event or fact of the tenant (a typo, a latent "
            "artifact's or a packet's id, or not projected yet): the detail lists them, and "
            "nothing is written",
        },
        **unavailable(
            "not accepted (spool full, Kafka did not acknowledge, or the key store is "
            "unreadable); send it again",
            DeliveryErrorBody | ErrorBody,
        ),
    },
)
async def post_feedback(
    body: FeedbackIn, request: Request, caller: Writer
) -> Response | FeedbackAccepted:
    """Durable like ``POST /v1/events`` before 202. When this API still remembers the packet,
    the event carries its question family. Every target must name a memory of the tenant
    (404 lists those that do not): feedback on nothing would be silently lost."""
    up, tenant = serving(request), caller.tenant
    try:
        graph = await run_in_threadpool(up.stores.graph)
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    unknown = await run_in_threadpool(unknown_targets, graph, tenant, body.target_ids, caller.scope)
    if unknown:
        raise not_found(unknown)
    family = up.checkout.packet_family(tenant, body.packet_id) if body.packet_id else None
    who = stamp(caller, body.stream, FEEDBACK_STREAM)
    event = MemoryFeedback(
        id=str(uuid.uuid4()),
        tenant=tenant,
        stream=who.stream,
        agent=who.agent,
        user=who.user,
        occurred_at=datetime.now(UTC),
        type="memory.feedback",
        payload=MemoryFeedbackPayload(
            target_ids=body.target_ids,
            signal=body.signal,
            packet_id=body.packet_id,
            reason=body.reason,
            source="explicit",
            family=family,
        ),
    )
    written = answer(await intake(request).write([event], scope=caller.scope))
    if not isinstance(written, Accepted):
        return written
    FEEDBACK_EVENTS.labels(COMPONENT, "explicit").inc()
    return FeedbackAccepted(id=event.id, position=written.position)
