"""Learning metrics: the retrospective pass and feedback (``memstream_retrospective_*``).

Every label value exists at 0 from start-up, so rates and ratios read 0, not "no data".
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

RESULTS = ("bound", "late", "unbound", "ignored")
SOURCES = ("explicit", "retrospective")

OUTCOMES_SEEN = Counter(
    "memstream_retrospective_outcomes_seen_total",
    "task.outcome entries the retrospective pass read from the ledger",
    ["component"],
)
OUTCOMES = Counter(
    "memstream_retrospective_outcomes_total",
    "What became of each outcome: bound (every named packet found), late (bound after the "
    "grace with what existed), unbound (no checkout trace), ignored (nothing to learn)",
    ["component", "result"],
)
ASSIGNMENTS = Counter(
    "memstream_retrospective_assignments_total",
    "Memories credited (kind=credit) or blamed (kind=blame), by basis: used (named in "
    "used_ids) or spread (over a packet's answer support)",
    ["component", "kind", "basis"],
)
FEEDBACK_EVENTS = Counter(
    "memstream_feedback_events_total",
    "memory.feedback events produced, by source (explicit: POST /v1/feedback)",
    ["component", "source"],
)
PROPOSALS = Counter(
    "memstream_invalidation_proposals_total",
    "memory.invalidate proposals (review_status proposed) for memories that keep failing",
    ["component"],
)
INVALIDATIONS = Counter(
    "memstream_invalidations_total",
    "memory.invalidate events appended by the API: accepted (POST /v1/invalidate or a "
    "proposal accepted) or rejected (a proposal rejected)",
    ["component", "status"],
)
LAG = Histogram(
    "memstream_retrospective_lag_seconds",
    "From an outcome's ledger append to the pass settling it (includes waiting for traces)",
    ["component"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
WAITING = Gauge(
    "memstream_retrospective_waiting_outcomes",
    "Outcomes waiting for a checkout trace (the ledger is not committed past them)",
    ["component"],
)
TRACES = Gauge(
    "memstream_retrospective_traces",
    "Checkout traces in the retrospective pass's table",
    ["component"],
)


def init_retrospective(component: str) -> None:
    """Create the pass's series at 0."""
    OUTCOMES_SEEN.labels(component)
    for result in RESULTS:
        OUTCOMES.labels(component, result)
    for kind in ("credit", "blame"):
        for basis in ("used", "spread"):
            ASSIGNMENTS.labels(component, kind, basis)
    FEEDBACK_EVENTS.labels(component, "retrospective")
    PROPOSALS.labels(component)
    LAG.labels(component)
    WAITING.labels(component).set(0)
    TRACES.labels(component).set(0)
