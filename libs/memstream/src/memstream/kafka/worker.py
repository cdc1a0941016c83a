"""Start-up shared by every consumer worker: settings, logging, metrics, topics."""

from __future__ import annotations

import logging
import sys

from memstream import logs
from memstream.kafka.topics import ensure_topics
from memstream.metrics import serve_metrics
from memstream.settings import Settings
from memstream.stack.children import exit_with_parent


def start_worker(component: str) -> tuple[Settings, str]:
    """Read settings, log, serve ``/metrics``, ensure topics; returns (settings, bootstrap)."""
    settings = Settings()
    logs.configure(settings.log_level)
    exit_with_parent()
    if not settings.kafka_bootstrap:
        sys.exit(f"memstream-{component}: MEMSTREAM_KAFKA_BOOTSTRAP is not set")
    port = serve_metrics(settings.metrics_port, settings.metrics_host)
    logging.getLogger(f"memstream.{component}").info("metrics on :%d", port)
    ensure_topics(settings.kafka_bootstrap, settings)
    return settings, settings.kafka_bootstrap
