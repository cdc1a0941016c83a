"""``VectorIndex``: dense + sparse (BM25 with IDF) hybrid search, tenant-filtered."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, cast

from memstream.records.projected import VectorHit, VectorPoint
from memstream.store_errors import StoreRefused, StoreUnavailable
from memstream.times import as_utc, utc_z

Mode = Literal["hybrid", "dense", "sparse"]


class IndexUnavailable(RuntimeError):
    """The index cannot be read now (closed, or reopening while its projector restarts);
    the same read succeeds again later."""


# Payload fields a query can filter on (keyword-indexed by every adapter), by query argument.
KEYWORD_FILTERS = {
    "kinds": "kind",
    "streams": "stream",
    "actors": "actor_key",
    "entities": "entity_keys",
    "altitudes": "altitude",
    "agents": "agent",  # a scope's agents and users: the event's own fields, as written
    "users": "user",
}
KEYWORD_FIELDS = tuple(KEYWORD_FILTERS.values())
# Event points' payload field listing the events whose words their key copies (the message
# a turn follows): a purge of one of them keys the point again (``VectorIndex.keyed_by``).
KEY_OF = "key_of"
# Integer-indexed payload field: an event's position in its stream (``VectorIndex.at``).
SEQ_FIELD = "seq"
# Datetime-indexed payload field bounding a query in time (``as_of``).
TIME_FIELD = "occurred_at"


class VectorUnavailable(StoreUnavailable):
    """The vector store cannot be reached or cannot write for now: retry later."""

    store = "vectors"


class VectorRefused(StoreRefused):
    """The vector store refuses what a write carries (e.g. a string that is not UTF-8)."""

    store = "vectors"


def time_bound(as_of: datetime | None) -> str | None:
    """``as_of`` as the RFC 3339 UTC bound of a datetime range filter (None: unbounded)."""
    if as_of is None:
        return None
    if as_of.tzinfo is None:
        raise ValueError("as_of must be timezone-aware")
    return utc_z(as_utc(as_of))


def event_point_key(tenant: str, event_id: str) -> str:
    """The point of one ledger event (see ``projection.projectors.event_point``)."""
    return f"event:{tenant}:{event_id}"


def stored_hit(stored: dict[str, Any] | None, score: float) -> VectorHit:
    """A hit from a payload as an adapter stored it (``point_key`` moved out)."""
    payload: dict[str, Any] = dict(stored or {})
    key = cast(str, payload.pop("point_key"))
    return VectorHit(point_key=key, score=score, payload=payload)


def check_query(mode: Mode, dense: list[float] | None, text: str | None, dim: int) -> None:
    """The argument rules every adapter's ``query`` shares (raises ValueError)."""
    if mode == "dense" and dense is None:
        raise ValueError("mode='dense' needs a dense query vector")
    if mode == "sparse" and text is None:
        raise ValueError("mode='sparse' needs a query text")
    if dense is not None and len(dense) != dim:
        raise ValueError(f"query has {len(dense)} dims, expected {dim}")


@dataclass(frozen=True)
class Search:
    """One search of a batch: the question under one mode, size and set of filters (the
    arguments of :meth:`VectorIndex.query` that differ between a checkout's lanes)."""

    limit: int
    mode: Mode = "hybrid"
    kinds: list[str] | None = None
    streams: list[str] | None = None
    actors: list[str] | None = None
    entities: list[str] | None = None
    altitudes: list[str] | None = None
    agents: list[str] | None = None
    users: list[str] | None = None


def keyword_filters(search: Search) -> dict[str, list[str]] | None:
    """The search's filters as ``{payload field: accepted values}``; None when one of them
    is an empty list, which matches nothing."""
    given = {name: getattr(search, name) for name in KEYWORD_FILTERS}
    if any(v == [] for v in given.values()):
        return None
    return {KEYWORD_FILTERS[name]: v for name, v in given.items() if v}


class VectorIndex(Protocol):
    """One collection (= one embedding model + projection version).

    Writes raise :class:`VectorUnavailable` when the store cannot be reached and
    :class:`VectorRefused` when it refuses the data; any other exception is a bug.
    """

    collection: str
    dim: int

    def ensure(self) -> None:
        """Create the collection (dense ``dense`` + sparse ``bm25`` with IDF) if missing."""

    def upsert(self, points: list[VectorPoint]) -> None:
        """Idempotent by ``point_key`` (UUIDv5)."""

    def query(
        self,
        tenant: str,
        dense: list[float] | None,
        text: str | None,
        limit: int = 10,
        mode: Mode = "hybrid",
        kinds: list[str] | None = None,
        streams: list[str] | None = None,
        actors: list[str] | None = None,
        entities: list[str] | None = None,
        as_of: datetime | None = None,
        altitudes: list[str] | None = None,
        related: Mapping[str, float] | None = None,
        agents: list[str] | None = None,
        users: list[str] | None = None,
    ) -> list[VectorHit]:
        """Top hits of one tenant; hybrid = RRF fusion of the dense and sparse lanes.

        ``mode="dense"`` needs ``dense``, ``"sparse"`` needs ``text``; hybrid uses whichever
        lanes have input. ``kinds``, ``streams``, ``actors`` (payload ``actor_key``: the
        entity key of the event's agent), ``entities`` (payload ``entity_keys``: every
        entity the event involves), ``altitudes`` (``episode`` or ``latent`` on latent
        artifacts' points), ``agents`` and ``users`` (the event's own ``agent`` and ``user``:
        a scope) filter the hits; an empty list matches nothing.
        ``as_of`` keeps points whose ``occurred_at`` is at or before it. ``related`` adds
        words to the sparse query at their own weights (see ``sparse.query_vector``).

        An adapter that subclasses this protocol gets it as a batch of one search.
        """
        search = Search(limit, mode, kinds, streams, actors, entities, altitudes, agents, users)
        return self.query_batch(tenant, dense, text, [search], as_of, related)[0]

    def query_batch(
        self,
        tenant: str,
        dense: list[float] | None,
        text: str | None,
        searches: list[Search],
        as_of: datetime | None = None,
        related: Mapping[str, float] | None = None,
    ) -> list[list[VectorHit]]:
        """The hits of each search, in order: what ``query`` returns for it, the searches
        run together (one engine call where the engine has one)."""

    def recent(
        self,
        tenant: str,
        limit: int,
        streams: list[str] | None = None,
        as_of: datetime | None = None,
        agents: list[str] | None = None,
        users: list[str] | None = None,
    ) -> list[VectorHit]:
        """The tenant's newest event points (of ``streams``, ``agents``, ``users``; at or
        before ``as_of``), newest first by ``occurred_at``: read in order from the datetime
        index, no scan, no score."""

    def count(self, tenant: str | None = None, kinds: list[str] | None = None) -> int:
        """Points (of one tenant, of some kinds); ``kinds=["event"]``: one per ledger event."""

    def delete_where(self, tenant: str, key: str, value: str) -> int:
        """Delete the tenant's points whose payload ``key`` equals/contains ``value``."""

    def delete(self, point_keys: list[str]) -> None:
        """Delete the points with these keys (keys without a point are ignored)."""

    def purge_events(self, tenant: str, event_ids: list[str]) -> dict[str, int]:
        """Obey a purge tombstone: delete the tenant's event points of ``event_ids`` and the
        latent points derived from any of them (payload ``source_ids``). Counts removed
        (``points``, ``latents``); idempotent."""

    def at(self, tenant: str, stream: str, seqs: list[int]) -> list[VectorHit]:
        """The tenant's event points at positions ``seqs`` of ``stream`` (any order): an
        exact read of the integer-indexed ``seq``, whatever the points' times."""

    def keyed_by(self, tenant: str, event_ids: list[str]) -> list[VectorHit]:
        """The tenant's points whose key copies words of any of ``event_ids`` (payload
        ``key_of``), with their payloads; a projector keys them again after a purge."""

    def holding(self, tenant: str, event_ids: list[str]) -> int:
        """Points of the tenant that a purge of ``event_ids`` removes or keys again (their
        event points, latent points derived from them, points whose key copies their words),
        and each purged id whose deleted points still lie in the index's files: 0 once the
        purge is applied and, where ``compact`` rewrites the files, compacted."""

    def compact(self) -> None:
        """Rewrite the index's files so deleted points no longer lie in them (after a purge;
        slow: never on the path of ordinary writes)."""

    def drop(self) -> None: ...

    def close(self) -> None: ...
