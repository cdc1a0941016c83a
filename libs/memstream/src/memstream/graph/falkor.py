"""FalkorDB adapter (the embedded default), spoken to over RESP with the ``falkordb`` client."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import falkordb
import orjson
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memstream.graph.port import GraphRefused, GraphUnavailable
from memstream.graph.store import CypherGraphStore, Row, Run

_T = TypeVar("_T")
REWRITE_TIMEOUT_S = 300.0
# The client renders parameters into the query text, which the server parses as a C string:
# a NUL ends it mid-literal ("errMsg: Invalid input ... errCtx: CYPHER"). JSON escapes a NUL
# as this sequence, so one C-speed search over the encoded parameters finds every candidate.
_NUL_ESCAPED = b"\\u0000"
# Replies that mean the server cannot write for now, not that it refuses the query: loading
# its files, out of memory, a read-only replica, a failing disk (MISCONF).
_NOT_NOW = ("LOADING", "BUSY", "MISCONF", "TRYAGAIN", "MASTERDOWN")
REASON_CHARS = 300  # a server's reason kept in a dead letter

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
    # A Progress node is found by its tenant (a few per tenant: one per epoch and partition).
    "CREATE INDEX FOR (n:Progress) ON (n.tenant)",
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
        try:
            self._compact()
        except (RedisConnectionError, RedisTimeoutError) as exc:
            raise GraphUnavailable(f"FalkorDB unreachable: {exc}") from exc

    def _compact(self) -> None:
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

    def _refusal(self, params: dict[str, Any]) -> str | None:
        return refusal(params)

    def _read(self, query: str, params: dict[str, Any]) -> list[Row]:
        problem = refusal(params)
        if problem is not None:
            raise GraphRefused(problem, in_data=True)
        try:
            return _rows(_sent(lambda: self._graph.ro_query(query, params)))
        except GraphRefused as exc:
            # A namespace nothing was written to (or just dropped) reads as empty.
            if "empty key" in str(exc):
                return []
            raise

    def _run(self, query: str, params: dict[str, Any]) -> list[Row]:
        # ``write`` checked its parameters before the first step (``_refuse_early``); the
        # server's refusal of any other write is mapped by ``_sent``.
        return _rows(_sent(lambda: self._graph.query(query, params)))

    def _transact(self, work: Callable[[Run], _T]) -> _T:
        return work(self._run)


def refusal(params: dict[str, Any]) -> str | None:
    """Why FalkorDB cannot take ``params``, found without a round trip; None if it can."""
    try:
        encoded = orjson.dumps(params)
    except orjson.JSONEncodeError as exc:
        if "surrogates" in str(exc):  # the client would fail encoding the query text
            return "a string is not valid UTF-8 (it holds a lone surrogate)"
        return None  # a value JSON cannot hold: the client renders it, the server judges
    if _NUL_ESCAPED not in encoded:
        return None
    # The escape may also be literal text (a backslash, then "u0000"): find the real one.
    path = next((p for k, v in params.items() if (p := _nul_path(v, f"${k}"))), None)
    if path is None:
        return None
    return f"FalkorDB cannot hold a NUL character (U+0000) in a string: {path}"


def _nul_path(value: Any, path: str) -> str | None:
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for k, v in value.items():
            found = _nul_path(str(k), f"{path} key") or _nul_path(v, f"{path}.{k}")
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _nul_path(v, f"{path}[{i}]")
            if found:
                return found
    return None


def _sent(call: Callable[[], _T]) -> _T:
    """``call`` (one query), its failures sorted into refused and unavailable."""
    try:
        return call()
    except (RedisConnectionError, RedisTimeoutError) as exc:  # BusyLoadingError included
        raise GraphUnavailable(f"FalkorDB unreachable: {exc}") from exc
    except (ReadOnlyError, OutOfMemoryError) as exc:
        raise GraphUnavailable(f"FalkorDB cannot write now: {exc}") from exc
    except ResponseError as exc:
        text = str(exc)
        if text.startswith(_NOT_NOW):
            raise GraphUnavailable(f"FalkorDB cannot write now: {text}") from exc
        raise GraphRefused(f"FalkorDB refused the query: {text[:REASON_CHARS]}") from exc
    except (UnicodeEncodeError, ValueError) as exc:
        # Raised by the client while it renders parameters into the query text (a lone
        # surrogate, a map key holding a backtick): the server never saw the query.
        raise GraphRefused(
            f"the FalkorDB client cannot send the parameters: {exc}", in_data=True
        ) from exc


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
