"""The tools listed to each MCP caller: only those its key may call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

# What the calling key may do: ``read``, ``write``, ``forget`` (see ``memstream.keys``).
Permissions = Callable[[ServerRequestContext[Any, Any]], Awaitable[frozenset[str]]]


def listed_for(permissions: Permissions, needs: Mapping[str, str]) -> Any:
    """A server middleware that lists to a caller only the tools its key may call (``needs``:
    tool -> permission). A call to another is refused by the API route it reaches (403)."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/list" or result is None:
            return result
        allowed = await permissions(ctx)
        keep = {name for name, perm in needs.items() if perm in allowed}
        if isinstance(result, dict):
            tools = [t for t in result.get("tools", []) if t.get("name") in keep]
            return {**result, "tools": tools}
        listed = getattr(result, "tools", [])
        return result.model_copy(update={"tools": [t for t in listed if t.name in keep]})

    return middleware
