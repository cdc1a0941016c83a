"""``VectorIndex`` on Qdrant Edge, split into shards by tenant.

Every search filters on one tenant. In one shard holding every tenant, the engine checks that
filter point by point and walks postings that hold every tenant's points: at 1M points (8
tenants), a checkout's seven searches took 84 ms on the shared shard and 34 ms on a shard
holding one tenant's 131k points (measured on copies of the same points). Here a tenant's
points live in shard ``hash(tenant) mod shards``: its searches scan its own shard and the few
tenants that share it, never the rest. Each shard is an :class:`EdgeVectorIndex` (its
lifecycle, compaction and purges unchanged); the tenant filter stays on every search, so a
tenant finds the same points, with the same scores, in either layout.

The cost is memory: Edge maps each shard's preallocated files (vector chunks, payload pages,
WAL) whole, ~100 MB per shard in use however few points it holds (measured at 100k points:
the API's file-backed RSS 383 MB in one shard, 1.1 GB in eight). Hence few shards, each
shared by many tenants when there are many.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import threading
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from memstream.records.projected import VectorHit, VectorPoint
from memstream.vectors.edge import EdgeVectorIndex, shared_payloads
from memstream.vectors.port import IndexUnavailable, Search, VectorIndex, VectorRefused

SHARDS_FILE = "SHARDS"  # the layout's mark: the shard count the collection was made with
_SHARD_DIR = re.compile(r"^shard-(\d+)(?:\.old)?$")  # ``.old``: a compaction cut short


def is_sharded(path: Path) -> bool:
    """True when ``path`` holds a collection in this layout, or none yet: not one shard, nor
    one set aside by a compaction cut short (``EdgeVectorIndex`` puts it back on open)."""
    if (path / SHARDS_FILE).is_file():
        return True
    one = path.is_dir() and any(path.iterdir())
    return not one and not path.with_name(path.name + ".old").exists()


@functools.lru_cache(maxsize=4096)  # a hash per point was ~5% of an upsert
def shard_of(tenant: str, shards: int) -> int:
    """The shard holding ``tenant``'s points: stable across processes and restarts."""
    digest = hashlib.sha256(tenant.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % shards


class EdgeTenantShards(VectorIndex):
    """Points of each tenant in one of ``shards`` Edge shards, made when first written.

    The shard count is fixed when the collection is made (written to ``SHARDS``); an existing
    collection keeps its own whatever ``shards`` says. Thread-safe as each shard is. The
    payload cache (``payload_cache`` points) is shared by the shards.
    """

    def __init__(
        self,
        path: Path,
        collection: str,
        dim: int,
        *,
        shards: int = 8,
        batch_size: int = 1024,
        payload_cache: int = 0,
    ) -> None:
        if shards < 1:
            raise ValueError("shards must be at least 1")
        self.path = Path(path)
        self.collection = collection
        self.dim = dim
        self.batch_size = batch_size
        self.shards = self._recorded() or shards
        self._payloads = shared_payloads(payload_cache)
        self._lock = threading.Lock()
        self._open: dict[int, EdgeVectorIndex] = {}
        self._closed = False
        self._marked = False

    def _recorded(self) -> int | None:
        mark = self.path / SHARDS_FILE
        return int(mark.read_text().strip()) if mark.is_file() else None

    def _mark(self) -> None:
        """Write ``SHARDS`` once (atomically: a reader never sees it half written)."""
        with self._lock:
            if self._marked:
                return
            if self._recorded() is None:
                self.path.mkdir(parents=True, exist_ok=True)
                tmp = self.path / f"{SHARDS_FILE}.{os.getpid()}.tmp"
                tmp.write_text(f"{self.shards}\n")
                tmp.replace(self.path / SHARDS_FILE)
            self._marked = True

    def _shard(self, n: int) -> EdgeVectorIndex:
        with self._lock:
            if self._closed:
                raise IndexUnavailable(f"vector index {self.collection!r} is closed")
            index = self._open.get(n)
            if index is None:
                index = self._open[n] = EdgeVectorIndex(
                    self.path / f"shard-{n:03d}",
                    f"{self.collection}/{n}",
                    self.dim,
                    batch_size=self.batch_size,
                    payloads=self._payloads,
                )
            return index

    def _for(self, tenant: str) -> EdgeVectorIndex:
        return self._shard(shard_of(tenant, self.shards))

    def _present(self) -> list[EdgeVectorIndex]:
        """Every shard on disk or open (for what spans tenants)."""
        found = set(self._open)
        if self.path.is_dir():
            names = [_SHARD_DIR.match(p.name) for p in self.path.iterdir()]
            found |= {int(m.group(1)) for m in names if m}
        return [self._shard(n) for n in sorted(found)]

    # -- lifecycle -------------------------------------------------------------------------

    def ensure(self) -> None:
        """Make the collection's directory and mark its layout; shards come with their points."""
        if self._closed:
            raise IndexUnavailable(f"vector index {self.collection!r} is closed")
        self._mark()

    def optimize(self) -> bool:
        """Build HNSW in every shard (see :meth:`EdgeVectorIndex.optimize`)."""
        return any([index.optimize() for index in self._present()])

    def flush(self) -> None:
        for index in self._present():
            index.flush()

    def close(self) -> None:
        """Close every shard; later calls raise ``IndexUnavailable``."""
        with self._lock:
            self._closed = True
            opened = list(self._open.values())
        for index in opened:
            index.close()

    def drop(self) -> None:
        """Delete the whole collection; ``ensure``/``upsert`` make it again."""
        for index in self._present():
            index.drop()
        with self._lock:
            self._open.clear()
            self._marked = False
        shutil.rmtree(self.path, ignore_errors=True)

    def compact(self) -> None:
        for index in self._present():
            index.compact()

    # -- writes ----------------------------------------------------------------------------

    def upsert(self, points: list[VectorPoint]) -> None:
        """Each point into its tenant's shard (payload ``tenant``; a point without one is
        refused, since no shard is its own)."""
        by_shard: dict[int, list[VectorPoint]] = {}
        for p in points:
            tenant = p.payload.get("tenant")
            if not isinstance(tenant, str):
                raise VectorRefused(f"{p.point_key}: payload has no tenant", in_data=True)
            by_shard.setdefault(shard_of(tenant, self.shards), []).append(p)
        if by_shard:
            self._mark()
        for n, chunk in sorted(by_shard.items()):
            self._shard(n).upsert(chunk)

    def delete_where(self, tenant: str, key: str, value: str) -> int:
        return self._for(tenant).delete_where(tenant, key, value)

    def delete(self, point_keys: list[str]) -> None:
        """A key names its tenant in a form only its writer knows: asked of every shard."""
        for index in self._present():
            index.delete(point_keys)

    def purge_events(self, tenant: str, event_ids: list[str]) -> dict[str, int]:
        return self._for(tenant).purge_events(tenant, event_ids)

    # -- reads -----------------------------------------------------------------------------

    def count(self, tenant: str | None = None, kinds: list[str] | None = None) -> int:
        if tenant is not None:
            return self._for(tenant).count(tenant, kinds)
        return sum(index.count(None, kinds) for index in self._present())

    def query_batch(
        self,
        tenant: str,
        dense: list[float] | None,
        text: str | None,
        searches: list[Search],
        as_of: datetime | None = None,
        related: Mapping[str, float] | None = None,
    ) -> list[list[VectorHit]]:
        index = self._for(tenant)
        return index.query_batch(tenant, dense, text, searches, as_of, related)

    def recent(
        self,
        tenant: str,
        limit: int,
        streams: list[str] | None = None,
        as_of: datetime | None = None,
        agents: list[str] | None = None,
        users: list[str] | None = None,
    ) -> list[VectorHit]:
        return self._for(tenant).recent(tenant, limit, streams, as_of, agents, users)

    def at(self, tenant: str, stream: str, seqs: list[int]) -> list[VectorHit]:
        return self._for(tenant).at(tenant, stream, seqs)

    def keyed_by(self, tenant: str, event_ids: list[str]) -> list[VectorHit]:
        return self._for(tenant).keyed_by(tenant, event_ids)

    def holding(self, tenant: str, event_ids: list[str]) -> int:
        return self._for(tenant).holding(tenant, event_ids)
