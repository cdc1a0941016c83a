"""``projections list``: versions with counts and lag, read from the running stack."""

from __future__ import annotations

from typing import Any

from memstream.graph.factory import open_graph_store
from memstream.kafka.reading import end_offsets, group_lag
from memstream.kafka.topics import LATENTS, LEDGER
from memstream.metrics import scrape
from memstream.projection.versions import FileProjectionRegistry, registry_path
from memstream.settings import Settings


def vector_points(metrics_urls: list[str]) -> dict[str, int]:
    """Points per version, from whichever process exports ``memstream_projection_points``."""
    samples = scrape(metrics_urls, {"memstream_projection_points"})
    return {x.labels["version"]: int(x.value) for x in samples}


def _lag(bootstrap: str, group: str) -> int:
    """What a projection group has still to read: ledger entries and latent artifacts."""
    return sum(sum(group_lag(bootstrap, group, topic).values()) for topic in (LEDGER, LATENTS))


def projection_status(
    settings: Settings, bootstrap: str, metrics_urls: list[str]
) -> dict[str, Any]:
    """``{"versions": [{"name", "live", "status", "config_hash", "counts", "lag"}]}``."""
    reg = FileProjectionRegistry(registry_path(settings.data_dir)).load()
    ledger_events = sum(end_offsets(bootstrap, LEDGER).values())
    points = vector_points(metrics_urls)
    versions = []
    for name, info in sorted(reg.versions.items()):
        store = open_graph_store(settings, info.graph_namespace)
        g = store.counts()
        graph_lag = _lag(bootstrap, info.graph_group)
        vector_lag = _lag(bootstrap, info.vector_group)
        versions.append(
            {
                "name": name,
                "live": reg.live == name,
                "status": info.status,
                "config_hash": info.config_hash,
                "config": info.config.model_dump(),
                "counts": {
                    "ledger_events": ledger_events,
                    "graph_events": g.get("events", 0),
                    "entities": g.get("entities", 0),
                    "facts": g.get("facts", 0),
                    "vector_points": points.get(name, 0),
                },
                "lag": {"graph": graph_lag, "vector": vector_lag, "total": graph_lag + vector_lag},
            }
        )
    return {"live": reg.live, "versions": versions}
