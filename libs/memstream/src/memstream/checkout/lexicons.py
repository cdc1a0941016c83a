"""Each tenant's entity lexicon for the planner, rebuilt in the background once it is old.

Building a lexicon reads every entity of the tenant from the graph: at a million events that
read was the plan phase's p95. A lexicon older than ``ttl`` keeps serving while one refresh
per key rebuilds it on another thread; only a tenant's first checkout (or one that asks for
a fresh lexicon, e.g. a read after its own write) waits for the read, and so does a
checkout finding its lexicon older than ``limit`` (a tenant idle for a while gets the
names it learnt meanwhile). After a refresh that failed (logged), the next checkout of that
key rebuilds it itself, so an error that persists reaches a request. A purge forgets the
tenant's lexicons, and a refresh that read before the purge does not bring one back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from memstream.checkout.plan.entities import Lexicon

log = logging.getLogger(__name__)

MAX_KEYS = 1000  # lexicons kept (version x tenant); past it the cache starts again
Key = tuple[str, str]  # (projection version, tenant)

_REFRESH = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lexicon-refresh")


@dataclass(frozen=True)
class _Entry:
    built_at: float
    lexicon: Lexicon


class Lexicons:
    """Lexicons by key, reused ``ttl`` seconds, then refreshed without making a reader wait
    (up to ``limit`` seconds old; older, the reader rebuilds it)."""

    def __init__(
        self, ttl: float, limit: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self.limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[Key, _Entry] = {}
        self._refreshing: dict[Key, Future[None]] = {}
        # purges so far: a build that saw a purge happen while it read is not kept (whoever
        # was purged; purges are rare and the next reader builds again)
        self._purges = 0

    def get(self, key: Key, build: Callable[[], Lexicon], fresh: bool = False) -> Lexicon:
        """The lexicon of ``key``: built now when there is none (or ``fresh``, or it is older
        than ``limit``), else the one kept, with a refresh started when it is older than
        ``ttl``."""
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
        age = self._clock() - entry.built_at if entry is not None else self.limit
        if entry is None or fresh or age >= self.limit:
            return self._built(key, build)
        if age >= self.ttl:
            self._refresh(key, build)
        return entry.lexicon

    def forget(self, tenant: str) -> None:
        """Drop the tenant's lexicons (a purge: its names may not resolve again)."""
        with self._lock:
            self._purges += 1
            for key in [k for k in self._entries if k[1] == tenant]:
                del self._entries[key]

    def settle(self) -> None:
        """Wait for the refreshes in flight (tests)."""
        with self._lock:
            pending = list(self._refreshing.values())
        wait(pending)

    def _built(self, key: Key, build: Callable[[], Lexicon]) -> Lexicon:
        with self._lock:
            started, purges = self._clock(), self._purges
        lexicon = build()
        with self._lock:
            kept = self._entries.get(key)
            # never keep one read before a purge, nor replace a newer one
            if self._purges == purges and (kept is None or kept.built_at <= started):
                if len(self._entries) >= MAX_KEYS:
                    self._entries.clear()
                self._entries[key] = _Entry(started, lexicon)
        return lexicon

    def _refresh(self, key: Key, build: Callable[[], Lexicon]) -> None:
        with self._lock:
            if key in self._refreshing:
                return
            done: Future[None] = _REFRESH.submit(self._rebuild, key, build)
            self._refreshing[key] = done

    def _rebuild(self, key: Key, build: Callable[[], Lexicon]) -> None:
        self._built(key, build)
        with self._lock:  # done without an error: nothing to report to a reader
            self._refreshing.pop(key, None)
