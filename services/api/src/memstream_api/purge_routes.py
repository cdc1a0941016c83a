"""``DELETE /v1/subjects/{subject}`` and ``DELETE /v1/scopes``: purge a data subject, or every
event of a scope, from every store, with a report (a dry run lists what would go).

The workflow is :class:`memstream.forget.service.ForgetService`'s; these routes make the
tombstone durable as any event is, and map what goes wrong to HTTP. Both need a key with
`forget`; a key with a scope of its own reaches only the events inside it.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from confluent_kafka import KafkaException
from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi import Path as PathParam
from fastapi.responses import Response
from memstream.events.envelope import Event
from memstream.forget.purge import PurgeReport
from memstream.forget.service import ForgetService, NoSubject, PurgePlan
from memstream.intake import Accepted
from memstream.keys import Principal
from memstream.projection.live import NoProjection
from memstream.scope import Scope
from memstream.wire import STORABLE
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from memstream_api.auth import Forgetter, QueryScope, invalid
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


PURGE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **INVALID,
    **READ_RESPONSES,
    403: {
        "model": ErrorBody,
        "description": "the key may not forget, or the scope asked lies outside the key's",
    },
    **WRITE_REFUSALS,
    **unavailable(
        "memory is briefly unavailable, or the tombstone was not accepted (spool full, "
        "Kafka did not acknowledge); send it again",
        DeliveryErrorBody | ErrorBody,
    ),
}


@router.delete(
    "/v1/subjects/{subject}",
    summary="Purge a data subject: every event linked to it and all derived from them",
    response_model=PurgeReport,
    responses={
        **PURGE_RESPONSES,
        404: {"model": ErrorBody, "description": "the subject names no entity (no letter)"},
    },
)
async def purge_subject(
    subject: Subject,
    request: Request,
    caller: Forgetter,
    dry_run: DryRun = False,
    wait_s: WaitS = 30.0,
) -> PurgeReport | Response:
    forget = serving(request).forget
    try:
        plan = await run_in_threadpool(forget.plan, caller.tenant, subject, caller.scope)
    except NoSubject as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(exc)) from exc
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    return await _purge(request, forget, plan, dry_run, wait_s)


@router.delete(
    "/v1/scopes",
    summary="Purge a scope: every event of these users, agents and streams, and all derived "
    "from them",
    response_model=PurgeReport,
    responses=PURGE_RESPONSES,
)
async def purge_scope(
    request: Request,
    caller: Forgetter,
    asked: QueryScope,
    dry_run: DryRun = False,
    wait_s: WaitS = 30.0,
) -> PurgeReport | Response:
    """The scope is the query's ``user``, ``agent`` and ``stream`` (each repeatable: AND across
    fields, OR within one), within the key's; at least one must be given (a whole tenant is
    not purged by accident)."""
    if asked.empty:
        raise invalid(("query", "user"), "name the scope to purge: user=, agent= or stream=")
    scope = _forget_scope(caller, asked)
    forget = serving(request).forget
    try:
        plan = await run_in_threadpool(forget.plan_scope, caller.tenant, scope)
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    return await _purge(request, forget, plan, dry_run, wait_s)


def _forget_scope(caller: Principal, asked: Scope) -> Scope:
    """The scope a purge reaches: ``asked`` within the key's (403 naming a field beyond)."""
    field = asked.outside(caller.scope)
    if field is not None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            detail=f"{field}: outside this key's scope ({caller.scope.label()})",
        )
    return asked.within(caller.scope)


async def _purge(
    request: Request, forget: ForgetService, plan: PurgePlan, dry_run: bool, wait_s: float
) -> PurgeReport | Response:
    """A dry run's report, or: the tombstones made durable, then the purge carried out."""
    if dry_run:
        return await run_in_threadpool(forget.preview, plan)
    events: list[Event] = list(await run_in_threadpool(forget.tombstones, plan))
    written = answer(await intake(request).write(events))
    if not isinstance(written, Accepted):
        return written
    ids = [e.id for e in events]
    try:
        return await run_in_threadpool(forget.carry_out, plan, ids, wait_s)
    except (KafkaException, TimeoutError) as exc:
        raise _topics_unread(ids[0], exc) from exc


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
