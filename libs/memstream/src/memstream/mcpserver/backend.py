"""The MCP tools' one way into memory: the HTTP API, under the caller's key.

Stdio reaches the API over the network; the API's own ``/mcp`` endpoint reaches itself in
process (an ASGI transport). Either way each tool call passes the same authentication,
validation and error reasons as a direct HTTP request, so the two surfaces cannot drift.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import httpx
from mcp.server.mcpserver.exceptions import ToolError

TIMEOUT_S = 60.0  # summarize_recall waits for a model; the others answer in milliseconds


class MemoryBackend:
    """One tenant's memory (the key decides the tenant) as the tools need it."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """The API's answer, or a ``ToolError`` carrying its status and reason."""
        try:
            resp = await self._http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise ToolError(f"memstream API unreachable: {exc}") from exc
        if resp.status_code >= 400:
            try:
                detail = resp.json().get("detail")
            except ValueError:
                detail = resp.text
            # A 429 or 503 says when to come again; the model can act on it.
            wait = resp.headers.get("retry-after")
            again = f" (Retry-After: {wait} s)" if wait else ""
            raise ToolError(f"memstream answered HTTP {resp.status_code}: {detail}{again}")
        return resp

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        return (await self.call("POST", path, json=drop_none(body))).json()

    async def lineage(self, item_id: str) -> Any:
        return (await self.call("GET", f"/v1/lineage/{quote(item_id, safe='')}")).json()

    async def forget(self, subject: str, dry_run: bool, wait_s: float) -> Any:
        path = f"/v1/subjects/{quote(subject, safe='')}"
        params = {"dry_run": str(dry_run).lower(), "wait_s": wait_s}
        return (await self.call("DELETE", path, params=params)).json()

    async def forget_scope(self, scope: dict[str, Any], dry_run: bool, wait_s: float) -> Any:
        params: list[tuple[str, str]] = [
            (field, v)
            for field, values in scope.items()
            for v in ([values] if isinstance(values, str) else values)
        ]
        params += [("dry_run", str(dry_run).lower()), ("wait_s", str(wait_s))]
        return (await self.call("DELETE", "/v1/scopes", params=params)).json()

    async def permissions(self) -> frozenset[str]:
        """What the backend's key may do (``GET /v1/keys/me``)."""
        doc = (await self.call("GET", "/v1/keys/me")).json()
        return frozenset(str(p) for p in doc.get("permissions") or [])

    async def checkout_text(self, body: dict[str, Any]) -> str:
        return (await self.call("POST", "/v1/checkout", json=drop_none(body))).text


def drop_none(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without its None values."""
    # Left-out arguments take the API's defaults rather than an explicit null.
    return {k: v for k, v in body.items() if v is not None}


@asynccontextmanager
async def http_backend(
    base_url: str, api_key: str, transport: httpx.AsyncBaseTransport | None = None
) -> AsyncIterator[MemoryBackend]:
    """A backend over ``base_url`` (or an in-process ``transport``) under ``api_key``."""
    async with httpx.AsyncClient(
        base_url=base_url.rstrip("/"),
        headers={"Authorization": f"Bearer {api_key}"},
        transport=transport,
        timeout=TIMEOUT_S,
    ) as http:
        yield MemoryBackend(http)
