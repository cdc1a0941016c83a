"""One MCP tool call over a running stack's streamable HTTP endpoint."""

from __future__ import annotations

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent


async def call_tool(api_url: str, key: str, tool: str, args: dict[str, object]) -> CallToolResult:
    """``tool`` called with ``args`` as the holder of ``key``."""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{api_url}/mcp", http_client=http) as (r, w, *_),
        ClientSession(r, w) as session,
    ):
        await session.initialize()
        return await session.call_tool(tool, args)


def text_of(result: CallToolResult) -> str:
    """The result's text blocks, joined (where a tool error says why)."""
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))
