"""Request latency histogram labelled by route template (bounded label cardinality)."""

from __future__ import annotations

import time

from memstream.metrics import REQUEST_SECONDS
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HttpMetrics:
    """Pure ASGI middleware: times every HTTP request until its response is sent."""

    def __init__(self, app: ASGIApp, component: str = "api") -> None:
        self.app = app
        self.component = component

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers if the app raises before responding

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            # The router stores the matched route in the scope; raw paths would carry ids.
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            REQUEST_SECONDS.labels(
                component=self.component, route=route, method=scope["method"], status=str(status)
            ).observe(time.perf_counter() - started)
