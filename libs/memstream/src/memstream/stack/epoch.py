"""The broker epoch: ``<data dir>/broker-epoch`` changes whenever the embedded broker starts.

The embedded broker keeps its log in memory, so one that restarts comes back empty; the
supervisor gives it its topics and the ledger (from the archive) and only then writes a new
epoch: the wall time (ns) at which that broker was started. A process that outlives the
broker (the API) watches the epoch to drop what pointed into the old log: consumer
positions, the producer's identity, sends not yet acknowledged. Without an embedded broker
the file never exists and the epoch never changes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

EPOCH_FILE = "broker-epoch"


def read_epoch(data_dir: Path) -> str:
    """The current epoch; empty when no broker was started for this data dir."""
    try:
        return (data_dir / EPOCH_FILE).read_text().strip()
    except FileNotFoundError:
        return ""


def new_epoch(data_dir: Path, started_ns: int | None = None) -> str:
    """Record that a fresh broker, started at ``started_ns`` (default: now), is ready; written
    atomically, so a reader never sees half a value."""
    epoch = str(started_ns if started_ns is not None else time.time_ns())
    tmp = data_dir / f".{EPOCH_FILE}.tmp"
    tmp.write_text(epoch + "\n")
    os.replace(tmp, data_dir / EPOCH_FILE)
    return epoch


class EpochWatch:
    """Tells, each time it is asked, whether the broker restarted since it last looked."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.seen = read_epoch(data_dir)

    def changed(self) -> bool:
        now = read_epoch(self.data_dir)
        if now == self.seen:
            return False
        self.seen = now
        return True

    @property
    def started(self) -> float:
        """When the current broker was started (wall seconds; 0 when unknown)."""
        return int(self.seen) / 1e9 if self.seen.isdigit() else 0.0
