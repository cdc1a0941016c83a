"""``VectorIndex`` on a Qdrant server/cluster through ``qdrant-client`` (distributed mode)."""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from memstream.records.projected import VectorHit, VectorPoint
from memstream.vectors.port import (
    KEY_OF,
    KEYWORD_FIELDS,
    SEQ_FIELD,
    TIME_FIELD,
    Mode,
    Search,
    VectorIndex,
    VectorRefused,
    VectorUnavailable,
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

log = logging.getLogger(__name__)

DENSE = "dense"
SPARSE = "bm25"
# HTTP answers that judge the request's data (a malformed point, a payload too large) and
# those that mean the server cannot take it now (overloaded, restarting, behind a proxy).
REFUSED_STATUS = frozenset({400, 413, 422})
UNAVAILABLE_STATUS = frozenset({429, 502, 503, 504})
REASON_CHARS = 300


def classify(exc: BaseException) -> VectorRefused | VectorUnavailable | None:
    """The port error a ``qdrant-client`` exception means; None: a bug of ours (or a server
    error, 500, that nothing says is transient): it propagates."""
    if isinstance(exc, ResponseHandlingException):  # the transport failed: no answer at all
        return VectorUnavailable(f"Qdrant unreachable: {exc.source!r}")
    if isinstance(exc, UnexpectedResponse):
        content = exc.content.decode(errors="replace")[:REASON_CHARS]
        if exc.status_code in REFUSED_STATUS:
            return VectorRefused(f"Qdrant refused the write ({exc.status_code}): {content}")
        if exc.status_code in UNAVAILABLE_STATUS:
            return VectorUnavailable(f"Qdrant cannot write now ({exc.status_code}): {content}")
    if isinstance(exc, UnicodeError) or "surrogates not allowed" in str(exc):
        # Raised while the client serialises the request: a string that is not UTF-8.
        return VectorRefused(f"the Qdrant client cannot send the points: {exc}", in_data=True)
    return None


@contextmanager
def _port_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        mapped = classify(exc)
        if mapped is None:
            raise
        raise mapped from exc


def _sparse(vec: SparseVec) -> models.SparseVector:
    return models.SparseVector(indices=vec.indices, values=vec.values)


def _match(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def _any(key: str, values: list[str]) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchAny(any=values))


class QdrantVectorIndex(VectorIndex):
    """Dense (cosine) + sparse BM25 (IDF) hybrid index in one Qdrant collection.

    Same behaviour as ``EdgeVectorIndex`` (RRF k=60, IDF scoped to the querying tenant).
    Servers older than those features (e.g. 1.13) reject them; the adapter then falls back
    once, with a warning, to the server's default RRF and collection-wide IDF.
    Writes are serialised by a lock; reads are as thread-safe as the client (the HTTP
    client is; ``QdrantClient(":memory:")``/path mode is meant for tests only).
    The client belongs to the caller unless ``owns_client`` is set.
    """

    def __init__(
        self,
        client: QdrantClient,
        collection: str,
        dim: int,
        *,
        batch_size: int = 256,
        owns_client: bool = False,
    ) -> None:
        self.client = client
        self.collection = collection
        self.dim = dim
        self.batch_size = batch_size
        self.owns_client = owns_client
        self._lock = threading.RLock()
        self._ready = False
        self._legacy = False  # server lacks Rrf(k) / IDF corpus params

    # -- lifecycle -------------------------------------------------------------------------

    def ensure(self) -> None:
        """Create the collection (dense ``dense`` + sparse ``bm25`` with IDF) if missing."""
        with self._lock:
            if self._ready:
                return
            if self.client.collection_exists(self.collection):
                self._check_dim()
            else:
                self._create()
            self._index_payload()
            self._ready = True

    def _create(self) -> None:
        self.client.create_collection(
            self.collection,
            vectors_config={
                DENSE: models.VectorParams(size=self.dim, distance=models.Distance.COSINE)
            },
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )

    def _index_payload(self) -> None:
        """Index the filtered fields a collection lacks (one made before a filter was added
        gets its index on the next open, as Edge shards do)."""
        have = self.client.get_collection(self.collection).payload_schema
        tenant = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
        wanted: dict[str, models.PayloadSchemaParams | models.PayloadSchemaType] = {
            "tenant": tenant,
            **{name: models.PayloadSchemaType.KEYWORD for name in KEYWORD_FIELDS},
            SEQ_FIELD: models.PayloadSchemaType.INTEGER,
            TIME_FIELD: models.PayloadSchemaType.DATETIME,
        }
        with warnings.catch_warnings():  # local mode: "payload indexes have no effect"
            warnings.simplefilter("ignore", UserWarning)
            for name, schema in wanted.items():
                if name not in have:
                    self.client.create_payload_index(self.collection, name, field_schema=schema)

    def _check_dim(self) -> None:
        vectors = self.client.get_collection(self.collection).config.params.vectors
        params = vectors.get(DENSE) if isinstance(vectors, dict) else None
        if params is None or params.size != self.dim:
            raise ValueError(f"collection {self.collection!r} has no {self.dim}-d {DENSE!r}")

    def _exists(self) -> bool:
        if not self._ready and self.client.collection_exists(self.collection):
            self.ensure()
        return self._ready

    def drop(self) -> None:
        """Delete the whole collection; ``ensure``/``upsert`` recreate it."""
        with self._lock:
            self.client.delete_collection(self.collection)
            self._ready = False

    def close(self) -> None:
        if self.owns_client:
            self.client.close()

    # -- writes ----------------------------------------------------------------------------

    def _point(self, p: VectorPoint) -> models.PointStruct:
        if len(p.dense) != self.dim:
            raise ValueError(f"{p.point_key}: dense has {len(p.dense)} dims, expected {self.dim}")
        vector: dict[str, Any] = {DENSE: p.dense}
        sparse = doc_vector(p.text)
        if sparse:
            vector[SPARSE] = _sparse(sparse)
        payload = {**p.payload, "point_key": p.point_key}
        return models.PointStruct(id=point_id(p.point_key), vector=vector, payload=payload)

    def upsert(self, points: list[VectorPoint]) -> None:
        """Idempotent by ``point_key``; written in batches of ``batch_size``."""
        if not points:
            return
        with _port_errors():
            self.ensure()
            for start in range(0, len(points), self.batch_size):
                batch = [self._point(p) for p in points[start : start + self.batch_size]]
                with self._lock:
                    self.client.upsert(self.collection, points=batch, wait=True)

    def delete_where(self, tenant: str, key: str, value: str) -> int:
        """Delete the tenant's points whose payload ``key`` equals (or, for lists, contains)."""
        with _port_errors():
            if not self._exists():
                return 0
            flt = models.Filter(must=[_match("tenant", tenant), _match(key, value)])
            with self._lock:
                n = self.client.count(self.collection, count_filter=flt, exact=True).count
                if n:
                    selector = models.FilterSelector(filter=flt)
                    self.client.delete(self.collection, points_selector=selector, wait=True)
        return n

    def delete(self, point_keys: list[str]) -> None:
        """Delete the points with these keys (keys without a point are ignored)."""
        with _port_errors():
            if not point_keys or not self._exists():
                return
            ids: list[models.ExtendedPointId] = [point_id(k) for k in point_keys]
            with self._lock:
                selector = models.PointIdsList(points=ids)
                self.client.delete(self.collection, points_selector=selector, wait=True)

    def purge_events(self, tenant: str, event_ids: list[str]) -> dict[str, int]:
        """See :meth:`memstream.vectors.port.VectorIndex.purge_events`."""
        with _port_errors():
            return self._purge_events(tenant, sorted(set(event_ids)))

    def _purge_events(self, tenant: str, ids: list[str]) -> dict[str, int]:
        if not ids or not self._exists():
            return {"points": 0, "latents": 0}
        events = models.Filter(must=[_match("tenant", tenant), _any("event_id", ids)])
        derived = models.Filter(must=[_match("tenant", tenant), _any("source_ids", ids)])
        with self._lock:
            points = self.client.count(self.collection, count_filter=events, exact=True).count
            latents = self.client.count(self.collection, count_filter=derived, exact=True).count
            keys: list[models.ExtendedPointId] = [point_id(event_point_key(tenant, i)) for i in ids]
            self.client.delete(
                self.collection, points_selector=models.PointIdsList(points=keys), wait=True
            )
            selector = models.FilterSelector(filter=derived)
            self.client.delete(self.collection, points_selector=selector, wait=True)
        return {"points": points, "latents": latents}

    def at(self, tenant: str, stream: str, seqs: list[int]) -> list[VectorHit]:
        """See :meth:`memstream.vectors.port.VectorIndex.at`."""
        wanted = sorted(set(seqs))
        with _port_errors():
            if not wanted or not self._exists():
                return []
            flt = models.Filter(
                must=[
                    _match("tenant", tenant),
                    _match("kind", "event"),
                    _match("stream", stream),
                    models.FieldCondition(key=SEQ_FIELD, match=models.MatchAny(any=wanted)),
                ]
            )
            records, _ = self.client.scroll(
                self.collection, scroll_filter=flt, limit=len(wanted), with_payload=True
            )
        return [stored_hit(r.payload, 0.0) for r in records]

    def keyed_by(self, tenant: str, event_ids: list[str]) -> list[VectorHit]:
        """See :meth:`memstream.vectors.port.VectorIndex.keyed_by`."""
        ids = sorted(set(event_ids))
        with _port_errors():
            if not ids or not self._exists():
                return []
            flt = models.Filter(must=[_match("tenant", tenant), _any(KEY_OF, ids)])
            hits: list[VectorHit] = []
            # The scroll's next offset is typed wider than it takes (a gRPC PointId is never
            # returned over REST); it is only handed back to the next scroll.
            offset: Any = None
            while True:
                records, offset = self.client.scroll(
                    self.collection, scroll_filter=flt, limit=256, offset=offset, with_payload=True
                )
                hits += [stored_hit(r.payload, 0.0) for r in records]
                if offset is None:
                    return hits

    def holding(self, tenant: str, event_ids: list[str]) -> int:
        """See :meth:`memstream.vectors.port.VectorIndex.holding`."""
        ids = sorted(set(event_ids))
        if not ids or not self._exists():
            return 0
        flt = models.Filter(
            must=[_match("tenant", tenant)],
            should=[_any("event_id", ids), _any("source_ids", ids), _any(KEY_OF, ids)],
        )
        return self.client.count(self.collection, count_filter=flt, exact=True).count

    def compact(self) -> None:
        """Nothing to do from here: the server's optimizer vacuums segments whose deleted
        fraction passes the collection's ``deleted_threshold``, and its WAL rotates by size;
        where purged points must leave the disk at once, lower those on the server."""

    # -- reads -----------------------------------------------------------------------------

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
        if limit <= 0 or keyed is None or not self._exists():
            return []
        must: list[models.Condition] = [
            _match("tenant", tenant),
            models.FieldCondition(key="kind", match=models.MatchAny(any=["event"])),
        ]
        must += [
            models.FieldCondition(key=k, match=models.MatchAny(any=v)) for k, v in keyed.items()
        ]
        if (bound := time_bound(as_of)) is not None:
            when = models.DatetimeRange(lte=bound)
            must.append(models.FieldCondition(key=TIME_FIELD, range=when))
        records, _ = self.client.scroll(
            self.collection,
            scroll_filter=models.Filter(must=must),
            limit=limit,
            with_payload=True,
            order_by=models.OrderBy(key=TIME_FIELD, direction=models.Direction.DESC),
        )
        return [stored_hit(r.payload, 0.0) for r in records]

    def count(self, tenant: str | None = None, kinds: list[str] | None = None) -> int:
        """Points (of one tenant, of some kinds); ``kinds=["event"]``: one per ledger event."""
        with _port_errors():
            if not self._exists():
                return 0
            must: list[models.Condition] = []
            if tenant is not None:
                must.append(_match("tenant", tenant))
            if kinds is not None:
                must.append(models.FieldCondition(key="kind", match=models.MatchAny(any=kinds)))
            flt = models.Filter(must=must) if must else None
            return self.client.count(self.collection, count_filter=flt, exact=True).count

    def query_batch(
        self,
        tenant: str,
        dense: list[float] | None,
        text: str | None,
        searches: list[Search],
        as_of: datetime | None = None,
        related: Mapping[str, float] | None = None,
    ) -> list[list[VectorHit]]:
        """See :meth:`memstream.vectors.port.VectorIndex.query_batch`. One request per
        search, one after another (each with the fallback for servers without
        ``Rrf(k)``): the server's batch endpoint is not used yet."""
        for search in searches:
            check_query(search.mode, dense, text, self.dim)
        sparse_vec = query_vector(text, related) if text is not None else SparseVec([], [])
        return [self._search(tenant, dense, sparse_vec, s, as_of) for s in searches]

    def _search(
        self,
        tenant: str,
        dense: list[float] | None,
        sparse_vec: SparseVec,
        search: Search,
        as_of: datetime | None,
    ) -> list[VectorHit]:
        s = search
        filters = keyword_filters(s)
        if filters is None or s.limit <= 0 or not self._exists():
            return []
        must: list[models.Condition] = [_match("tenant", tenant)]
        must += [
            models.FieldCondition(key=k, match=models.MatchAny(any=v)) for k, v in filters.items()
        ]
        if (bound := time_bound(as_of)) is not None:
            when = models.DatetimeRange(lte=bound)
            must.append(models.FieldCondition(key=TIME_FIELD, range=when))
        flt = models.Filter(must=must)
        if s.mode == "sparse" and not sparse_vec:
            return []
        try:
            return self._query(tenant, flt, dense, sparse_vec, s.limit, s.mode)
        except UnexpectedResponse as exc:
            if self._legacy or exc.status_code not in (400, 422):
                raise
            log.warning("qdrant server lacks Rrf(k)/IDF corpus (%s): legacy fusion", exc)
            self._legacy = True
            return self._query(tenant, flt, dense, sparse_vec, s.limit, s.mode)

    def _query(
        self,
        tenant: str,
        flt: models.Filter,
        dense: list[float] | None,
        sparse_vec: SparseVec,
        limit: int,
        mode: Mode,
    ) -> list[VectorHit]:
        idf: models.SearchParams | None = None
        if not self._legacy:
            corpus = models.Filter(must=[_match("tenant", tenant)])
            idf = models.SearchParams(idf=models.IdfCorpusParams(corpus=corpus))
        common: dict[str, Any] = {"query_filter": flt, "limit": limit, "with_payload": True}
        if mode == "dense":
            res = self.client.query_points(self.collection, query=dense, using=DENSE, **common)
        elif mode == "sparse":
            res = self.client.query_points(
                self.collection,
                query=_sparse(sparse_vec),
                using=SPARSE,
                search_params=idf,
                **common,
            )
        else:
            pool = prefetch_limit(limit)
            prefetch: list[models.Prefetch] = []
            if dense is not None:
                prefetch.append(models.Prefetch(query=dense, using=DENSE, filter=flt, limit=pool))
            if sparse_vec:
                sq = _sparse(sparse_vec)
                prefetch.append(
                    models.Prefetch(query=sq, using=SPARSE, filter=flt, limit=pool, params=idf)
                )
            if not prefetch:
                return []
            fusion: models.Query = (
                models.FusionQuery(fusion=models.Fusion.RRF)
                if self._legacy
                else models.RrfQuery(rrf=models.Rrf(k=RRF_K))
            )
            res = self.client.query_points(
                self.collection, query=fusion, prefetch=prefetch, **common
            )
        return [_hit(sp) for sp in res.points]


def _hit(sp: models.ScoredPoint) -> VectorHit:
    return stored_hit(sp.payload, float(sp.score))
