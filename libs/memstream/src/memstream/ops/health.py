"""Dependency probes behind ``memstream_dependency_up`` (Kafka metadata, graph server ping).

A hung server is not a dead process: only a request with a timeout tells them apart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import redis
from confluent_kafka.admin import AdminClient

from memstream.kafka.reading import QUIET
from memstream.metrics import DEPENDENCY_UP
from memstream.settings import Settings

log = logging.getLogger(__name__)
Check = Callable[[], bool]


def kafka_check(bootstrap: str, timeout: float = 2.0) -> Check:
    """True while the cluster answers a metadata request within ``timeout``."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})

    def check() -> bool:
        admin.list_topics(timeout=timeout)
        return True

    return check


def falkordb_check(url: str, timeout: float = 2.0, password: str | None = None) -> Check:
    client = redis.Redis.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=timeout, password=password
    )
    return lambda: bool(client.ping())


def neo4j_check(settings: Settings, timeout: float = 2.0) -> Check:
    import neo4j

    assert settings.neo4j_uri is not None
    driver: Any = neo4j.GraphDatabase.driver(
        settings.neo4j_uri,
        auth=(settings.neo4j_user, settings.neo4j_password),
        connection_timeout=timeout,
    )

    def check() -> bool:
        driver.verify_connectivity()
        return True

    return check


def graph_check(settings: Settings, timeout: float = 2.0) -> Check | None:
    """The probe for the configured graph backend (same choice as ``open_graph_store``)."""
    if settings.neo4j_uri:
        return neo4j_check(settings, timeout)
    if settings.falkordb_url:
        secret = settings.falkordb_secret()
        password = secret.get_secret_value() if secret is not None else None
        return falkordb_check(settings.falkordb_url, timeout, password)
    return None


def probe(component: str, checks: dict[str, Check]) -> dict[str, bool]:
    """Run every check once and publish the results; an exception counts as down."""
    out: dict[str, bool] = {}
    for name, check in checks.items():
        try:
            ok = check()
        except Exception as exc:
            log.debug("%s: %s probe failed: %s", component, name, exc)
            ok = False
        out[name] = ok
        DEPENDENCY_UP.labels(component, name).set(1.0 if ok else 0.0)
    return out


class DependencyProbe:
    """Probes ``checks`` every ``every`` seconds on a daemon thread until stopped."""

    def __init__(self, component: str, checks: dict[str, Check], every: float = 5.0) -> None:
        self.component = component
        self.checks = checks
        self.every = every
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="dependency-probe", daemon=True)

    def start(self) -> DependencyProbe:
        self.thread.start()
        return self

    def _run(self) -> None:
        while True:
            probe(self.component, self.checks)
            if self.stopping.wait(self.every):
                return

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)


def dependency_checks(settings: Settings, bootstrap: str) -> dict[str, Check]:
    """Kafka always; the graph server when one is configured."""
    checks = {"kafka": kafka_check(bootstrap)}
    graph = graph_check(settings)
    if graph is not None:
        checks["graph"] = graph
    return checks
