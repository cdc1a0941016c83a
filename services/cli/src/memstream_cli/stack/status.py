"""Health of every component and consumer lag per group."""

from __future__ import annotations

import urllib.request
from typing import Any

import redis
from confluent_kafka.admin import AdminClient
from memstream.kafka.reading import group_lag
from memstream.kafka.topics import (
    ARCHIVER_GROUP,
    CHECKOUTS,
    LATENTS_GROUP,
    LEDGER,
    RAW,
    RETROSPECTIVE_GROUP,
    SEQUENCER_GROUP,
)

from memstream_cli.stack.locate import Endpoints

GROUPS: dict[str, tuple[str, ...]] = {
    SEQUENCER_GROUP: (RAW,),
    ARCHIVER_GROUP: (LEDGER,),
    RETROSPECTIVE_GROUP: (LEDGER, CHECKOUTS),
    LATENTS_GROUP: (LEDGER,),
}
# The component that runs a group; an embedded stack without it (spine only) has no such lag.
RUN_BY = {RETROSPECTIVE_GROUP: "retrospective", LATENTS_GROUP: "latent-builder"}


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except Exception:
        return False


def _pid_alive(pid: int) -> bool:
    try:
        import os

        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _lag(bootstrap: str, group: str, topics: tuple[str, ...]) -> dict[str, Any]:
    """``{"topic", "total", "partitions"}``; a group over several topics names them joined
    and keys its partitions ``topic[p]``."""
    name = ", ".join(topics)
    try:
        per_topic = {t: group_lag(bootstrap, group, t, 5) for t in topics}
    except Exception as exc:
        return {"topic": name, "error": str(exc)}
    if len(topics) == 1:
        parts: dict[Any, int] = dict(per_topic[topics[0]])
    else:
        parts = {f"{t}[{p}]": n for t, lag in per_topic.items() for p, n in lag.items()}
    return {"topic": name, "total": sum(parts.values()), "partitions": parts}


def collect_status(ep: Endpoints) -> dict[str, Any]:
    """``{"kafka": {...}, "metrics_endpoints": [...], "components": {...}, "lag": {...}}``."""
    components: dict[str, Any] = {}
    try:
        md = AdminClient({"bootstrap.servers": ep.kafka_bootstrap}).list_topics(timeout=3)
        kafka_ok, topics = True, sorted(t for t in md.topics if not t.startswith("__"))
    except Exception:
        kafka_ok, topics = False, []
    components["kafka"] = {"healthy": kafka_ok, "topics": topics}
    lag: dict[str, Any] = {}
    if kafka_ok:
        for group, read in GROUPS.items():
            runner = RUN_BY.get(group)
            if ep.stack is not None and runner is not None and runner not in ep.stack.components:
                continue
            lag[group] = _lag(ep.kafka_bootstrap, group, read)
    metrics: list[str] = []
    if ep.stack is not None:
        metrics = list(ep.stack.metrics_endpoints)
        secret = ep.graph_password
        password = secret.get_secret_value() if secret is not None else None
        try:
            graph = redis.Redis.from_url(ep.stack.falkordb_url, socket_timeout=2, password=password)
            graph_ok = bool(graph.ping())
        except Exception:
            graph_ok = False
        components["falkordb"] = {"healthy": graph_ok, "url": ep.stack.falkordb_url}
        for name, c in ep.stack.components.items():
            if name in ("tansu", "falkordb"):
                components.setdefault(name, {})["pid"] = c.pid
                continue
            healthy = _pid_alive(c.pid) and (c.metrics_url is None or _http_ok(c.metrics_url))
            components[name] = {"healthy": healthy, "pid": c.pid, "metrics_url": c.metrics_url}
        components["tansu"] = components.pop("kafka") | components.get("tansu", {})
        kafka_key = "tansu"
    else:
        kafka_key = "kafka"
    if ep.api_url:
        components.setdefault("api", {})["healthy"] = _http_ok(f"{ep.api_url}/healthz")
        components["api"]["url"] = ep.api_url
    return {
        "kafka": {"bootstrap": ep.kafka_bootstrap, "healthy": components[kafka_key]["healthy"]},
        "metrics_endpoints": metrics,
        "components": components,
        "lag": lag,
        "healthy": all(bool(c.get("healthy", True)) for c in components.values()),
    }
