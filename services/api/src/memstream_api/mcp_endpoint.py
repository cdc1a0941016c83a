"""``/mcp``: the memstream tools over MCP streamable HTTP, on the API's own port.

Stateless and JSON-answering: every POST carries its bearer key and is served on its own, so
any API replica can answer any request (no session affinity). Tools call the API's JSON
routes in process through an ASGI transport, under the caller's key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI, HTTPException, Request
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from memstream.mcpserver.backend import MemoryBackend, http_backend
from memstream.mcpserver.server import build_server
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from memstream_api.auth import bearer_key, principal_of, require_tenant
from memstream_api.context import context_of

PATH = "/mcp"
IN_PROCESS = "http://memstream.internal"  # never resolved: the ASGI transport answers


class BearerGate:
    """Refuses a request without a valid bearer key before MCP sees it, with the reason the
    JSON routes give (401, or 503 while the key store cannot be read)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            try:
                await run_in_threadpool(require_tenant, request, None)
            except HTTPException as exc:
                response = JSONResponse(
                    {"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
                )
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


def mount_mcp(
    app: FastAPI, host: str, component: str, max_body: int
) -> AbstractAsyncContextManager[None]:
    """Serve MCP at ``/mcp`` on ``app``; returns the context the app's lifespan must enter
    (it runs the MCP session manager). ``max_body`` is the body limit ``app`` applies to
    ``/mcp`` (memstream_api.limits): the MCP app's own, lower default must not refuse first."""
    transport = httpx.ASGITransport(app=app)

    @asynccontextmanager
    async def backend_for(ctx: Context) -> AsyncIterator[MemoryBackend]:
        headers = ctx.headers or {}
        scheme, _, key = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise ToolError("send `Authorization: Bearer <api key>` with every MCP request")
        async with http_backend(IN_PROCESS, key.strip(), transport) as memory:
            yield memory

    async def permissions(ctx: ServerRequestContext[Any, Any]) -> frozenset[str]:
        request = ctx.request if isinstance(ctx.request, Request) else None
        if request is None:
            return frozenset()
        api = context_of(app)
        caller = await run_in_threadpool(principal_of, api.keys, bearer_key(request))
        return caller.permissions

    server = build_server(backend_for, component, permissions)
    # DNS-rebinding protection (Host/Origin checks) is on when the API listens on loopback.
    mcp_app = server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        json_response=True,
        host=host,
        max_request_body_size=max_body,
    )
    # A plain Route (not a Mount): the MCP app sees the path /mcp itself, without a redirect
    # to /mcp/; an ASGI-callable endpoint is served as it is.
    app.router.routes.append(
        Route(PATH, endpoint=BearerGate(mcp_app), methods=["GET", "POST", "DELETE"])
    )

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    return running()
