"""MCP tool calls, counted where they arrive (stdio process or the API)."""

from __future__ import annotations

import time
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from prometheus_client import Counter, Histogram

MCP_TOOL_CALLS = Counter(
    "memstream_mcp_tool_calls_total",
    "MCP tool calls by tool and outcome (ok, error = the tool answered an error)",
    ["component", "tool", "outcome"],
)
MCP_TOOL_SECONDS = Histogram(
    "memstream_mcp_tool_seconds",
    "MCP tool call latency",
    ["component", "tool"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


def tool_metrics(component: str, tools: frozenset[str]) -> Any:
    """A server middleware that times and counts ``tools/call`` requests."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        name = str((ctx.params or {}).get("name", ""))
        tool = name if name in tools else "unknown"  # bounded label values
        started = time.perf_counter()
        outcome = "error"
        try:
            result = await call_next(ctx)
            outcome = "error" if _is_error(result) else "ok"
            return result
        finally:
            MCP_TOOL_CALLS.labels(component, tool, outcome).inc()
            MCP_TOOL_SECONDS.labels(component, tool).observe(time.perf_counter() - started)

    return middleware


def _is_error(result: Any) -> bool:
    if isinstance(result, dict):
        return bool(result.get("isError") or result.get("is_error"))
    return bool(getattr(result, "is_error", False) or getattr(result, "isError", False))
