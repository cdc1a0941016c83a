"""MCP sessions with a running stack: one tool call over its streamable HTTP endpoint, and
sessions with ``memstream mcp`` over stdio."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TextIO

import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent
from stackproc import BIN


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


def stdio_params(data_dir: Path, key: str | None) -> StdioServerParameters:
    """``memstream mcp`` for the stack in ``data_dir``, the key in ``MEMSTREAM_API_KEY``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "ANTHROPIC_"))}
    if key is not None:
        env["MEMSTREAM_API_KEY"] = key
    return StdioServerParameters(
        command=str(BIN / "memstream"), args=["mcp", "--data-dir", str(data_dir)], env=env
    )


@asynccontextmanager
async def stdio_session(
    data_dir: Path, key: str, errlog: TextIO = sys.stderr
) -> AsyncIterator[ClientSession]:
    """An initialized session with ``memstream mcp``; its standard error goes to ``errlog``."""
    async with (
        stdio_client(stdio_params(data_dir, key), errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def list_tools(api_url: str, key: str) -> list[str]:
    """The names of the tools listed to the holder of ``key``, sorted."""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{api_url}/mcp", http_client=http) as (r, w, *_),
        ClientSession(r, w) as session,
    ):
        await session.initialize()
        return sorted(t.name for t in (await session.list_tools()).tools)
