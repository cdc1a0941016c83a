"""``memstream mcp``: the MCP server over stdio, for Claude Desktop and other MCP clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memstream_cli.common import DataDir, err, fail, settings_for

if TYPE_CHECKING:
    from memstream.settings import Settings

COMPONENT = "mcp"


def mcp(
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            envvar="MEMSTREAM_API_KEY",
            help="API key; it decides the tenant (default $MEMSTREAM_API_KEY)",
        ),
    ] = None,
    api_url: Annotated[
        str | None,
        typer.Option(
            "--api-url",
            envvar="MEMSTREAM_API_URL",
            help="the memstream API (default: the stack in the data dir, or MEMSTREAM_API_*)",
        ),
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Serve the memstream tools over MCP on stdin/stdout (stdout carries only the protocol)."""
    if not key:
        fail(
            "set MEMSTREAM_API_KEY (from `memstream keys create --tenant T`): it decides the tenant"
        )
    # The MCP server and its SDK are imported here (~1.2 s), not by every other command.
    import anyio
    from memstream import logs
    from memstream.mcpserver.backend import MemoryBackend, http_backend
    from memstream.mcpserver.server import build_server
    from memstream.metrics import serve_metrics

    settings = settings_for(data_dir)
    logs.configure(settings.log_level)  # on stderr; a library's request lines never written
    port = serve_metrics(settings.metrics_port, settings.metrics_host)
    where = api_url or f"the stack in {settings.data_dir}"
    err.print(f"memstream mcp: tools over stdio for {where}; metrics on :{port}/metrics")

    @asynccontextmanager
    async def backend_for(_ctx: Any) -> AsyncIterator[MemoryBackend]:
        # Found per call: a client may start this server before the stack, and a restarted
        # stack may listen elsewhere.
        async with http_backend(api_url or _located_api(settings), key) as memory:
            yield memory

    async def permissions(_ctx: Any) -> frozenset[str]:
        # Asked at every listing: a key revoked or narrowed since is listed what it may do now.
        async with backend_for(None) as memory:
            return await memory.permissions()

    anyio.run(build_server(backend_for, COMPONENT, permissions).run_stdio_async)


def _located_api(settings: Settings) -> str:
    from mcp.server.mcpserver.exceptions import ToolError

    from memstream_cli.stack.locate import NoStackError, locate

    try:
        ep = locate(settings)
    except NoStackError as exc:
        raise ToolError(f"{exc}; or pass --api-url / MEMSTREAM_API_URL") from exc
    if ep.api_url is None:
        raise ToolError("no API endpoint known (start the stack, or set MEMSTREAM_API_URL)")
    return ep.api_url
