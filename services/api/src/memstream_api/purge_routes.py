"""``DELETE /v1/subjects/{subject}``: purge a data subject from every store, with a report.

The workflow is :class:`memstream.forget.service.ForgetService`'s; this route makes the
tombstone durable as any event is, and maps what goes wrong to HTTP.
"""

from __future__ import annotations

import logging
from typing import Annotated

from confluent_kafka import KafkaException
from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi import Path as PathParam
from fastapi.responses import Response
from memstream.forget.purge import PurgeReport
from memstream.forget.service import ForgetService, NoSubject, PurgePlan
from memstream.intake import Accepted
from memstream.projection.live import NoProjection
from memstream.wire import STORABLE
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from memstream_api.auth import Tenant
from memstream_api.checkout_routes import READ_RESPONSES, unavailable_error
from memstream_api.context import serving
from memstream_api.errors import INVALID, WRITE_REFUSALS, ErrorBody, retry_after, unavailable
from memstream_api.writes import DeliveryErrorBody, answer, intake

log = logging.getLogger(__name__)
router = APIRouter(tags=["forget"])
Subject = Annotated[
    str,
    Field(min_length=1, max_length=500),
    STORABLE,
    PathParam(description="a name as written in memory"),
]
DryRun = Annotated[bool, Query(description="report what would go; change nothing")]
WaitS = Annotated[float, Query(ge=0, le=120, description="how long to watch the stores obey")]


@router.delete(
    "/v1/subjects/{subject}",
    summary="Purge a data subject: every event linked to it and all derived from them",
    response_model=PurgeReport,
    responses={
        **INVALID,
        **READ_RESPONSES,
        404: {"model": ErrorBody, "description": "the subject names no entity (no letter)"},
        **WRITE_REFUSALS,
        **unavailable(
            "memory is briefly unavailable, or the tombstone was not accepted (spool full, "
            "Kafka did not acknowledge); send it again",
            DeliveryErrorBody | ErrorBody,
        ),
    },
)
async def purge_subject(
    subject: Subject,
    request: Request,
    tenant: Tenant,
    dry_run: DryRun = False,
    wait_s: WaitS = 30.0,
) -> PurgeReport | Response:
    forget = serving(request).forget
    plan = await _plan(forget, tenant, subject)
    if dry_run:
        return await run_in_threadpool(forget.preview, plan)
    event = await run_in_threadpool(forget.tombstone, plan)
    written = answer(await intake(request).write([event]))
    if not isinstance(written, Accepted):
        return written
    try:
        return await run_in_threadpool(forget.carry_out, plan, event.id, wait_s)
    except (KafkaException, TimeoutError) as exc:
        raise _topics_unread(event.id, exc) from exc


async def _plan(forget: ForgetService, tenant: str, subject: str) -> PurgePlan:
    try:
        return await run_in_threadpool(forget.plan, tenant, subject)
    except NoSubject as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(exc)) from exc
    except NoProjection as exc:
        raise unavailable_error(exc) from exc


def _topics_unread(tombstone_id: str, exc: Exception) -> HTTPException:
    """The 503 of a purge whose topics could not be read: the tombstone is in and the
    events' keys are gone, but not every trace was looked at. Sending the purge again
    finishes it (destroying a key twice is harmless)."""
    log.warning("purge %s: the topics were not read: %s", tombstone_id, exc)
    return HTTPException(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        detail="the purge is recorded, but the checkout traces could not be read from "
        "Kafka; send it again",
        headers=retry_after(),
    )
