"""``/v1/checkout``, ``/v1/recall``, ``/v1/lineage/{id}`` and ``/v1/streams/{stream}/events``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from memstream.checkout.lineage import Lineage, UnknownItem
from memstream.checkout.packet import render_gathered, render_json, render_markdown
from memstream.checkout.retrieve.features import FEATURES
from memstream.checkout.service import CheckoutService
from memstream.events.envelope import StreamName
from memstream.projection.live import NoProjection
from memstream.records.packet import CheckoutPacket, PacketWarning
from memstream.wire import ItemId, Position
from starlette.concurrency import run_in_threadpool

from memstream_api.auth import QueryScope, Reader, read_scope
from memstream_api.bodies import CheckoutRequest, RecallRequest
from memstream_api.context import serving
from memstream_api.errors import (
    AUTH,
    BODY,
    INVALID,
    READ_FORBIDDEN,
    THROTTLED,
    ErrorBody,
    retry_after,
    unavailable,
)
from memstream_api.fair_share import ReadRoute, metered
from memstream_api.read_after import Waited, wait_after

router = APIRouter(tags=["checkout"], route_class=ReadRoute)


def checkout_service(request: Request) -> CheckoutService:
    return serving(request).checkout


def unavailable_error(exc: NoProjection) -> HTTPException:
    """The 503 a read answers while memory is briefly unavailable."""
    return HTTPException(
        status.HTTP_503_SERVICE_UNAVAILABLE, detail=str(exc), headers=retry_after()
    )


def stale(waited: Waited | None) -> list[PacketWarning]:
    """The stale warning of a read given ``after=`` that answered before it was applied."""
    message = waited.warning() if waited is not None else None
    return [] if message is None else [PacketWarning(kind="stale", message=message, ids=[])]


def with_after(packet: CheckoutPacket, waited: Waited | None) -> CheckoutPacket:
    """``packet`` with what its ``after=`` wait found: ``meta.after`` and a stale warning."""
    if waited is None:
        return packet
    meta = {**packet.meta, "after": waited.meta()}
    return packet.model_copy(update={"warnings": [*packet.warnings, *stale(waited)], "meta": meta})


# A read given another tenant's position (after=) is refused before it waits; a key without
# `read`, or a scope beyond the key's, before anything is read.
FOREIGN_POSITION: dict[int | str, dict[str, Any]] = {
    403: {
        "model": ErrorBody,
        "description": "after= is a position of another tenant, the key may not read, or the "
        "request asks outside the key's scope (the detail names the field)",
    }
}

# Reads answer 503 while no projection is live yet, the graph server is down or the vector
# index reopens.
READ_RESPONSES = {
    **AUTH,
    **unavailable(
        "memory is briefly unavailable (no live projection yet, the graph server is "
        "restarting, or the vector index is reopening)"
    ),
}


@router.post(
    "/v1/checkout",
    summary="A checkout packet: answer first, proof after, within max_tokens",
    response_class=JSONResponse,
    responses={
        200: {
            "model": CheckoutPacket,
            "description": "the packet: JSON, or Markdown for `markdown` and `gathered`",
            "content": {"text/markdown": {"schema": {"type": "string"}}},
        },
        **BODY,
        **FOREIGN_POSITION,
        **READ_RESPONSES,
        **THROTTLED,
    },
)
async def checkout(body: CheckoutRequest, request: Request, caller: Reader) -> Response:
    tenant = caller.tenant
    query = body.to_query(read_scope(caller, body.stream, body.scope))
    service = checkout_service(request)
    waited: Waited | None = None

    def packet_response() -> Response:
        # Rendering a large packet takes milliseconds: in the worker thread, charged to the
        # tenant, not on the event loop every other request waits for.
        packet = with_after(service.checkout(tenant, query), waited)
        if body.format == "markdown":
            return PlainTextResponse(render_markdown(packet), media_type="text/markdown")
        if body.format == "gathered":
            return PlainTextResponse(render_gathered(packet), media_type="text/markdown")
        return Response(render_json(packet), media_type="application/json")

    try:
        waited = await wait_after(request, tenant, body.after, "checkout")
        return await metered(request, packet_response)
    except NoProjection as exc:
        raise unavailable_error(exc) from exc


@router.post(
    "/v1/recall",
    summary="The raw fused top-k items (no synthesis)",
    responses={**BODY, **FOREIGN_POSITION, **READ_RESPONSES, **THROTTLED},
)
async def recall(body: RecallRequest, request: Request, caller: Reader) -> dict[str, Any]:
    tenant = caller.tenant
    query = body.to_query(read_scope(caller, body.stream, body.scope))
    explained: list[tuple[str, list[float]]] = []
    try:
        waited = await wait_after(request, tenant, body.after, "recall")
        if body.explain and body.mode == "fused":
            ranked = checkout_service(request).ranked
            items, explained = await metered(request, ranked, tenant, query)
        else:
            items = await metered(request, checkout_service(request).recall, tenant, query)
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    doc: dict[str, Any] = {
        "items": [c.model_dump(mode="json") for c in items],
        "warnings": [w.model_dump(mode="json") for w in stale(waited)],
    }
    if body.explain:
        doc["ranked"] = [
            {"item_id": i, "features": dict(zip(FEATURES, row, strict=True))}
            for i, row in explained
        ]
    return doc


@router.get(
    "/v1/lineage/{item_id}",
    summary="Sources one hop up and the ledger events beneath",
    response_model=None,
    responses={
        200: {"model": Lineage},
        404: {
            "model": ErrorBody,
            "description": "no such item in this tenant (or in this key's scope)",
        },
        **INVALID,
        **READ_FORBIDDEN,
        **READ_RESPONSES,
    },
)
async def lineage(
    item_id: Annotated[ItemId, PathParam(description="an event, fact, artifact or packet id")],
    request: Request,
    caller: Reader,
    asked: QueryScope,
) -> Lineage | JSONResponse:
    """Inside the scope (the query's ``user``, ``agent``, ``stream``, within the key's) an
    item is known when one of its leaves is, and shows only those (404 otherwise: an item
    outside the scope is not there)."""
    scope = read_scope(caller, None, asked)
    service = checkout_service(request)
    try:
        return await run_in_threadpool(service.lineage, caller.tenant, item_id, scope)
    except UnknownItem:
        return JSONResponse(
            {"detail": f"no item {item_id!r} in this tenant's memory"}, status_code=404
        )
    except NoProjection as exc:
        raise unavailable_error(exc) from exc


MAX_STREAM_EVENTS = 1000
MAX_SEQ = 2**62  # beyond any ledger position; the graph's integers are 64-bit


@router.get(
    "/v1/streams/{stream}/events",
    summary="One stream's events, newest written first, a page at a time",
    responses={**INVALID, **FOREIGN_POSITION, **READ_RESPONSES, **THROTTLED},
)
async def stream_events(
    stream: Annotated[StreamName, PathParam(description="the stream (session, thread)")],
    request: Request,
    caller: Reader,
    asked: QueryScope,
    limit: Annotated[int, Query(ge=1, le=MAX_STREAM_EVENTS, description="how many")] = 100,
    before: Annotated[
        int | None, Query(ge=1, le=MAX_SEQ, description="the last page's next_before")
    ] = None,
    after: Annotated[Position | None, Query(description="a write's position: wait for it")] = None,
) -> dict[str, Any]:
    """Up to ``limit`` of the stream's events in write order, newest first: id, seq, type,
    agent, user, time, text and metadata; inside the scope (the query's, within the key's)
    only. ``next_before`` (null on the last page) asks for the page below."""
    scope = read_scope(caller, stream, asked)
    try:
        waited = await wait_after(request, caller.tenant, after, "stream_events")
        service = checkout_service(request)
        page = await metered(
            request, service.stream_events, caller.tenant, stream, limit, scope, before
        )
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    shown = {"event_id", "seq", "type", "agent", "user", "occurred_at", "text", "metadata"}
    return {
        "events": [e.model_dump(mode="json", include=shown) for e in page.events],
        "next_before": page.next_before,
        "warnings": [w.model_dump(mode="json") for w in stale(waited)],
    }
