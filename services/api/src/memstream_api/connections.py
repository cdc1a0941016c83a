"""Connection deadlines uvicorn lacks: half-sent requests are closed.

uvicorn's HTTP/1.1 protocol (h11, the version in uv.lock) times out idle keep-alive
connections only. A client that opens a connection and sends nothing, or never finishes its
headers, holds the connection forever; so does one that declares a body and never sends it
to a route that answers without reading it. ``guarded_h11`` adds two deadlines:

- headers: a request's headers must all arrive within ``header_timeout_s`` of the connection's
  opening (first request) or of the request's first byte (later ones; the silence between
  requests is uvicorn's keep-alive timeout, ``MEMSTREAM_API_KEEPALIVE_S``). Else: 408 and
  close.
- linger: a body the client still sends after its answer (a 413 goes out without reading the
  body) is read and discarded for at most ``linger_s``, then the connection closes. Reading
  it lets the client finish sending and read the answer; the bound stops a trickle.

A body the app waits for and the client stops sending is ``memstream_api.limits``' 408.
This subclasses uvicorn's ``H11Protocol`` and reads its ``conn`` (the h11 connection) and
``transport``: ``tests/test_api_limits.py`` holds a real server to the behaviour above.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal

import h11
import orjson
from uvicorn.protocols.http.h11_impl import H11Protocol

Deadline = Literal["headers", "linger"]


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the deadlines above; :func:`guarded_h11` sets them."""

    header_timeout_s: float = 30.0
    linger_s: float = 5.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._watching: Deadline | None = None

    @staticmethod
    def on_refused(_reason: str) -> None:
        """Told of each connection a deadline closed."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch("headers")

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._watch(None)
        super().connection_lost(exc)

    def _follow(self) -> None:
        """The deadline the connection's state calls for, kept if already running."""
        theirs, ours = self.conn.their_state, self.conn.our_state
        if self.transport.is_closing():
            self._watch(None)
        elif theirs is h11.IDLE:
            started = bool(self.conn.trailing_data[0])  # bytes of unfinished headers
            self._watch("headers" if started or self._watching == "headers" else None)
        elif theirs is h11.SEND_BODY and ours in (h11.DONE, h11.MUST_CLOSE):
            self._watch("linger")
        else:  # headers in; the app reads the body (or answers without it) itself
            self._watch(None)

    def _watch(self, what: Deadline | None) -> None:
        if what == self._watching:
            return
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._watching = what
        if what is not None:
            seconds = self.header_timeout_s if what == "headers" else self.linger_s
            self._deadline = self.loop.call_later(seconds, self._expired)

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._watching == "headers" and self.conn.our_state is h11.IDLE:
            # h11 answers only a request it has read: the 408 is written as it is.
            self.transport.write(_timeout_response(self.header_timeout_s))
            self.on_refused("headers_late")
        elif self._watching == "linger":
            self.on_refused("body_unread")
        self._watching = None
        self.transport.close()


def guarded_h11(
    header_timeout_s: float,
    linger_s: float,
    on_refused: Callable[[str], None] = lambda _reason: None,
) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the deadlines above (pass as ``uvicorn.run(http=...)``);
    ``on_refused`` hears of each connection closed by one (``headers_late``,
    ``body_unread``)."""
    deadlines = {
        "header_timeout_s": header_timeout_s,
        "linger_s": linger_s,
        "on_refused": staticmethod(on_refused),
    }
    return type("GuardedH11Protocol", (GuardedH11Protocol,), deadlines)


def _timeout_response(seconds: float) -> bytes:
    body = orjson.dumps({"detail": f"request headers not received within {seconds:g} s"})
    head = (
        b"HTTP/1.1 408 Request Timeout\r\n"
        b"content-type: application/json\r\n"
        b"content-length: %d\r\n"
        b"connection: close\r\n\r\n" % len(body)
    )
    return head + body
