"""Parsed latent artifacts, reused briefly: reading and parsing their documents (each lists
up to hundreds of source refs) was a checkout's slowest step (p95 ~200 ms at 100k events)."""

from __future__ import annotations

import time
from collections.abc import Callable, Set

from memstream.checkout.latents import MAX_REFS as ITEM_REFS
from memstream.graph.port import GraphReader
from memstream.latent.weave import MAX_REFS as WEAVE_REFS
from memstream.records.latent import LatentArtifact
from memstream.records.projected import VectorHit

# The source refs of an artifact that a packet or a weave cites; lineage reads them all.
CITED_REFS = max(ITEM_REFS, WEAVE_REFS)


class ArtifactCache:
    """Artifacts by (version, tenant, id) for ``ttl`` seconds, at most ``limit`` (then all
    go); a purge forgets a tenant's at once."""

    def __init__(
        self,
        ttl: float = 5.0,
        limit: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl, self.limit, self.clock = ttl, limit, clock
        self._parsed: dict[tuple[str, str, str], tuple[float, LatentArtifact]] = {}

    def current(
        self, graph: GraphReader, version: str, tenant: str, hits: list[VectorHit]
    ) -> list[LatentArtifact]:
        """The current (not stale) artifacts behind latent ``hits``, best first."""
        ids = list(dict.fromkeys(str(h.payload.get("artifact_id")) for h in hits))
        now = self.clock()
        known: dict[str, LatentArtifact] = {}
        for i in ids:
            cached = self._parsed.get((version, tenant, i))
            if cached is not None and now - cached[0] < self.ttl:
                known[i] = cached[1]
        if missing := [i for i in ids if i not in known]:
            if len(self._parsed) > self.limit:
                self._parsed.clear()
            for a in graph.latents_by_id(tenant, missing, refs=CITED_REFS):
                self._parsed[(version, tenant, a.artifact_id)] = (now, a)
                known[a.artifact_id] = a
        return [known[i] for i in ids if i in known and known[i].stale_at is None]

    def put(self, version: str, tenant: str, artifact: LatentArtifact, at: float) -> None:
        """Hold ``artifact`` as parsed at ``at``."""
        self._parsed[(version, tenant, artifact.artifact_id)] = (at, artifact)

    def held(self, tenant: str, ids: Set[str], subject_key: str) -> int:
        """How many of ``tenant``'s artifacts a purge would forget: all of them (cheap to
        read again; which derive from the subject is the graph's to say)."""
        return sum(1 for k in list(self._parsed) if k[1] == tenant)

    def forget(self, tenant: str, ids: Set[str] = frozenset(), subject_key: str = "") -> int:
        """Forget every artifact of ``tenant``; how many went."""
        # list() copies the keys in one step: checkouts on other threads insert meanwhile
        doomed = [k for k in list(self._parsed) if k[1] == tenant]
        for key in doomed:
            self._parsed.pop(key, None)
        return len(doomed)
