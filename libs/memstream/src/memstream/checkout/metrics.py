"""Checkout metrics: latency, packet size, answerability."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

CHECKOUT_SECONDS = Histogram(
    "memstream_checkout_seconds",
    "Checkout latency inside the service (retrieval, synthesis, assembly)",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
PACKET_TOKENS = Histogram(
    "memstream_packet_tokens",
    "Tokens in returned checkout packets",
    buckets=(64, 128, 256, 512, 768, 1024, 1500, 2048, 4096, 8192),
)
ANSWERABILITY = Counter(
    "memstream_checkout_answerability_total", "Checkout packets by answerability", ["answerability"]
)
