"""Invalidation: say a memory is wrong, and decide the retrospective's proposals.

``POST /v1/invalidate`` appends an accepted ``memory.invalidate``: the facts it names (by fact
id, or every fact of a named event) get ``valid_to`` and the reason, never deleted, and
checkout leaves the named memories out with reason ``invalidated``. A proposal (from the
retrospective pass) changes nothing until ``POST /v1/invalidations/{id}/accept`` turns it
into an accepted invalidation of the same targets; ``.../reject`` records the decision only.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi import Path as PathParam
from fastapi.responses import Response
from memstream.events.envelope import MemoryInvalidate, StreamName
from memstream.events.payloads import MemoryInvalidatePayload, Reason
from memstream.graph.port import InvalidationEntry
from memstream.intake import Accepted
from memstream.intake.positions import POSITION_DESCRIPTION
from memstream.keys import Principal
from memstream.learning.metrics import INVALIDATIONS
from memstream.projection.live import NoProjection
from memstream.wire import STRICT_INPUT, ItemId, Position
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from memstream_api.auth import Reader, Writer
from memstream_api.checkout_routes import (
    FOREIGN_POSITION,
    READ_RESPONSES,
    unavailable_error,
)
from memstream_api.context import serving
from memstream_api.errors import BODY, INVALID, WRITE_REFUSALS, ErrorBody, unavailable
from memstream_api.ingest import COMPONENT
from memstream_api.read_after import wait_after
from memstream_api.targets import not_found, unknown_targets
from memstream_api.writes import DeliveryErrorBody, answer, intake, stamp

router = APIRouter(tags=["learning"])

Status = Literal["proposed", "accepted", "rejected"]
DELIVERY = unavailable(
    "not accepted (spool full, Kafka did not acknowledge, or the key store is unreadable); "
    "send it again",
    DeliveryErrorBody | ErrorBody,
)


INVALIDATIONS_STREAM = "invalidations"
STREAM = "the ledger stream (default: the one the key's scope fixes, else invalidations)"


class InvalidateIn(BaseModel):
    """Memories that are wrong: fact ids, or event ids (the event and every fact from it)."""

    model_config = STRICT_INPUT
    target_ids: list[ItemId] = Field(min_length=1, max_length=200)
    reason: Reason = Field(description="why they are wrong")
    stream: StreamName | None = Field(default=None, description=STREAM)
    after: Position | None = Field(
        default=None,
        description="a write's position (say, of the event being invalidated): check the "
        "targets once the projections have applied it (bounded by "
        "MEMSTREAM_READ_AFTER_MAX_WAIT_S; past it, a target still missing is a 404 that says "
        "what was not applied)",
    )


class DecisionIn(BaseModel):
    model_config = STRICT_INPUT
    reason: Reason | None = None
    stream: StreamName | None = Field(default=None, description=STREAM)


class InvalidationAccepted(BaseModel):
    id: str = Field(description="the memory.invalidate event's id")
    position: Position = Field(description=POSITION_DESCRIPTION)


class InvalidationOut(BaseModel):
    """A memory.invalidate entry as projected; a proposal with no decision is still open."""

    id: str
    status: Status
    target_ids: list[str]
    reason: str
    proposal_id: str | None = Field(description="for a decision: the proposal it decides")
    at: str
    decisions: list[str] = Field(description='"<event id> <status>" of its decisions')


class InvalidationList(BaseModel):
    invalidations: list[InvalidationOut]


def init_metrics() -> None:
    for outcome in ("accepted", "rejected"):
        INVALIDATIONS.labels(COMPONENT, outcome)


async def _append(
    request: Request, caller: Principal, stream: str | None, payload: MemoryInvalidatePayload
) -> Response | InvalidationAccepted:
    who = stamp(caller, stream, INVALIDATIONS_STREAM)
    event = MemoryInvalidate(
        id=str(uuid.uuid4()),
        tenant=caller.tenant,
        stream=who.stream,
        agent=who.agent,
        user=who.user,
        occurred_at=datetime.now(UTC),
        caused_by=[payload.proposal_id] if payload.proposal_id else [],
        type="memory.invalidate",
        payload=payload,
    )
    written = answer(await intake(request).write([event], scope=caller.scope))
    if not isinstance(written, Accepted):
        return written
    INVALIDATIONS.labels(COMPONENT, payload.review_status).inc()
    return InvalidationAccepted(id=event.id, position=written.position)


@router.post(
    "/v1/invalidate",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=InvalidationAccepted,
    summary="Invalidate memories (an accepted memory.invalidate event)",
    responses={
        **BODY,
        **FOREIGN_POSITION,
        **READ_RESPONSES,
        **DELIVERY,
        **WRITE_REFUSALS,
        404: {"model": ErrorBody, "description": "a target is not in memory (yet)"},
    },
)
async def post_invalidate(
    body: InvalidateIn, request: Request, caller: Writer
) -> Response | InvalidationAccepted:
    """Durable like ``POST /v1/events`` before 202; the projection applies it shortly after.
    Every target must be in memory: a mistyped id would otherwise invalidate nothing. Given
    ``after``, the targets are checked once memory applied that write."""
    tenant = caller.tenant
    try:
        waited = await wait_after(request, tenant, body.after, "invalidate")
        graph = await run_in_threadpool(serving(request).stores.graph)
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    unknown = await run_in_threadpool(unknown_targets, graph, tenant, body.target_ids, caller.scope)
    if unknown:
        raise not_found(unknown, waited)
    payload = MemoryInvalidatePayload(target_ids=body.target_ids, reason=body.reason)
    return await _append(request, caller, body.stream, payload)


@router.get(
    "/v1/invalidations",
    response_model=InvalidationList,
    summary="Invalidations and proposals, newest first",
    responses={**INVALID, **READ_RESPONSES},
)
async def list_invalidations(
    request: Request,
    caller: Reader,
    status_: Annotated[Status | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> InvalidationList:
    """``?status=proposed``: the retrospective's proposals, each with its decisions."""
    try:
        graph = await run_in_threadpool(serving(request).stores.graph)
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    found = await run_in_threadpool(graph.invalidation_entries, caller.tenant, status_, limit)
    return InvalidationList(invalidations=[_out(e) for e in found])


def _out(e: InvalidationEntry) -> InvalidationOut:
    return InvalidationOut(
        id=e.event_id,
        status=e.status,
        target_ids=e.target_ids,
        reason=e.reason,
        proposal_id=e.proposal_id,
        at=e.at,
        decisions=e.decisions,
    )


ProposalId = Annotated[ItemId, PathParam(description="the proposal's memory.invalidate event id")]
DECIDE_RESPONSES = {
    **BODY,
    **READ_RESPONSES,
    **DELIVERY,
    404: {"model": ErrorBody, "description": "no proposal has this id (yet)"},
    409: {"model": ErrorBody, "description": "the proposal is already decided"},
}


async def _decide(
    request: Request, caller: Principal, proposal_id: str, body: DecisionIn | None, verdict: Status
) -> Response | InvalidationAccepted:
    body, tenant = body or DecisionIn(), caller.tenant
    try:
        graph = await run_in_threadpool(serving(request).stores.graph)
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    found = await run_in_threadpool(graph.invalidation_entries, tenant, "proposed", 1, proposal_id)
    proposal = found[0] if found else None
    if proposal is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no proposal {proposal_id!r}")
    if proposal.decisions:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            detail=f"proposal {proposal_id!r} is already decided: {', '.join(proposal.decisions)}",
        )
    payload = MemoryInvalidatePayload(
        target_ids=proposal.target_ids,
        reason=body.reason or proposal.reason,
        review_status=verdict,
        proposal_id=proposal_id,
    )
    return await _append(request, caller, body.stream, payload)


@router.post(
    "/v1/invalidations/{proposal_id}/accept",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=InvalidationAccepted,
    summary="Accept a proposal: its targets are invalidated",
    responses=DECIDE_RESPONSES,
)
async def accept_proposal(
    proposal_id: ProposalId, request: Request, caller: Writer, body: DecisionIn | None = None
) -> Response | InvalidationAccepted:
    """An accepted memory.invalidate of the proposal's targets, naming the proposal."""
    return await _decide(request, caller, proposal_id, body, "accepted")


@router.post(
    "/v1/invalidations/{proposal_id}/reject",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=InvalidationAccepted,
    summary="Reject a proposal: nothing changes but the record of the decision",
    responses=DECIDE_RESPONSES,
)
async def reject_proposal(
    proposal_id: ProposalId, request: Request, caller: Writer, body: DecisionIn | None = None
) -> Response | InvalidationAccepted:
    """A rejected memory.invalidate naming the proposal; its targets stay as they are."""
    return await _decide(request, caller, proposal_id, body, "rejected")
