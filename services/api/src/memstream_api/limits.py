"""Request body limits, applied before routing, authentication and parsing.

Starlette has a body-size middleware of its own, but it answers in plain text and only once
the app reads the body or starts its answer: a route that answers without reading (a GET)
does its work first. ``BodyGuard`` refuses a declared ``Content-Length`` over the limit before
the app runs, counts a streamed body (chunked, or longer than declared) as the app reads it,
and times out a body the client stops sending while the app waits for it. The server side of
the same rules (headers, and bodies nobody reads) is ``memstream_api.connections``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NoReturn

import orjson
from memstream.wire import BODY_MAX_DEPTH, deepest, dotted
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOO_LARGE = 413
TIMED_OUT = 408
TOO_DEEP = 422


class RequestRefused(HTTPException):
    """Raised into the app once its request is answered (413 or 408) in its place. An
    ``HTTPException``, so that FastAPI passes it on instead of answering 400."""


def too_large(limit: int) -> str:
    return f"request body exceeds this route's limit of {limit} bytes; send less (split a batch)"


def too_slow(seconds: float) -> str:
    return f"request body stalled for {seconds:g} s; send it whole and promptly"


def too_deep(loc: tuple[int | str, ...]) -> dict[str, object]:
    """The 422 body (as FastAPI's validation errors read) for a body nesting too deep."""
    where = dotted(loc)
    message = f"nests deeper than {BODY_MAX_DEPTH} levels, the most a request body may"
    problem = {"field": where, "message": message, "type": "json_too_deep"}
    return {"detail": f"{where or 'the body'}: {message}", "errors": [problem]}


# Why a body was refused, by the reason label of memstream_api_refused_total.
STALLED, DEADLINE, SLOW = "body_stalled", "body_deadline", "body_too_slow"


@dataclass(frozen=True)
class Pace:
    """How promptly a body must arrive: no pause over ``stall_s``, the whole within
    ``deadline_s``, and on average at least ``min_rate`` bytes a second once ``grace_s`` has
    passed (all counted from the app's first read of it)."""

    stall_s: float
    deadline_s: float = 300.0
    min_rate: int = 1
    grace_s: float = 10.0

    def wait(self, size: int, elapsed: float) -> tuple[float, str, str]:
        """With ``size`` bytes in after ``elapsed`` seconds: how long the next piece may take,
        and the reason label and detail of the refusal if it takes longer."""
        rate_s = max(self.grace_s, size / self.min_rate) - elapsed
        waits = [
            (self.stall_s, STALLED, too_slow(self.stall_s)),
            (
                self.deadline_s - elapsed,
                DEADLINE,
                f"request body not whole within {self.deadline_s:g} s; send it promptly",
            ),
            (
                rate_s,
                SLOW,
                f"request body arriving slower than {self.min_rate} bytes/s after "
                f"{self.grace_s:g} s ({size} bytes in {elapsed + max(rate_s, 0):.1f} s)",
            ),
        ]
        return min(waits, key=lambda w: w[0])


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
        pace: Pace,
        on_too_large: Callable[[str], None] = lambda _path: None,
        on_refused: Callable[[str], None] = lambda _reason: None,
    ) -> None:
        self.app = app
        self.default = default
        self.limits = dict(limits or {})
        self.pace = pace
        self.on_too_large = on_too_large
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        limit = self.limits.get(path, self.default)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            self.on_too_large(path)
            await _answer(send, TOO_LARGE, {"detail": too_large(limit)})
            return
        request = _Guarded(self, path, limit)
        try:
            await self.app(scope, lambda: request.receive(receive, send), request.sender(send))
        except RequestRefused:
            if not request.answered:
                raise


class _Guarded:
    """One request whose body is counted and timed as the app reads it. A body of a route
    with the default limit is kept until it is whole and its nesting checked before the app
    reads its end: the standard library's JSON parser recurses (a RecursionError, no 4xx) past
    about 1,000 levels. Ingest checks its own (its bodies are large and parsed otherwise)."""

    def __init__(self, guard: BodyGuard, path: str, limit: int) -> None:
        self.guard, self.path, self.limit = guard, path, limit
        self.chunks: list[bytes] | None = [] if limit <= guard.default else None
        self.size = 0
        self.first_read: float | None = None  # when the app first asked for the body
        self.body_done = False  # afterwards receive() waits for a disconnect: no timeout
        self.started = False  # the app began its answer
        self.answered = False  # a refusal went out instead

    async def receive(self, receive: Receive, send: Send) -> Message:
        if self.body_done:
            return await receive()
        now = time.monotonic()
        if self.first_read is None:
            self.first_read = now
        wait, reason, why = self.guard.pace.wait(self.size, now - self.first_read)
        try:
            message = await asyncio.wait_for(receive(), max(wait, 0.0))
        except TimeoutError:
            self.guard.on_refused(reason)
            await self._refuse(send, TIMED_OUT, why)
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            self.size += len(chunk)
            self.body_done = not message.get("more_body", False)
            if self.size > self.limit:
                self.guard.on_too_large(self.path)
                await self._refuse(send, TOO_LARGE, too_large(self.limit))
            if self.chunks is not None:
                self.chunks.append(chunk)
                if self.body_done and (deep := deepest(b"".join(self.chunks), BODY_MAX_DEPTH)):
                    body = too_deep(deep)
                    await self._refuse(send, TOO_DEEP, str(body["detail"]), body)
        return message

    async def _refuse(
        self, send: Send, status: int, detail: str, body: dict[str, object] | None = None
    ) -> NoReturn:
        """Answer in the app's place (unless it began answering) and stop it."""
        if not self.started:
            # 408: the rest of the body may never come, so the connection goes too.
            await _answer(send, status, body or {"detail": detail}, close=status == TIMED_OUT)
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


async def _answer(send: Send, status: int, doc: dict[str, object], *, close: bool = False) -> None:
    body = orjson.dumps(doc)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
