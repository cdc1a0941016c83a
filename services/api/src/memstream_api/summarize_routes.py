"""``POST /v1/summarize_recall``: recall, then one LLM synthesis with checked citations."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, HTTPException, Request, status
from memstream.checkout.service import CheckoutService
from memstream.projection.live import NoProjection
from memstream.settings import Settings
from memstream.summarize.cache import SummaryCache
from memstream.summarize.model import StaleWarning, SummarizeRequest, SummarizeResult
from memstream.summarize.providers import ProviderError, SummarizeDisabled, build_provider
from memstream.summarize.service import Summarizer

from memstream_api.auth import Reader, read_scope
from memstream_api.checkout_routes import FOREIGN_POSITION, READ_RESPONSES, unavailable_error
from memstream_api.context import serving
from memstream_api.errors import BODY, THROTTLED, ErrorBody
from memstream_api.fair_share import ReadRoute, metered
from memstream_api.read_after import wait_after

router = APIRouter(tags=["checkout"], route_class=ReadRoute)

_RETRY_AFTER = {
    "Retry-After": {
        "description": "seconds to wait; sent when the condition is temporary (not when disabled)",
        "required": False,
        "schema": {"type": "integer", "minimum": 0},
    }
}
RESPONSES: dict[int | str, dict[str, Any]] = {
    **BODY,
    **FOREIGN_POSITION,
    **READ_RESPONSES,
    **THROTTLED,
    # One 503 entry covers the three causes; only the disabled one is not temporary.
    503: {
        "model": ErrorBody,
        "description": "summarize_recall is disabled (no ANTHROPIC_API_KEY: the detail says "
        "so), memory is briefly unavailable, or the API key store cannot be read",
        "headers": _RETRY_AFTER,
    },
    502: {"model": ErrorBody, "description": "the LLM provider call failed (the detail says why)"},
}


def build_summarizer(
    settings: Settings, checkout: CheckoutService
) -> Summarizer | SummarizeDisabled:
    """The Summarizer for this process, or why there is none (answered as a 503)."""
    try:
        provider = build_provider(settings)
    except SummarizeDisabled as exc:
        return exc
    cache = SummaryCache(settings.summary_cache_ttl_s, time.monotonic)
    return Summarizer(checkout.answer_pool, provider, cache, checkout.count_tokens)


def summarizer(request: Request) -> Summarizer:
    found: Summarizer | SummarizeDisabled = serving(request).summarizer
    if isinstance(found, SummarizeDisabled):
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=str(found))
    return found


@router.post(
    "/v1/summarize_recall",
    summary="Recall k memories and synthesize them into one answer with checked citations",
    response_model=SummarizeResult,
    responses=RESPONSES,
)
async def summarize_recall(
    body: SummarizeRequest, request: Request, caller: Reader
) -> SummarizeResult:
    tenant = caller.tenant
    scope = read_scope(caller, body.stream, body.scope)
    service = summarizer(request)
    try:
        waited = await wait_after(request, tenant, body.after, "summarize_recall")
        result: SummarizeResult = await metered(request, service.summarize, tenant, body, scope)
        message = waited.warning() if waited is not None else None
        if message is not None:
            stale = StaleWarning(message=message)
            result = result.model_copy(update={"warnings": [*result.warnings, stale]})
        return result
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    except ProviderError as exc:
        detail = f"the LLM provider ({service.provider.name}) call failed: {exc}"
        raise HTTPException(status.HTTP_502_BAD_GATEWAY, detail=detail) from exc
