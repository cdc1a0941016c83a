"""summarize_recall metrics: LLM calls, latency, tokens, cache hits, tokens saved.

``memstream_llm_*`` describe the provider calls; ``memstream_summarize_*`` what callers got.
Tokens saved vs raw recall = rate(raw_tokens) - rate(summary_tokens): two counters, since one
counter cannot go down when a summary happens to be longer than its candidates.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

OUTCOMES = ("ok", "error")
CACHE_RESULTS = ("hit", "miss")

LLM_CALLS = Counter(
    "memstream_llm_calls_total",
    "LLM provider calls by provider, model and outcome (ok, error)",
    ["provider", "model", "outcome"],
)
LLM_SECONDS = Histogram(
    "memstream_llm_call_seconds",
    "LLM provider call latency, errors included",
    ["provider", "model"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 1.5, 2.5, 5, 10, 30, 60),
)
LLM_TOKENS = Counter(
    "memstream_llm_tokens_total",
    "Tokens the provider reported, by direction (in = prompt, out = completion)",
    ["provider", "model", "direction"],
)
CACHE = Counter(
    "memstream_summarize_cache_total",
    "summarize_recall lookups of the summary cache by result (hit, miss)",
    ["result"],
)
RAW_TOKENS = Counter(
    "memstream_summarize_raw_tokens_total",
    "Tokens of the recalled candidates' texts (what raw recall would have returned)",
)
SUMMARY_TOKENS = Counter(
    "memstream_summarize_summary_tokens_total",
    "Tokens of the summaries returned instead",
)
UNSUPPORTED = Counter(
    "memstream_summarize_unsupported_citations_total",
    "Unsupported sentences of summaries: uncited, or citing ids that were not recalled "
    "(dropped from the answer)",
)


def init(provider: str, model: str) -> None:
    """Create every series up front, so rates and ratios are 0, not "no data"."""
    for outcome in OUTCOMES:
        LLM_CALLS.labels(provider, model, outcome)
    for direction in ("in", "out"):
        LLM_TOKENS.labels(provider, model, direction)
    LLM_SECONDS.labels(provider, model)
    for result in CACHE_RESULTS:
        CACHE.labels(result)
