"""The API's view of purges: requested, and how long the oldest unfinished one has waited."""

from __future__ import annotations

import threading
import time

from prometheus_client import Counter, Gauge

PURGES = Counter(
    "memstream_purges_total",
    "Purges asked of the API, by outcome (dry_run, complete, incomplete = some store had not "
    "obeyed the tombstone when the request answered)",
    ["component", "outcome"],
)
PURGE_PENDING_OLDEST = Gauge(
    "memstream_purge_pending_oldest_seconds",
    "Age of the oldest purge not yet obeyed by every watched store (0 = none pending)",
    ["component"],
)


class PendingPurges:
    """Tombstones whose stores have not all converged yet, for the pending-age gauge."""

    def __init__(self, component: str) -> None:
        self._since: dict[str, float] = {}
        self._lock = threading.Lock()
        PURGE_PENDING_OLDEST.labels(component).set_function(self.oldest_age)

    def add(self, tombstone_id: str) -> None:
        with self._lock:
            self._since.setdefault(tombstone_id, time.monotonic())

    def done(self, tombstone_id: str) -> None:
        with self._lock:
            self._since.pop(tombstone_id, None)

    def oldest_age(self) -> float:
        with self._lock:
            return time.monotonic() - min(self._since.values()) if self._since else 0.0
