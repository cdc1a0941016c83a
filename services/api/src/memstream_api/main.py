"""``memstream-api``: serve the HTTP API on ``MEMSTREAM_API_HOST``/``MEMSTREAM_API_PORT``."""

from __future__ import annotations

import socket
import sys

import uvicorn
from memstream import logs
from memstream.metrics import API_REFUSED
from memstream.settings import Settings
from memstream.stack.children import exit_with_parent

from memstream_api.app import create_app
from memstream_api.connections import guarded_h11


def main() -> None:
    """Entry point; needs ``MEMSTREAM_KAFKA_BOOTSTRAP`` (host:port of the Kafka cluster)."""
    settings = Settings()
    logs.configure(settings.log_level)
    exit_with_parent()
    if not settings.kafka_bootstrap:
        sys.exit(
            "memstream-api: MEMSTREAM_KAFKA_BOOTSTRAP is not set; give the Kafka bootstrap "
            "address (host:port), e.g. the one `memstream up` prints"
        )
    # Without a Qdrant server the index is Qdrant Edge, in this process: project into it here.
    app = create_app(
        settings,
        settings.kafka_bootstrap,
        project_vectors=settings.qdrant_url is None and settings.embedded_projections,
    )
    config = uvicorn.Config(
        app,
        host=settings.api_host,
        port=settings.api_port,
        log_level=settings.log_level.lower(),
        # Uvicorn's loggers reach the process's one handler and its guard (memstream.logs).
        log_config=None,
        # Our own histogram covers requests; per-request access lines drown the logs.
        access_log=False,
        # Half-sent requests are closed (the body limit and stall: memstream_api.limits).
        http=guarded_h11(
            settings.api_header_timeout_s,
            settings.api_body_timeout_s,
            lambda reason: API_REFUSED.labels("api", reason).inc(),
        ),
        timeout_keep_alive=settings.api_keepalive_s,
    )
    # The embedded supervisor holds the listening socket: requests that arrive while this
    # process (re)starts wait in its backlog instead of being refused.
    sockets = [socket.socket(fileno=settings.api_fd)] if settings.api_fd is not None else None
    uvicorn.Server(config).run(sockets=sockets)


if __name__ == "__main__":
    main()
