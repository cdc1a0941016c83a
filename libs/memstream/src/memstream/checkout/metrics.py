"""Checkout metrics: latency, packet size, answerability (``component="checkout"``)."""

from __future__ import annotations

from typing import get_args

from prometheus_client import Counter, Histogram

from memstream.records.packet import Answerability

COMPONENT = "checkout"

_SECONDS = Histogram(
    "memstream_checkout_seconds",
    "Checkout latency inside the service (retrieval, synthesis, assembly)",
    ["component"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
_TOKENS = Histogram(
    "memstream_packet_tokens",
    "Tokens in returned checkout packets",
    ["component"],
    buckets=(64, 128, 256, 512, 768, 1024, 1500, 2048, 4096, 8192),
)
_ANSWERABILITY = Counter(
    "memstream_checkout_answerability_total",
    "Checkout packets by answerability",
    ["component", "answerability"],
)

# Call sites observe without naming the component: these are the bound children.
CHECKOUT_SECONDS = _SECONDS.labels(COMPONENT)
PACKET_TOKENS = _TOKENS.labels(COMPONENT)


class _ByAnswerability:
    """``ANSWERABILITY.labels(value)`` with the component already bound."""

    def labels(self, answerability: str) -> Counter:
        return _ANSWERABILITY.labels(COMPONENT, answerability)


ANSWERABILITY = _ByAnswerability()
# Every outcome exists from the start, so ratios and rates are 0, not "no data".
for _value in get_args(Answerability):
    ANSWERABILITY.labels(_value)
