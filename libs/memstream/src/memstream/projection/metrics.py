"""Projection metrics: freshness (ingested -> visible) and throughput per version."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

FRESHNESS = Histogram(
    "memstream_projection_freshness_seconds",
    "From ledger ingestion to visible in a projection",
    ["component", "projection", "version"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
PROJECTED = Counter(
    "memstream_projected_events_total",
    "Ledger events written to a projection",
    ["component", "projection", "version"],
)
PROJECTED_LATENTS = Counter(
    "memstream_projected_latents_total",
    "Latent artifact records (new, updated or gone stale) written to a projection",
    ["component", "projection", "version"],
)
POINTS = Gauge(
    "memstream_projection_points",
    "Event points in a version's vector collection, one per ledger event (all tenants)",
    ["component", "version"],
)
UNOPTIMIZED = Gauge(
    "memstream_vector_unoptimized_points",
    "Points written since the index (HNSW) was last built; queries scan them exhaustively",
    ["component", "version"],
)
OPTIMIZING = Gauge(
    "memstream_vector_optimizing",
    "1 while the vector index is being built (HNSW, segment merges)",
    ["component", "version"],
)
