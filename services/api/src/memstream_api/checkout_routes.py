"""``/v1/checkout``, ``/v1/recall`` and ``/v1/lineage/{id}``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request, status
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from memstream.checkout.model import Candidate, CheckoutPacket
from memstream.checkout.packet import render_gathered, render_json, render_markdown
from memstream.checkout.service import (
    CheckoutRequest,
    CheckoutService,
    Lineage,
    NoProjection,
    RecallRequest,
    UnknownItem,
)
from memstream.wire import ItemId
from starlette.concurrency import run_in_threadpool

from memstream_api.auth import Tenant
from memstream_api.errors import (
    AUTH,
    BODY,
    INVALID,
    THROTTLED,
    ErrorBody,
    retry_after,
    unavailable,
)
from memstream_api.fair_share import ReadRoute, metered

router = APIRouter(tags=["checkout"], route_class=ReadRoute)


def checkout_service(request: Request) -> CheckoutService:
    service: CheckoutService = request.app.state.checkout
    return service


def unavailable_error(exc: NoProjection) -> HTTPException:
    """The 503 a read answers while memory is briefly unavailable."""
    return HTTPException(
        status.HTTP_503_SERVICE_UNAVAILABLE, detail=str(exc), headers=retry_after()
    )


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
        **READ_RESPONSES,
        **THROTTLED,
    },
)
async def checkout(body: CheckoutRequest, request: Request, tenant: Tenant) -> Response:
    service = checkout_service(request)

    def packet_response() -> Response:
        # Rendering a large packet takes milliseconds: in the worker thread, charged to the
        # tenant, not on the event loop every other request waits for.
        packet = service.checkout(tenant, body)
        if body.format == "markdown":
            return PlainTextResponse(render_markdown(packet), media_type="text/markdown")
        if body.format == "gathered":
            return PlainTextResponse(render_gathered(packet), media_type="text/markdown")
        return Response(render_json(packet), media_type="application/json")

    try:
        return await metered(request, packet_response)
    except NoProjection as exc:
        raise unavailable_error(exc) from exc


@router.post(
    "/v1/recall",
    summary="The raw fused top-k items (no synthesis)",
    responses={**BODY, **READ_RESPONSES, **THROTTLED},
)
async def recall(body: RecallRequest, request: Request, tenant: Tenant) -> dict[str, Any]:
    try:
        items: list[Candidate] = await metered(
            request, checkout_service(request).recall, tenant, body
        )
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    return {"items": [c.model_dump(mode="json") for c in items]}


@router.get(
    "/v1/lineage/{item_id}",
    summary="Sources one hop up and the ledger events beneath",
    response_model=None,
    responses={
        200: {"model": Lineage},
        404: {"model": ErrorBody, "description": "no such item in this tenant"},
        **INVALID,
        **READ_RESPONSES,
    },
)
async def lineage(
    item_id: Annotated[ItemId, PathParam(description="an event, fact, artifact or packet id")],
    request: Request,
    tenant: Tenant,
) -> Lineage | JSONResponse:
    try:
        return await run_in_threadpool(checkout_service(request).lineage, tenant, item_id)
    except UnknownItem:
        return JSONResponse(
            {"detail": f"no item {item_id!r} in this tenant's memory"}, status_code=404
        )
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
