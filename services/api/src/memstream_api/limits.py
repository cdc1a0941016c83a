"""Request body limits, applied before routing, authentication and parsing (DESIGN §3.9).

Starlette has a body-size middleware of its own, but it answers in plain text and only once
the app reads the body or starts its answer: a route that answers without reading (a GET)
does its work first. ``BodyGuard`` refuses a declared ``Content-Length`` over the limit before
the app runs, counts a streamed body (chunked, or longer than declared) as the app reads it,
and times out a body the client stops sending while the app waits for it. The server side of
the same rules (headers, and bodies nobody reads) is ``memstream_api.connections``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import NoReturn

import orjson
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOO_LARGE = 413
TIMED_OUT = 408


class RequestRefused(HTTPException):
    """Raised into the app once its request is answered (413 or 408) in its place. An
    ``HTTPException``, so that FastAPI passes it on instead of answering 400."""


def too_large(limit: int) -> str:
    return f"request body exceeds this route's limit of {limit} bytes; send less (split a batch)"


def too_slow(seconds: float) -> str:
    return f"request body stalled for {seconds:g} s; send it whole and promptly"


class BodyGuard:
    """Pure ASGI middleware: 413 for a request body over its route's limit, 408 for a body
    that stalls, both JSON with a ``detail``.

    ``limits`` maps exact paths to their own byte limit; every other path has ``default``.
    A refused body is not read any further: what the client still sends is discarded by the
    server (within its body timeout). ``on_too_large(path)`` is told of every 413.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        default: int,
        limits: Mapping[str, int] | None = None,
        stall_s: float,
        on_too_large: Callable[[str], None] = lambda _path: None,
    ) -> None:
        self.app = app
        self.default = default
        self.limits = dict(limits or {})
        self.stall_s = stall_s
        self.on_too_large = on_too_large

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        limit = self.limits.get(path, self.default)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            self.on_too_large(path)
            await _answer(send, TOO_LARGE, too_large(limit))
            return
        request = _Guarded(self, path, limit)
        try:
            await self.app(scope, lambda: request.receive(receive, send), request.sender(send))
        except RequestRefused:
            if not request.answered:
                raise


class _Guarded:
    """One request whose body is counted and timed as the app reads it."""

    def __init__(self, guard: BodyGuard, path: str, limit: int) -> None:
        self.guard, self.path, self.limit = guard, path, limit
        self.size = 0
        self.body_done = False  # afterwards receive() waits for a disconnect: no timeout
        self.started = False  # the app began its answer
        self.answered = False  # a refusal went out instead

    async def receive(self, receive: Receive, send: Send) -> Message:
        if self.body_done:
            return await receive()
        try:
            message = await asyncio.wait_for(receive(), self.guard.stall_s)
        except TimeoutError:
            await self._refuse(send, TIMED_OUT, too_slow(self.guard.stall_s))
        if message["type"] == "http.request":
            self.size += len(message.get("body", b""))
            self.body_done = not message.get("more_body", False)
            if self.size > self.limit:
                self.guard.on_too_large(self.path)
                await self._refuse(send, TOO_LARGE, too_large(self.limit))
        return message

    async def _refuse(self, send: Send, status: int, detail: str) -> NoReturn:
        """Answer in the app's place (unless it began answering) and stop it."""
        if not self.started:
            # 408: the rest of the body may never come, so the connection goes too.
            await _answer(send, status, detail, close=status == TIMED_OUT)
            self.answered = True
        raise RequestRefused(status, detail=detail)

    def sender(self, send: Send) -> Send:
        async def guarded(message: Message) -> None:
            if self.answered:
                return  # the app's answer to RequestRefused: the refusal stands
            if message["type"] == "http.response.start":
                self.started = True
            await send(message)

        return guarded


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


async def _answer(send: Send, status: int, detail: str, *, close: bool = False) -> None:
    body = orjson.dumps({"detail": detail})
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
