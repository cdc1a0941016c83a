"""One logging set-up for every process: logs never hold event text, query text or a subject.

Our own lines name counts, ids, offsets and reasons, never content. A library's lines are
another matter: httpx logs every request's URL at INFO (a purge's subject is in its path, a
scope in its query string), and at DEBUG the MCP server and HTTP stacks log whole messages.
So :class:`ContentGuard`, on the one handler every logger reaches:

- writes a library's line only at WARNING and above (uvicorn's start and stop lines aside);
- cuts every URL it writes to its route: the path's first two segments (``/v1/subjects``),
  the rest and the query string as ``…``. Our own lines pass through the same cut.

Uvicorn is started with ``log_config=None`` so that its loggers reach this handler too.
"""

from __future__ import annotations

import logging
import re

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
OURS = ("memstream", "memstream_")
# Library loggers whose INFO lines are kept: they name the process and its port, nothing sent.
LIBRARY_INFO = frozenset({"uvicorn.error"})
ROUTE_SEGMENTS = 2
# An absolute URL, or a request line's path ("DELETE /v1/subjects/x HTTP/1.1").
_URL = re.compile(r"(?P<base>[a-z][a-z0-9+.-]*://[^/\s\"'<>]+)(?P<rest>[/?][^\s\"'<>]*)?")
_REQUEST_PATH = re.compile(
    r"\b(?P<method>GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) (?P<rest>/[^\s\"'<>]*)"
)


def route_only(path_and_query: str) -> str:
    """``/v1/subjects/Zo%C3%AB?dry_run=1`` → ``/v1/subjects/…?…``: the route, nothing sent."""
    path, sep, _query = path_and_query.partition("?")
    parts = path.split("/")
    kept = "/".join(parts[: ROUTE_SEGMENTS + 1])
    out = kept + ("/…" if len(parts) > ROUTE_SEGMENTS + 1 else "")
    return out + ("?…" if sep else "")


def redact(text: str) -> str:
    """``text`` with every URL and request path cut to its route (see :func:`route_only`)."""
    text = _URL.sub(lambda m: m["base"] + route_only(m["rest"] or ""), text)
    return _REQUEST_PATH.sub(lambda m: f"{m['method']} {route_only(m['rest'])}", text)


class ContentGuard(logging.Filter):
    """Drops library lines below WARNING and cuts URLs to their routes (module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        library = not record.name.startswith(OURS) and record.name not in LIBRARY_INFO
        if library and record.levelno < logging.WARNING:
            return False
        message = record.getMessage()
        cut = redact(message)
        if cut != message:
            record.msg, record.args = cut, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def configure(level: str | int) -> None:
    """Log to stderr at ``level`` through :class:`ContentGuard` (idempotent)."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
    root = logging.getLogger()
    root.setLevel(level)
    for handler in root.handlers:
        if not any(isinstance(f, ContentGuard) for f in handler.filters):
            handler.addFilter(ContentGuard())
