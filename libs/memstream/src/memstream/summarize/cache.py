"""The summary cache: entries keyed by query, tenant, candidate ids and model, with a TTL.

A cache, not memory: losing it costs LLM calls, nothing else. A purge drops the entries whose
candidates include purged items (``drop``), so a summary never outlives its sources.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from memstream.summarize.model import Synthesis


def cache_key(
    query: str, tenant: str, candidate_ids: Sequence[str], model: str, max_tokens: int
) -> str:
    """sha256(query | tenant | top-k ids | model | max_tokens), hex.

    ``max_tokens`` is part of it: a short budget must not be answered with a long summary.
    """
    parts = [query, tenant, ",".join(candidate_ids), model, str(max_tokens)]
    # Length-prefixed parts: "a|b" + "c" and "a" + "b|c" must not collide.
    canonical = "".join(f"{len(p)}:{p}|" for p in parts)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class _Entry:
    tenant: str
    candidate_ids: frozenset[str]
    stored_at: float
    value: Synthesis


class SummaryCache:
    """A bounded TTL cache, thread-safe; ``clock`` gives seconds (monotonic in production)."""

    def __init__(self, ttl_s: float, clock: Callable[[], float], max_entries: int = 4096) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self.max_entries = max_entries
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Synthesis | None:
        """The live entry under ``key``, else None (an expired one is removed)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if self.clock() - entry.stored_at >= self.ttl_s:
                del self._entries[key]
                return None
            return entry.value

    def put(self, key: str, tenant: str, candidate_ids: Sequence[str], value: Synthesis) -> None:
        """Store (or replace) ``value``; the oldest entries go beyond ``max_entries``."""
        entry = _Entry(tenant, frozenset(candidate_ids), self.clock(), value)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = entry
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def count(self, tenant: str, memory_ids: Collection[str] | None = None) -> int:
        """How many entries ``drop`` would remove (a purge's dry run)."""
        with self._lock:
            return len(self._matching(tenant, memory_ids))

    def held(self, tenant: str, ids: Collection[str], subject_key: str) -> int:
        """How many entries a purge of ``ids`` forgets (:class:`memstream.forget.Forgetting`)."""
        return self.count(tenant, ids)

    def forget(self, tenant: str, ids: Collection[str], subject_key: str) -> int:
        """A purge: forget the entries resting on any of ``ids``; how many went."""
        return self.drop(tenant, ids)

    def drop(self, tenant: str, memory_ids: Collection[str] | None = None) -> int:
        """Purge hook: remove the tenant's entries whose candidates include any of
        ``memory_ids`` (every entry of the tenant when None); returns how many went."""
        with self._lock:
            doomed = self._matching(tenant, memory_ids)
            for key in doomed:
                del self._entries[key]
        return len(doomed)

    def _matching(self, tenant: str, memory_ids: Collection[str] | None) -> list[str]:
        ids = None if memory_ids is None else frozenset(memory_ids)
        return [
            key
            for key, e in self._entries.items()
            if e.tenant == tenant and (ids is None or e.candidate_ids & ids)
        ]

    def __len__(self) -> int:
        return len(self._entries)
