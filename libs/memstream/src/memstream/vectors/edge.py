"""``VectorIndex`` on Qdrant Edge: the Qdrant engine in-process, one shard dir per collection."""

from __future__ import annotations

import shutil
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import orjson
import qdrant_edge as qe

from memstream.records.projected import VectorHit, VectorPoint
from memstream.vectors.port import (
    KEY_OF,
    KEYWORD_FIELDS,
    SEQ_FIELD,
    TIME_FIELD,
    IndexUnavailable,
    Search,
    VectorIndex,
    VectorRefused,
    check_query,
    event_point_key,
    keyword_filters,
    stored_hit,
    time_bound,
)
from memstream.vectors.sparse import (
    RRF_K,
    SparseVec,
    doc_vector,
    point_id,
    prefetch_limit,
    query_vector,
)

DENSE = "dense"
SPARSE = "bm25"
# A sparse search whose filter leaves fewer points than this scores them one by one instead of
# walking the query terms' postings, which hold every tenant's points: at 1M events a speaker
# lane (~16k points) took 48 ms through the postings and 24-30 ms scored directly. Both are
# exact; only the cost differs. A search-time setting: existing shards load with it.
SPARSE_FULL_SCAN = 20_000
# Each point's (tenant, kind) as one tenant-indexed keyword, and its speaker, entities, user,
# agent and stream within that scope as another. On Edge's plain segments the filter's most
# selective condition picks the points and every other condition is checked point by point (a
# dense scan of one tenant's 12.5k points: 2 ms on the tenant alone, 5 ms with the kind
# added). Every lane filters on tenant and kind, the speaker and mention lanes on a person,
# a scoped read on a user, agent or stream: one condition does the work of two or three.
# Tenants never hold "/" (they are Kafka keys).
SCOPE = "scope"
SCOPED_KEYS = "scope_keys"
# A shard whose points carry only the persons' keys (before scopes joined them) filters on
# tenant and kind until a ``compact`` stores every point again.
OLD_SCOPED_KEYS = "scoped_keys"
# The keyword filters with a key of their own in SCOPED_KEYS, the one a search picks first.
SCOPED_FIELDS = ("actor_key", "entity_keys", "user", "agent", "stream")


# Fields the engine filters or orders by stay payload fields of their own; the rest travel as
# one JSON string. Edge converts a payload from Python value by value (2-5 µs a string, so
# ~100 µs an event point, measured), and that was a quarter of the vector projector's time.
PACKED = "packed"
_RESERVED = frozenset({PACKED, SCOPE, SCOPED_KEYS, OLD_SCOPED_KEYS})
_FILTERED = frozenset(
    {"tenant", "event_id", "source_ids", KEY_OF, SEQ_FIELD, TIME_FIELD, *KEYWORD_FIELDS}
    | {SCOPE, SCOPED_KEYS}
)


def scope(tenant: str, kind: str) -> str:
    return f"{tenant}/{kind}"


def scoped_key(scope_: str, field: str, value: str) -> str:
    return f"{scope_}/{field}:{value}"


# the stub types ``Fusion.Rrf`` as its own class; the engine accepts it as a Fusion query
_RRF = cast(qe.Fusion, qe.Fusion.Rrf(k=RRF_K))


def _sparse(vec: SparseVec) -> qe.SparseVector:
    return qe.SparseVector(vec.indices, vec.values)


def _match(key: str, value: str) -> qe.FieldCondition:
    return qe.FieldCondition(key, match=qe.MatchValue(value))


def _any(key: str, values: list[str]) -> qe.FieldCondition:
    return qe.FieldCondition(key, match=qe.MatchAny(values))


@dataclass(eq=False)
class _Held:
    """One open shard and the reads in flight on it (guarded by the index's condition)."""

    shard: qe.EdgeShard
    scoped: bool  # see EdgeVectorIndex._index_payload
    readers: int = 0
    retired: bool = False  # replaced or closed: closes once ``readers`` reaches 0


class _Payloads:
    """Decoded payloads of recently found points, by point id, at most ``limit`` (least
    recently used out first). A checkout's batch finds ~250 points, ~90 of them distinct,
    and reading their payloads out of the engine and decoding them was over a third of the
    batch at 100k events (measured); searches then ask for ids only.

    A write drops what it touches after it is applied and moves ``generation`` on; a read
    stores what it fetched only when no write came since it began, so no payload a write
    replaced or deleted is ever served again.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.items: OrderedDict[Any, dict[str, Any]] = OrderedDict()
        self.generation = 0
        self.lock = threading.Lock()

    def known(self, ids: list[Any]) -> dict[Any, dict[str, Any]]:
        with self.lock:
            found = {i: p for i in ids if (p := self.items.get(i)) is not None}
            for i in found:
                self.items.move_to_end(i)
        return found

    def keep(self, fetched: dict[Any, dict[str, Any]], generation: int) -> None:
        with self.lock:
            if generation != self.generation:
                return
            self.items.update(fetched)
            while len(self.items) > self.limit:
                self.items.popitem(last=False)

    def drop(self, ids: list[Any] | None = None) -> None:
        """Forget ``ids`` (None: every point)."""
        with self.lock:
            self.generation += 1
            if ids is None:
                self.items.clear()
            for i in ids or []:
                self.items.pop(i, None)


def shared_payloads(limit: int) -> _Payloads | None:
    """A cache of ``limit`` decoded payloads to share between indexes (None when 0)."""
    return _Payloads(limit) if limit > 0 else None


class EdgeVectorIndex(VectorIndex):
    """Dense (cosine) + sparse BM25 (IDF) hybrid index on an ``EdgeShard`` at ``path``.

    Thread-safe. ``EdgeShard`` is a ``Sync`` PyO3 object that releases the GIL and
    synchronises internally (checked: concurrent upserts, deletes, ``optimize`` and queries
    from several threads, no errors, consistent counts). Queries run lock-free and in
    parallel; writes and open/close/drop/compact are serialised by one lock, so a projector
    thread and request handlers can share one instance. Use one instance per shard directory.

    A read holds the shard it started on until it ends: a compaction publishes the fresh
    shard at once (later reads take it) and closes the old one only after the reads still on
    it finish, so no read ever meets a closed or half-swapped shard. After ``close`` a read
    raises :class:`~memstream.vectors.port.IndexUnavailable`.

    IDF statistics are scoped to the querying tenant: tenants never influence each other's
    ranking. The shard never builds HNSW by itself: dense search is an exact scan (≈1 ms
    at 20k, ≈5 ms at 100k points) until ``optimize()`` runs.

    With ``payload_cache`` > 0, searches read point ids from the engine and payloads from a
    cache of that many points (see :class:`_Payloads`), fetching the missing ones in one call.
    ``payloads`` (see :func:`shared_payloads`) shares one cache between several indexes.
    """

    def __init__(
        self,
        path: Path,
        collection: str,
        dim: int,
        *,
        batch_size: int = 1024,
        payload_cache: int = 0,
        payloads: _Payloads | None = None,
    ) -> None:
        self.path = Path(path)
        self.collection = collection
        self.dim = dim
        self.batch_size = batch_size
        self._lock = threading.RLock()  # writes and lifecycle
        self._optimize_lock = threading.Lock()  # close/drop/compact wait for a running optimize
        self._readers = threading.Condition(threading.Lock())  # guards _held and its counts
        self._held: _Held | None = None
        self._closed = False
        # Purged event ids whose deleted points still lie in the shard's files, per tenant:
        # ``holding`` counts them until the next ``compact`` has replaced those files.
        self._owed: dict[str, set[str]] = {}
        self._owed_lock = threading.Lock()
        # ``payloads``: a cache shared with other shards (``EdgeTenantShards``); a write
        # to any of them drops what it touches in the one cache.
        self._payloads = payloads or (_Payloads(payload_cache) if payload_cache > 0 else None)

    def _forget(self, ids: list[qe.PointId] | None = None) -> None:
        """After a write: drop the cached payloads of the points ``ids`` (None: all). The
        engine answers ids as ``UUID``s, and the cache holds them so."""
        if self._payloads is not None:
            self._payloads.drop(None if ids is None else [uuid.UUID(str(i)) for i in ids])

    # -- lifecycle -------------------------------------------------------------------------

    def _config(self) -> qe.EdgeConfig:
        return qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine)},
            sparse_vectors={
                SPARSE: qe.EdgeSparseVectorParams(
                    modifier=qe.Modifier.Idf, full_scan_threshold=SPARSE_FULL_SCAN
                )
            },
        )

    def _has_data(self) -> bool:
        return self.path.is_dir() and any(self.path.iterdir())

    def _recover(self) -> None:
        """Finish or undo a compaction killed between its renames (see ``compact``): the old
        shard is whole until the fresh one holds its place, so it comes back if none does."""
        old = self.path.with_name(self.path.name + ".old")
        if not old.exists():
            return
        if self._has_data():
            shutil.rmtree(old)
        else:
            shutil.rmtree(self.path, ignore_errors=True)
            old.rename(self.path)

    def ensure(self) -> None:
        """Open the shard, creating it (and its payload indexes) if missing."""
        with self._lock:
            self._open(create=True)

    def _unavailable(self) -> IndexUnavailable:
        return IndexUnavailable(f"vector index {self.collection!r} is closed")

    def _open(self, *, create: bool) -> qe.EdgeShard | None:
        """The current shard, opened (or created) if need be; None when there is none and
        ``create`` is false. Callers hold ``_lock``."""
        held = self._held
        if held is not None:
            return held.shard
        if self._closed:
            raise self._unavailable()
        self._recover()
        if self._has_data():
            shard = qe.EdgeShard.load(str(self.path), self._config())
        elif create:
            self.path.mkdir(parents=True, exist_ok=True)
            shard = qe.EdgeShard.create(str(self.path), self._config())
        else:
            return None
        self._publish(_Held(shard, self._index_payload(shard)))
        return shard

    def _publish(self, held: _Held | None) -> _Held | None:
        """Make ``held`` the shard later reads take; returns the one it replaces."""
        with self._readers:
            old, self._held = self._held, held
            return old

    def _retire(self, held: _Held) -> None:
        """Close a replaced shard once the reads on it are over (callers hold ``_lock``; a
        read never waits on ``_lock`` while it holds a shard, so this cannot deadlock)."""
        with self._readers:
            held.retired = True
            self._readers.wait_for(lambda: held.readers == 0)
        held.shard.close()

    @contextmanager
    def _reading(self) -> Iterator[_Held | None]:
        """The current shard, held open for the block; None when the collection has none."""
        held = self._take()
        if held is None:
            with self._lock:  # not open yet in this process: open what is on disk
                self._open(create=False)
            held = self._take()
        try:
            yield held
        finally:
            if held is not None:
                with self._readers:
                    held.readers -= 1
                    if held.retired and held.readers == 0:
                        self._readers.notify_all()

    def _take(self) -> _Held | None:
        with self._readers:
            held = self._held
            if held is None:
                if self._closed:
                    raise self._unavailable()
                return None
            held.readers += 1
            return held

    @staticmethod
    def _index_payload(shard: qe.EdgeShard) -> bool:
        """Create the payload indexes; True when every point has its scope (a shard written
        before scopes existed keeps filtering on tenant and kind until a ``compact``)."""
        info = shard.info()
        have = info.payload_schema
        scoped = info.points_count == 0 or (SCOPE in have and SCOPED_KEYS in have)
        if scoped and SCOPE not in have:
            scope_params = qe.KeywordIndexParams(is_tenant=True)
            shard.update(qe.UpdateOperation.create_field_index(SCOPE, scope_params))
        if scoped and SCOPED_KEYS not in have:
            keyword = qe.PayloadSchemaType.Keyword
            shard.update(qe.UpdateOperation.create_field_index(SCOPED_KEYS, keyword))
        if "tenant" not in have:
            tenant_params = qe.KeywordIndexParams(is_tenant=True)
            shard.update(qe.UpdateOperation.create_field_index("tenant", tenant_params))
        for name in KEYWORD_FIELDS:
            if name not in have:
                keyword = qe.PayloadSchemaType.Keyword
                shard.update(qe.UpdateOperation.create_field_index(name, keyword))
        if SEQ_FIELD not in have:
            shard.update(
                qe.UpdateOperation.create_field_index(SEQ_FIELD, qe.PayloadSchemaType.Integer)
            )
        if TIME_FIELD not in have:
            when = qe.PayloadSchemaType.Datetime
            shard.update(qe.UpdateOperation.create_field_index(TIME_FIELD, when))
        return scoped

    def optimize(self) -> bool:
        """Build HNSW / merge segments; blocks the caller only (upserts and queries go on).

        Slow (≈20 s for 20k 256-d points on 2 cores): run it from an idle/background thread.
        """
        with self._optimize_lock, self._reading() as held:
            return held.shard.optimize() if held is not None else False

    def flush(self) -> None:
        with self._lock:
            if self._held is not None:
                self._held.shard.flush()

    def close(self) -> None:
        """Flush and close; reads still running finish first, later ones raise
        ``IndexUnavailable``."""
        with self._optimize_lock, self._lock:
            with self._readers:
                self._closed = True
            held = self._publish(None)
            if held is not None:
                held.shard.flush()
                self._retire(held)
            self._forget()

    def drop(self) -> None:
        """Delete the whole collection from disk; ``ensure``/``upsert`` recreate it."""
        with self._optimize_lock, self._lock:
            held = self._publish(None)
            if held is not None:
                self._retire(held)
            shutil.rmtree(self.path, ignore_errors=True)
            self._forget()
            self._settle()

    # -- writes ----------------------------------------------------------------------------

    def _point(self, p: VectorPoint) -> qe.Point:
        if len(p.dense) != self.dim:
            raise ValueError(f"{p.point_key}: dense has {len(p.dense)} dims, expected {self.dim}")
        vector: dict[str, qe.NamedVector] = {DENSE: p.dense}
        sparse = doc_vector(p.text)
        if sparse:
            vector[SPARSE] = _sparse(sparse)
        return qe.Point(point_id(p.point_key), vector, _stored(p.payload, p.point_key))

    def upsert(self, points: list[VectorPoint]) -> None:
        """Idempotent by ``point_key``; written in batches of ``batch_size``."""
        if not points:
            return
        # Writers take the shard under the lock: a compaction swaps it under the same lock.
        for start in range(0, len(points), self.batch_size):
            chunk = points[start : start + self.batch_size]
            batch = _converted(self._point, chunk)
            with self._lock:
                shard = self._open(create=True)
                assert shard is not None
                shard.update(qe.UpdateOperation.upsert_points(batch))
                self._forget([point_id(p.point_key) for p in chunk])

    def delete_where(self, tenant: str, key: str, value: str) -> int:
        """Delete the tenant's points whose payload ``key`` equals (or, for lists, contains)."""
        if key not in _FILTERED:  # a packed field: matched here, point by point
            return self._delete_packed(tenant, key, value)
        flt = qe.Filter(must=[_match("tenant", tenant), _match(key, value)])
        with self._lock:
            shard = self._open(create=False)
            if shard is None:
                return 0
            n = shard.count(qe.CountRequest(exact=True, filter=flt))
            if n:
                shard.update(qe.UpdateOperation.delete_points_by_filter(flt))
                self._forget()
        return n

    def _delete_packed(self, tenant: str, key: str, value: str) -> int:
        with self._lock:
            shard = self._open(create=False)
            if shard is None:
                return 0
            ids = [
                r.id
                for records in self._pages(shard, qe.Filter(must=[_match("tenant", tenant)]))
                for r in records
                if value in _values(_loaded(r.payload).get(key))
            ]
            if ids:
                shard.update(qe.UpdateOperation.delete_points(ids))
                self._forget(ids)
        return len(ids)

    def delete(self, point_keys: list[str]) -> None:
        """Delete the points with these keys (keys without a point are ignored)."""
        ids: list[qe.PointId] = [point_id(k) for k in point_keys]
        with self._lock:
            shard = self._open(create=False)
            if shard is None or not ids:
                return
            shard.update(qe.UpdateOperation.delete_points(ids))
            self._forget(ids)

    def purge_events(self, tenant: str, event_ids: list[str]) -> dict[str, int]:
        """See :meth:`memstream.vectors.port.VectorIndex.purge_events`."""
        ids = sorted(set(event_ids))
        events = qe.Filter(must=[_match("tenant", tenant), _any("event_id", ids)])
        derived = qe.Filter(must=[_match("tenant", tenant), _any("source_ids", ids)])
        with self._lock:
            shard = self._open(create=False)
            if shard is None or not ids:
                return {"points": 0, "latents": 0}
            points = shard.count(qe.CountRequest(exact=True, filter=events))
            latents = shard.count(qe.CountRequest(exact=True, filter=derived))
            keys: list[qe.PointId] = [point_id(event_point_key(tenant, i)) for i in ids]
            shard.update(qe.UpdateOperation.delete_points(keys))
            shard.update(qe.UpdateOperation.delete_points_by_filter(derived))
            self._forget()  # the derived points are known by filter only
            with self._owed_lock:
                self._owed.setdefault(tenant, set()).update(ids)
        return {"points": points, "latents": latents}

    def at(self, tenant: str, stream: str, seqs: list[int]) -> list[VectorHit]:
        """See :meth:`memstream.vectors.port.VectorIndex.at`."""
        wanted = sorted(set(seqs))
        with self._reading() as held:
            if held is None or not wanted:
                return []
            question = _Question.of(tenant, None, None, None, held.scoped)
            where = question.where(["event"], {"stream": [stream]})
            where.append(qe.FieldCondition(SEQ_FIELD, match=qe.MatchAny(wanted)))
            request = qe.ScrollRequest(
                limit=len(wanted), filter=qe.Filter(must=where), with_payload=True
            )
            records, _ = held.shard.scroll(request)
        return [_hit_of(r.payload, 0.0) for r in records]

    def keyed_by(self, tenant: str, event_ids: list[str]) -> list[VectorHit]:
        """See :meth:`memstream.vectors.port.VectorIndex.keyed_by`."""
        ids = sorted(set(event_ids))
        flt = qe.Filter(must=[_match("tenant", tenant), _any(KEY_OF, ids)])
        with self._reading() as held:
            if held is None or not ids:
                return []
            pages = list(self._pages(held.shard, flt))
        return [_hit_of(r.payload, 0.0) for records in pages for r in records]

    def holding(self, tenant: str, event_ids: list[str]) -> int:
        """See :meth:`memstream.vectors.port.VectorIndex.holding`."""
        ids = sorted(set(event_ids))
        flt = qe.Filter(
            must=[_match("tenant", tenant)],
            should=[_any("event_id", ids), _any("source_ids", ids), _any(KEY_OF, ids)],
        )
        with self._owed_lock:
            owed = len(self._owed.get(tenant, set()).intersection(ids))
        with self._reading() as held:
            if held is None or not ids:
                return owed
            return owed + held.shard.count(qe.CountRequest(exact=True, filter=flt))

    def compact(self) -> None:
        """Copy the live points into a fresh shard that replaces this one.

        A deleted point stays in its segment until a vacuum, which Edge runs only past a
        deleted fraction (0.2 of at least 1000 vectors by default), and in the WAL until
        the WAL rotates; ``optimize`` does not remove it either. A fresh shard holds only
        what is live. Reads wait on nothing: they go on on the old shard while the copy is
        made (writes wait), then take the fresh one; the old one closes when its last read
        ends. An open shard keeps reading through a renamed directory (its files stay open),
        and closing it after the renames writes nothing (checked on Edge 0.9).
        """
        with self._optimize_lock, self._lock:
            shard = self._open(create=False)
            if shard is None:
                self._settle()
                return
            fresh_path = self.path.with_name(self.path.name + ".compacting")
            shutil.rmtree(fresh_path, ignore_errors=True)
            fresh = qe.EdgeShard.create(str(fresh_path), self._config())
            self._index_payload(fresh)  # empty: scoped, and _copy gives old points a scope
            self._copy(shard, fresh)
            fresh.flush()
            fresh.close()
            shard.flush()
            old_path = self.path.with_name(self.path.name + ".old")
            self.path.rename(old_path)
            fresh_path.rename(self.path)
            loaded = qe.EdgeShard.load(str(self.path), self._config())
            old = self._publish(_Held(loaded, scoped=True))
            if old is not None:
                self._retire(old)
            shutil.rmtree(old_path)
            self._forget()
            self._settle()

    def _settle(self) -> None:
        """Every purge so far has left the files (callers hold ``_lock``, which purges take
        too, so none ran since the copy began)."""
        with self._owed_lock:
            self._owed.clear()

    def _copy(self, source: qe.EdgeShard, target: qe.EdgeShard) -> None:
        for records in self._pages(source, None, vectors=True):
            points = [
                qe.Point(r.id, r.vector or {}, _stored(_loaded(r.payload), None)) for r in records
            ]
            if points:
                target.update(qe.UpdateOperation.upsert_points(points))

    def _pages(
        self, shard: qe.EdgeShard, flt: qe.Filter | None, *, vectors: bool = False
    ) -> Iterator[list[qe.Record]]:
        """Every point (matching ``flt``), with its payload, a page of ``batch_size`` at a time."""
        offset: qe.PointId | None = None
        while True:
            request = qe.ScrollRequest(
                offset=offset,
                limit=self.batch_size,
                filter=flt,
                with_payload=True,
                with_vector=vectors,
            )
            records, offset = shard.scroll(request)
            yield records
            if offset is None:
                return

    # -- reads -----------------------------------------------------------------------------

    def count(self, tenant: str | None = None, kinds: list[str] | None = None) -> int:
        """Points (of one tenant, of some kinds); ``kinds=["event"]``: one per ledger event."""
        must: list[qe.ConditionType] = []
        if tenant is not None:
            must.append(_match("tenant", tenant))
        if kinds is not None:
            must.append(qe.FieldCondition("kind", match=qe.MatchAny(kinds)))
        flt = qe.Filter(must=must) if must else None
        with self._reading() as held:
            return held.shard.count(qe.CountRequest(exact=True, filter=flt)) if held else 0

    def query_batch(
        self,
        tenant: str,
        dense: list[float] | None,
        text: str | None,
        searches: list[Search],
        as_of: datetime | None = None,
        related: Mapping[str, float] | None = None,
    ) -> list[list[VectorHit]]:
        """See :meth:`memstream.vectors.port.VectorIndex.query_batch`: one ``query_batch``
        of the engine, so the GIL is taken and the shard planned once, not per lane."""
        for search in searches:
            check_query(search.mode, dense, text, self.dim)
        cache = self._payloads
        with self._reading() as held:
            if held is None:
                return [[] for _ in searches]
            question = _Question.of(tenant, dense, text, as_of, held.scoped, related)
            requests = [question.request(search, cache is None) for search in searches]
            planned = [r for r in requests if r is not None]
            generation = cache.generation if cache is not None else 0  # before the search
            found = held.shard.query_batch(qe.QueryBatchRequest(planned)) if planned else []
            seen = _Seen() if cache is None else self._fetched(held.shard, found, generation)
        answers = iter(found)
        return [seen.hits(next(answers)) if r is not None else [] for r in requests]

    def _fetched(
        self, shard: qe.EdgeShard, found: list[list[qe.ScoredPoint]], generation: int
    ) -> _Seen:
        """The payloads of the points ``found``: cached, or read in one call and cached."""
        assert self._payloads is not None
        ids = list(dict.fromkeys(sp.id for hits in found for sp in hits))
        seen = _Seen(self._payloads.known(ids))
        if missing := [i for i in ids if i not in seen.payloads]:
            fetched = {r.id: _loaded(r.payload) for r in shard.retrieve(missing, True, False)}
            self._payloads.keep(fetched, generation)
            seen.payloads.update(fetched)
        return seen

    def recent(
        self,
        tenant: str,
        limit: int,
        streams: list[str] | None = None,
        as_of: datetime | None = None,
        agents: list[str] | None = None,
        users: list[str] | None = None,
    ) -> list[VectorHit]:
        """See :meth:`memstream.vectors.port.VectorIndex.recent`."""
        keyed = keyword_filters(Search(limit, streams=streams, agents=agents, users=users))
        if limit <= 0 or keyed is None:
            return []
        with self._reading() as held:
            if held is None:
                return []
            question = _Question.of(tenant, None, None, as_of, held.scoped)
            request = qe.ScrollRequest(
                limit=limit,
                filter=qe.Filter(must=question.where(["event"], keyed)),
                with_payload=True,
                order_by=qe.OrderBy(TIME_FIELD, direction=qe.Direction.Desc),
            )
            records, _ = held.shard.scroll(request)
        return [_hit_of(r.payload, 0.0) for r in records]


@dataclass(frozen=True)
class _Question:
    """What every search of one batch shares: the tenant, the query vectors, the time bound."""

    tenant: str
    dense: qe.Query | None
    sparse: qe.Query | None
    idf: qe.SearchParams
    bound: list[qe.ConditionType]  # the time bound, when there is one
    scoped: bool

    @classmethod
    def of(
        cls,
        tenant: str,
        dense: list[float] | None,
        text: str | None,
        as_of: datetime | None,
        scoped: bool,
        related: Mapping[str, float] | None = None,
    ) -> _Question:
        bound: list[qe.ConditionType] = []
        if (lte := time_bound(as_of)) is not None:
            bound.append(qe.FieldCondition(TIME_FIELD, range=qe.RangeDateTime(lte=lte)))
        sparse_vec = query_vector(text, related) if text is not None else SparseVec([], [])
        return cls(
            tenant=tenant,
            dense=qe.Query.Nearest(dense, using=DENSE) if dense is not None else None,
            sparse=qe.Query.Nearest(_sparse(sparse_vec), using=SPARSE) if sparse_vec else None,
            idf=qe.SearchParams(
                idf=qe.IdfParams(corpus=qe.Filter(must=[_match("tenant", tenant)]))
            ),
            bound=bound,
            scoped=scoped,
        )

    def where(
        self, kinds: list[str] | None, filters: dict[str, list[str]] | None = None
    ) -> list[qe.ConditionType]:
        """The conditions of the tenant, the kinds, the keyword ``filters`` and the time
        bound. On a scoped shard, tenant and kinds are one condition, or one with the first
        filter that names a person."""
        keyed = dict(filters or {})
        if kinds and self.scoped:
            scopes = [scope(self.tenant, k) for k in kinds]
            field = next((f for f in SCOPED_FIELDS if f in keyed), None)
            if field is None:
                first = _any(SCOPE, scopes)
            else:
                values = keyed.pop(field)
                first = _any(SCOPED_KEYS, [scoped_key(s, field, v) for s in scopes for v in values])
            return [first, *(_any(k, v) for k, v in keyed.items()), *self.bound]
        kind = [_any("kind", kinds)] if kinds else []
        rest = [_any(k, v) for k, v in keyed.items()]
        return [_match("tenant", self.tenant), *kind, *rest, *self.bound]

    def request(self, search: Search, payload: bool = True) -> qe.QueryRequest | None:
        """The engine request of one search (without payloads unless ``payload``); None when
        it can match nothing."""
        filters = keyword_filters(search)
        if filters is None or search.limit <= 0:
            return None
        kinds = filters.pop("kind", None)
        flt = qe.Filter(must=self.where(kinds, filters))
        limit = search.limit
        if search.mode == "dense":
            return qe.QueryRequest(limit=limit, query=self.dense, filter=flt, with_payload=payload)
        if search.mode == "sparse":
            if self.sparse is None:
                return None
            return qe.QueryRequest(
                limit=limit, query=self.sparse, filter=flt, params=self.idf, with_payload=payload
            )
        pool = prefetch_limit(limit)
        prefetches = []
        if self.dense is not None:
            prefetches.append(qe.Prefetch(limit=pool, query=self.dense, filter=flt))
        if self.sparse is not None:
            prefetches.append(
                qe.Prefetch(limit=pool, query=self.sparse, filter=flt, params=self.idf)
            )
        if not prefetches:
            return None
        return qe.QueryRequest(
            limit=limit, prefetches=prefetches, query=_RRF, filter=flt, with_payload=payload
        )


def _converted(
    convert: Callable[[VectorPoint], qe.Point], points: list[VectorPoint]
) -> list[qe.Point]:
    """The points as the engine takes them. The engine holds any Rust string (NUL included)
    but a Python string holding a lone surrogate is not one: the conversion fails (orjson for
    packed fields, PyO3 for the others), and that refusal is the data's."""
    try:
        return [convert(p) for p in points]
    except (TypeError, UnicodeError) as exc:
        text = str(exc)
        if "surrogates not allowed" not in text and "not valid UTF-8" not in text:
            raise
        raise VectorRefused(
            f"Qdrant Edge cannot hold a string that is not UTF-8: {text}", in_data=True
        ) from exc


class _Seen:
    """The payloads of one batch's points, each read out of the engine once. A checkout's
    lanes search one index with overlapping filters, so most points come back several times;
    reading a payload into Python (and unpacking it) was most of the batch's cost at 100k
    events, more than the searches themselves."""

    def __init__(self, payloads: dict[Any, dict[str, Any]] | None = None) -> None:
        self.payloads: dict[Any, dict[str, Any]] = payloads or {}

    def hits(self, points: list[qe.ScoredPoint]) -> list[VectorHit]:
        """The hits of one search; a point whose payload is not known (deleted since the
        search found it) is left out."""
        return [h for sp in points if (h := self.hit(sp)) is not None]

    def hit(self, sp: qe.ScoredPoint) -> VectorHit | None:
        payload = self.payloads.get(sp.id)
        if payload is None:
            if sp.payload is None:
                return None
            payload = self.payloads[sp.id] = _loaded(sp.payload)
        # each hit gets its own dict; the values inside (lists, metadata) are shared
        return stored_hit(payload, float(sp.score))


def _stored(payload: dict[str, Any], point_key: str | None) -> dict[str, Any]:
    """The payload as stored: the point's key (when given), its scope and scoped keys, and
    every field no filter reads packed into one string."""
    if point_key is not None and (taken := _RESERVED & payload.keys()):
        raise ValueError(f"{point_key}: payload fields {sorted(taken)} are the adapter's own")
    given = {**payload, "point_key": point_key} if point_key is not None else payload
    stored = {k: v for k, v in given.items() if k in _FILTERED}
    if packed := {k: v for k, v in given.items() if k not in _FILTERED}:
        stored[PACKED] = orjson.dumps(packed).decode()
    tenant, kind = stored.get("tenant"), stored.get("kind")
    if isinstance(tenant, str) and isinstance(kind, str):
        where = stored[SCOPE] = scope(tenant, kind)
        stored[SCOPED_KEYS] = [
            scoped_key(where, field, str(value))
            for field in SCOPED_FIELDS
            for value in _values(stored.get(field))
        ]
    return stored


def _loaded(stored: dict[str, Any] | None) -> dict[str, Any]:
    """The payload as upserted (with ``point_key``) from the payload as stored. A point
    stored before packing existed has its fields as they were given."""
    payload = {k: v for k, v in (stored or {}).items() if k not in _RESERVED - {PACKED}}
    packed = payload.pop(PACKED, None)
    if isinstance(packed, str):
        payload.update(orjson.loads(packed))
    return payload


def _values(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _hit_of(stored: dict[str, Any] | None, score: float) -> VectorHit:
    return stored_hit(_loaded(stored), score)
