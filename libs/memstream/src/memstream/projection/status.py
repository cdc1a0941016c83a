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


def live_version(status: dict[str, Any]) -> dict[str, Any] | None:
    """The live version's entry of ``projection_status()``, if one is live."""
    live = [v for v in status["versions"] if v["live"]]
    return live[0] if live else None


def caught_up(
    version: dict[str, Any], events: int | None = None, *, exact: bool = False, drained: bool = True
) -> bool:
    """Whether a version (an entry of ``projection_status()["versions"]``, as ``projections
    list --json`` prints it) has caught up with the ledger.

    Its graph and its vector index hold at least ``events`` ledger events (default: as many as
    the ledger holds). A purge leaves fewer projected than the ledger holds: pass 0 to rely on
    lag alone. ``exact``: the ledger, the graph and the vector index hold exactly ``events``
    (nothing projected twice). ``drained``: its groups have nothing left to read either; they
    commit after their writes, so this is what says the version is built, not the counts.
    """
    c = version["counts"]
    n = c["ledger_events"] if events is None else events
    held = (c["graph_events"], c["vector_points"])
    if exact:
        counted = c["ledger_events"] == n and all(x == n for x in held)
    else:
        counted = all(x >= n for x in held)
    return bool(counted and (not drained or version["lag"]["total"] == 0))
