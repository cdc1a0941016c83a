"""Latent builder metrics (``memstream_latent_*``); every series exists at 0 from start-up."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from memstream.records.altitudes import ARTIFACT_TYPES

BUILT = Counter(
    "memstream_latent_artifacts_built_total",
    "Latent artifacts built and sent to memory.latents, by type",
    ["component", "type"],
)
STALE = Counter(
    "memstream_latent_artifacts_stale_total",
    "Latent artifacts marked stale (a successor superseded them), by type",
    ["component", "type"],
)
CURRENT = Gauge(
    "memstream_latent_artifacts_current",
    "Current (not stale) latent artifacts the builder holds, by type",
    ["component", "type"],
)
ENTRIES = Counter(
    "memstream_latent_entries_total",
    "Ledger entries the latent builder read (re-reads after a restart not counted)",
    ["component"],
)
LAG = Histogram(
    "memstream_latent_builder_lag_seconds",
    "From a ledger entry's append to the builder sending the artifacts it changed",
    ["component"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)


def init_latents(component: str) -> None:
    for t in ARTIFACT_TYPES:
        if t != "memory_weave":  # built at checkout, never by the builder
            BUILT.labels(component, t)
            STALE.labels(component, t)
            CURRENT.labels(component, t).set(0)
    ENTRIES.labels(component)
    LAG.labels(component)
