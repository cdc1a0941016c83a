"""415 for a request body that is not JSON, before routing, authentication and parsing.

FastAPI reads a body by its content, not its declared type: a route that reads the raw body
took ``text/plain``, form and multipart bodies as JSON, and a route with a model answered a
vague 422. Every memory route takes JSON, so a request that carries a body must say so; a
request without a body (``POST …/accept`` with nothing to add) passes as it is.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson
from memstream.wire import echo
from starlette.types import ASGIApp, Receive, Scope, Send

UNSUPPORTED = 415
JSON_TYPES = ("application/json",)
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


def media_type(scope: Scope) -> str | None:
    """The request's declared media type (lower case, parameters dropped), or None."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.decode("latin-1").split(";", 1)[0].strip().lower() or None
    return None


def has_body(scope: Scope) -> bool:
    """Whether the request declares a body (a non-zero length, or a chunked one)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return value.strip() not in (b"0", b"")
        if name == b"transfer-encoding":
            return True
    return False


def _accepts(kind: str | None, accepted: tuple[str, ...]) -> bool:
    if kind is None:
        return False
    return kind in accepted or ("application/json" in accepted and kind.endswith("+json"))


class JsonOnly:
    """Pure ASGI middleware: a body sent to a path under ``prefix`` must have one of the
    media types the path accepts (``accepted``; JSON for every path it does not name), else
    415 naming the types it takes."""

    def __init__(
        self, app: ASGIApp, *, prefix: str, accepted: Mapping[str, tuple[str, ...]] | None = None
    ) -> None:
        self.app = app
        self.prefix = prefix
        self.accepted = dict(accepted or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] in _WITH_BODY
            and scope["path"].startswith(self.prefix)
            and has_body(scope)
        ):
            accepted = self.accepted.get(scope["path"], JSON_TYPES)
            kind = media_type(scope)
            if not _accepts(kind, accepted):
                await _refuse(send, kind, accepted)
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, kind: str | None, accepted: tuple[str, ...]) -> None:
    sent = f"a body of type '{echo(kind)}'" if kind else "a body without a Content-Type"
    doc = {
        "detail": f"{sent} is not accepted here; send {' or '.join(accepted)}",
        "accepted": list(accepted),
    }
    body = orjson.dumps(doc)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": UNSUPPORTED, "headers": headers})
    await send({"type": "http.response.body", "body": body})
