"""Each tenant's entity lexicon for the planner, rebuilt in the background once it is old.

Building a lexicon reads every entity of the tenant from the graph: at a million events that
read was the plan phase's p95. A lexicon older than ``ttl`` keeps serving while one refresh
per key rebuilds it on another thread; only a tenant's first checkout (or one that asks for
a fresh lexicon, e.g. a read after its own write) waits for the read. After a refresh that
failed (logged), the next checkout of that key rebuilds it itself, so an error that persists
reaches a request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from memstream.checkout.plan.entities import Lexicon

log = logging.getLogger(__name__)

MAX_KEYS = 1000  # lexicons kept (version x tenant); past it the cache starts again

_REFRESH = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lexicon-refresh")


@dataclass(frozen=True)
class _Entry:
    built_at: float
    lexicon: Lexicon


class Lexicons:
    """Lexicons by key, reused ``ttl`` seconds, then refreshed without making a reader wait."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}
        self._refreshing: dict[Hashable, Future[None]] = {}

    def get(self, key: Hashable, build: Callable[[], Lexicon], fresh: bool = False) -> Lexicon:
        """The lexicon of ``key``: built now when there is none (or ``fresh``), else the one
        kept, with a refresh started when it is older than ``ttl``."""
        with self._lock:
            failed = self._refreshing.get(key)
            if failed is not None and failed.done():
                del self._refreshing[key]  # a refresh ends by removing itself unless it raised
            else:
                failed = None
            entry = self._entries.get(key)
        if failed is not None and (error := failed.exception()) is not None:
            log.warning(
                "lexicon refresh of %s failed; rebuilding in the request", key, exc_info=error
            )
            return self._built(key, build)
        if entry is None or fresh:
            return self._built(key, build)
        if self._clock() - entry.built_at >= self.ttl:
            self._refresh(key, build)
        return entry.lexicon

    def settle(self) -> None:
        """Wait for the refreshes in flight (tests, shutdown)."""
        with self._lock:
            pending = list(self._refreshing.values())
        wait(pending)

    def _built(self, key: Hashable, build: Callable[[], Lexicon]) -> Lexicon:
        started = self._clock()
        lexicon = build()
        with self._lock:
            kept = self._entries.get(key)
            if kept is None or kept.built_at <= started:  # never replace a newer one
                if len(self._entries) >= MAX_KEYS:
                    self._entries.clear()
                self._entries[key] = _Entry(started, lexicon)
        return lexicon

    def _refresh(self, key: Hashable, build: Callable[[], Lexicon]) -> None:
        with self._lock:
            if key in self._refreshing:
                return
            done: Future[None] = _REFRESH.submit(self._rebuild, key, build)
            self._refreshing[key] = done

    def _rebuild(self, key: Hashable, build: Callable[[], Lexicon]) -> None:
        self._built(key, build)
        with self._lock:  # done without an error: nothing to report to a reader
            self._refreshing.pop(key, None)
