"""``GET /v1/latents`` and ``POST /v1/search``: latent artifacts and search by altitude."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from memstream.checkout.search import SearchRequest, SearchResult
from memstream.projection.live import NoProjection
from memstream.records.altitudes import ArtifactType
from memstream.records.latent import LatentArtifact
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from memstream_api.auth import QueryScope, Reader, read_scope
from memstream_api.checkout_routes import (
    FOREIGN_POSITION,
    READ_RESPONSES,
    checkout_service,
    stale,
    unavailable_error,
)
from memstream_api.errors import BODY, INVALID, READ_FORBIDDEN, THROTTLED
from memstream_api.fair_share import ReadRoute, metered
from memstream_api.read_after import wait_after

router = APIRouter(tags=["latents"], route_class=ReadRoute)

MAX_LATENTS = 1000


class LatentList(BaseModel):
    """Artifacts are suggestive, never evidence: each cites the ledger events it came from."""

    artifacts: list[LatentArtifact]


@router.get(
    "/v1/latents",
    summary="The tenant's latent artifacts, newest first",
    response_model=LatentList,
    responses={**INVALID, **READ_FORBIDDEN, **READ_RESPONSES},
)
async def latents(
    request: Request,
    caller: Reader,
    asked: QueryScope,
    types: Annotated[
        list[ArtifactType] | None,
        Query(alias="type", description="only these artifact types (repeat for several)"),
    ] = None,
    include_stale: Annotated[
        bool, Query(description="also artifacts whose sources were superseded or purged")
    ] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_LATENTS)] = 100,
) -> LatentList:
    """The scope is the query's ``user``, ``agent`` and ``stream`` (each repeatable: AND
    across fields, OR within one) within the key's; an artifact in it cites only its source
    events there."""
    scope = read_scope(caller, None, asked)
    service = checkout_service(request)
    try:
        found = await run_in_threadpool(
            service.latents,
            caller.tenant,
            list(types) if types is not None else None,
            scope,
            include_stale,
            limit,
        )
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    return LatentList(artifacts=found)


@router.post(
    "/v1/search",
    summary="Search at an altitude: events, facts, episodes or latent artifacts",
    response_model=SearchResult,
    responses={**BODY, **FOREIGN_POSITION, **READ_RESPONSES, **THROTTLED},
)
async def search(body: SearchRequest, request: Request, caller: Reader) -> SearchResult:
    tenant = caller.tenant
    scope = read_scope(caller, body.stream, body.scope)
    try:
        waited = await wait_after(request, tenant, body.after, "search")
        hits = await metered(request, checkout_service(request).search, tenant, body, scope)
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    return SearchResult(hits=hits, warnings=stale(waited))
