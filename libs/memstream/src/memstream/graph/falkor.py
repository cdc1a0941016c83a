"""FalkorDB adapter (the embedded default), spoken to over RESP with the ``falkordb`` client."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import falkordb
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memstream.graph.port import GraphUnavailable
from memstream.graph.store import CypherGraphStore, Row, Run

_T = TypeVar("_T")
REWRITE_TIMEOUT_S = 300.0

# FalkorDB range indexes are per attribute (a multi-attribute CREATE INDEX fails as a whole
# when one attribute is already indexed), so the shim creates them one by one. ``tenant`` is
# deliberately not indexed: FalkorDB intersects every indexed attribute of a lookup, and the
# tenant's posting list is the whole tenant, which made keyed MERGEs ~30% slower; the keys
# are selective on their own and ``tenant`` is checked as a filter.
FALKOR_DDL: tuple[str, ...] = (
    "CREATE INDEX FOR (n:Event) ON (n.event_id)",
    "CREATE INDEX FOR (n:Event) ON (n.stream)",
    "CREATE INDEX FOR (n:Event) ON (n.seq)",
    "CREATE INDEX FOR (n:Entity) ON (n.key)",
    "CREATE INDEX FOR ()-[f:RELATES]-() ON (f.fact_id)",
    "CREATE INDEX FOR ()-[f:RELATES]-() ON (f.src_event_id)",
    "CREATE INDEX FOR (n:Feedback) ON (n.feedback_id)",
    "CREATE INDEX FOR (n:Feedback) ON (n.target_id)",
    "CREATE INDEX FOR (n:Latent) ON (n.artifact_id)",
    "CREATE INDEX FOR (n:Invalidation) ON (n.invalidation_id)",
    "CREATE INDEX FOR (n:Invalidation) ON (n.target_id)",
    "CREATE INDEX FOR (n:Invalidation) ON (n.proposal_id)",
)


class FalkorGraphStore(CypherGraphStore):
    """One FalkorDB graph (``namespace``, e.g. ``memstream_v1``) holding every tenant.

    FalkorDB runs one write query at a time per graph, so each query (and the supersession
    recompute in particular) is atomic; a batch is several queries, each idempotent, so a
    redelivered batch converges.
    """

    def __init__(self, client: falkordb.FalkorDB, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self._graph = client.select_graph(namespace)

    def ensure_schema(self) -> None:
        for statement in FALKOR_DDL:
            try:
                self._graph.query(statement)
            except ResponseError as exc:
                if "already indexed" not in str(exc):
                    raise

    def drop(self) -> None:
        try:
            self._graph.delete()
        except ResponseError as exc:
            # Deleting a graph that was never written is not an error for us.
            if "empty key" not in str(exc):
                raise

    def compact(self) -> None:
        """Rewrite the append-only file from the graph as it is now and wait for it.

        Deleted nodes stay in the AOF (it logs every write) until a rewrite replaces it with
        the current state. The embedded server has RDB snapshots off (``--save ""``), so the
        AOF is the only file holding graph data. A rewrite already running (another purge)
        started before our deletes: wait for it, then start ours.
        """
        conn = self.client.connection
        # Query telemetry (CMD_INFO, off in the embedded server) keeps recent queries with
        # their parameters, event text included, in a key of its own: drop it first.
        telemetry = list(conn.scan_iter(match="telemetry{*}"))
        if telemetry:
            conn.delete(*telemetry)
        _wait_rewrite(conn)
        try:
            conn.bgrewriteaof()
        except ResponseError as exc:
            if "already in progress" not in str(exc):
                raise
            _wait_rewrite(conn)
            conn.bgrewriteaof()
        _wait_rewrite(conn)
        status = conn.info("persistence").get("aof_last_bgrewrite_status")
        if status != "ok":
            raise RuntimeError(f"FalkorDB AOF rewrite failed: {status}")

    def _read(self, query: str, params: dict[str, Any]) -> list[Row]:
        try:
            return _rows(self._graph.ro_query(query, params))
        except (RedisConnectionError, RedisTimeoutError) as exc:
            raise GraphUnavailable(f"FalkorDB unreachable: {exc}") from exc
        except ResponseError as exc:
            # A namespace nothing was written to (or just dropped) reads as empty.
            if "empty key" in str(exc):
                return []
            raise

    def _run(self, query: str, params: dict[str, Any]) -> list[Row]:
        return _rows(self._graph.query(query, params))

    def _transact(self, work: Callable[[Run], _T]) -> _T:
        return work(self._run)


def _wait_rewrite(conn: Any, timeout_s: float = REWRITE_TIMEOUT_S) -> None:
    """Until no AOF rewrite is running or scheduled (a scheduled one waits for a child)."""
    deadline = time.monotonic() + timeout_s
    while True:
        info = conn.info("persistence")
        if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
            return
        if time.monotonic() > deadline:
            raise GraphUnavailable(f"FalkorDB AOF rewrite still running after {timeout_s} s")
        time.sleep(0.05)


def _rows(result: Any) -> list[Row]:
    names = [str(column[1]) for column in result.header]
    return [dict(zip(names, row, strict=True)) for row in result.result_set]
