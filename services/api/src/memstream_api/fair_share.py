"""Fair share of the read routes: a gate in each, after routing and before the body is read.

The gate finds the tenant from the bearer key, asks ``memstream.fairshare`` whether the read
may start, and answers 429 with ``Retry-After`` when it may not: at once, or after a pause
(a sleeping coroutine, no work) for a client that came back before its last Retry-After. A
request without a known key passes through, so the route answers 401 (or 503) with its own
reason. The route runs its work through ``metered``, which measures the CPU time the work
spent in its worker thread; the gate charges that to the tenant when the work is done. MCP
tool calls reach these routes in process, through the same gates.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fastapi import Request, Response
from fastapi.routing import APIRoute
from memstream.fairshare import REASONS, Admitted, FairShare, Refused, ShareLimits
from memstream.keys import KeyStore, KeyStoreError
from memstream.metrics import READS_IN_FLIGHT, READS_THROTTLED
from memstream.settings import Settings
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse

from memstream_api.context import context

READ_ROUTES = frozenset({"/v1/checkout", "/v1/recall", "/v1/search", "/v1/summarize_recall"})
_COST = "memstream.read_cost"  # scope key: CPU seconds the request's work spent
T = TypeVar("T")


def limits_from(settings: Settings) -> ShareLimits:
    return ShareLimits(
        concurrency=settings.read_tenant_concurrency,
        share=settings.read_tenant_share,
        burst_s=settings.read_tenant_burst_s,
        total=settings.read_total_concurrency,
        reserved=settings.read_reserved_slots,
    )


async def metered(request: Request, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in the threadpool; its thread's CPU time is charged to the tenant."""
    cost: list[float] | None = request.scope.get(_COST)

    def timed() -> T:
        started = time.thread_time()
        try:
            return fn(*args)
        finally:
            if cost is not None:
                cost.append(time.thread_time() - started)

    return await run_in_threadpool(timed)


def _tenant(request: Request) -> str | None:
    """The tenant of a well-formed known key; None lets the route answer why not."""
    scheme, _, key = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    keys: KeyStore = context(request).keys
    try:
        return keys.tenant_for(key.strip())
    except KeyStoreError:
        return None


def _refusal(refused: Refused, limits: ShareLimits) -> JSONResponse:
    wait = max(1, math.ceil(refused.retry_after_s))
    why = {
        "concurrency": f"this tenant already has {limits.concurrency} reads in flight, the "
        "most allowed at once",
        "budget": "this tenant has used its share of read time "
        f"({limits.share:g} CPU seconds per second, bursts up to {limits.burst_s:g})",
        "busy": f"every read slot of the API is taken ({limits.total} reads in flight)",
    }[refused.reason]
    return JSONResponse(
        {"detail": f"{why}; retry after {wait} s"},
        status_code=429,
        headers={"Retry-After": str(wait)},
    )


class ReadRoute(APIRoute):
    """The route class of the routers that hold read routes: a route in ``READ_ROUTES``
    passes the app's fair share (``ApiContext.fair_share``) after routing, before its body
    is read; the others are plain routes."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.path not in READ_ROUTES:
            return handler
        route = self.path

        async def gated(request: Request) -> Response:
            share: FairShare | None = context(request).fair_share
            tenant = None if share is None else _tenant(request)
            if share is None or tenant is None:
                return await handler(request)
            decision = share.admit(tenant, time.monotonic())
            if isinstance(decision, Refused):
                READS_THROTTLED.labels(_component(request), route, decision.reason).inc()
                if decision.pause_s > 0:  # it came back before its Retry-After
                    await asyncio.sleep(decision.pause_s)
                return _refusal(decision, share.limits)
            return await _run(request, handler, share, decision)

        return gated


async def _run(
    request: Request,
    handler: Callable[[Request], Coroutine[Any, Any, Response]],
    share: FairShare,
    read: Admitted,
) -> Response:
    cost: list[float] = []
    request.scope[_COST] = cost
    in_flight = READS_IN_FLIGHT.labels(_component(request))
    in_flight.inc()
    try:
        return await handler(request)
    finally:
        in_flight.dec()
        share.release(read, time.monotonic(), sum(cost))


def _component(request: Request) -> str:
    return context(request).component


def read_share(settings: Settings, component: str) -> FairShare | None:
    """The fair share per tenant that holds the read routes (those of routers built with
    ``route_class=ReadRoute``); None with ``read_limits`` off."""
    READS_IN_FLIGHT.labels(component).set(0)
    for route in READ_ROUTES:
        for reason in REASONS:
            READS_THROTTLED.labels(component, route, reason)
    return FairShare(limits_from(settings)) if settings.read_limits else None
