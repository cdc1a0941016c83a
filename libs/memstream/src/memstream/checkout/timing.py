"""Milliseconds per step of one request, read off one clock."""

from __future__ import annotations

import time
from collections.abc import Callable


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


class Laps:
    """Each :meth:`lap` records the time since the previous one (or the start) under a name."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.started = self._last = clock()
        self.ms: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = self.clock()
        self.ms[name] = ms(now - self._last)
        self._last = now

    def elapsed(self) -> float:
        """Seconds since the start."""
        return self.clock() - self.started
