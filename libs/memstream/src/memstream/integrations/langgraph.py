"""memstream as a LangGraph store (``BaseStore``): a graph's long-term memory kept in the
ledger, searched by meaning, read back after a restart.

What maps to what:

- a namespace is a stream of its own (``lg.<readable parts>.<digest>``, the digest of the
  exact namespace; ``user_at=i`` also makes its i-th part the events' ``user``, so a key
  scoped to that user reads and writes only that user's namespaces and a purge of that user
  takes them all, and leaves that part out of the stream's name);
- ``put`` is an ``observation`` in that stream: its text is what search reads (the
  ``index`` fields' values, else the whole value as JSON), its metadata the key and the value;
  ``delete`` is an observation that says the key is gone;
- ``get`` is the key's newest write in the stream; ``search`` ranks the namespaces' current
  items by memstream's recall when given a query, else newest first; ``list_namespaces``
  reads the register each first write to a namespace leaves in the ``lg.namespaces`` stream.

The ledger keeps every version: a put or delete never erases the history (a purge does).
A store reads its own writes at once (its reads wait for its last write's position); another
process sees them once memory applied them. A read walks the namespace's writes, newest
first, a thousand a request: its cost grows with the namespace's history. Time-to-live is not
supported.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memstream.client import MemoryHttpClient

REGISTER = "lg.namespaces"
KEY, VALUE, NAMESPACE, DELETED = "store.key", "store.value", "store.namespace", "store.deleted"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def stream_of(namespace: tuple[str, ...], user_at: int | None = None) -> str:
    """The stream a namespace's items live in: readable, and exact by its digest. The user's
    part (``user_at``) is left out of the readable parts: a stream's name stays in records a
    purge cannot rewrite (the broker's log keeps each record's key), the user's events do not."""
    digest = hashlib.sha256(json.dumps(list(namespace)).encode()).hexdigest()[:16]
    shown = [part for i, part in enumerate(namespace) if i != user_at]
    readable = ".".join(_UNSAFE.sub("-", part)[:24] for part in shown)[:90]
    return f"lg.{readable}.{digest}" if readable else f"lg.{digest}"


@dataclass(frozen=True)
class _Version:
    """A key's newest write in its namespace (and when the key was first written)."""

    event_id: str
    value: dict[str, Any] | None  # None: deleted
    created_at: datetime
    updated_at: datetime


class MemstreamStore(BaseStore):
    """A LangGraph ``BaseStore`` over memstream's HTTP API (``api_url``, an API key)."""

    def __init__(
        self,
        api_url: str,
        api_key: str,
        *,
        agent: str = "langgraph",
        user_at: int | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._client = MemoryHttpClient(api_url, api_key, timeout=timeout)
        self._agent = agent
        self._user_at = user_at
        self._after: str | None = None  # the position of this store's last write
        # namespaces this store registered (the ledger drops a repeat by its id; this store
        # does not send it again)
        self._registered: set[str] = set()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order: writes first reach memory, then the reads see them."""
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` off the event loop (the client is synchronous)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def close(self) -> None:
        self._client.close()

    def _run(self, op: Op) -> Result:
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, GetOp):
            return self._item(op.namespace, op.key)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    # writes

    def _put(self, op: PutOp) -> None:
        ns, stream = op.namespace, stream_of(op.namespace, self._user_at)
        user = ns[self._user_at] if self._user_at is not None and len(ns) > self._user_at else None
        metadata: dict[str, Any] = {KEY: op.key, NAMESPACE: json.dumps(list(ns))}
        if op.value is None:
            text = f"{op.key} deleted"
            metadata[DELETED] = True
        else:
            text = _text(op.value, op.index)
            metadata[VALUE] = json.dumps(op.value, sort_keys=True)
        common = {"type": "observation", "agent": self._agent, "user": user}
        register = {
            **common,
            "id": f"lg-ns-{stream.rsplit('.', 1)[-1]}",  # one a namespace: the ledger dedups
            "stream": REGISTER,
            "payload": {"text": f"namespace {'/'.join(ns)}"},
            "metadata": {NAMESPACE: json.dumps(list(ns)), "store.stream": stream},
        }
        item = {**common, "stream": stream, "payload": {"text": text}, "metadata": metadata}
        events = [item] if stream in self._registered else [register, item]
        _ids, self._after = self._client.emit_written(events)
        self._registered.add(stream)

    # reads

    def _versions(self, namespace: tuple[str, ...]) -> dict[str, _Version]:
        """Every key's newest write in ``namespace`` (and when it was first written)."""
        exact = json.dumps(list(namespace))
        found: dict[str, _Version] = {}
        for e in self._client.stream_history(
            stream_of(namespace, self._user_at), after=self._after
        ):
            meta = e.get("metadata") or {}
            key = meta.get(KEY)
            if not isinstance(key, str) or meta.get(NAMESPACE) != exact:
                continue
            at = datetime.fromisoformat(str(e["occurred_at"]).replace("Z", "+00:00"))
            if key in found:  # newest first: an older write only dates the key's first
                found[key] = replace(found[key], created_at=at)
                continue
            value = None if meta.get(DELETED) else json.loads(str(meta.get(VALUE)))
            found[key] = _Version(str(e["event_id"]), value, at, at)
        return found

    def _item(self, namespace: tuple[str, ...], key: str) -> Item | None:
        v = self._versions(namespace).get(key)
        if v is None or v.value is None:
            return None
        return Item(value=v.value, key=key, namespace=namespace,
                    created_at=v.created_at, updated_at=v.updated_at)  # fmt: skip

    def _namespaces(self) -> list[tuple[str, ...]]:
        seen = {
            tuple(json.loads(str(e["metadata"][NAMESPACE])))
            for e in self._client.stream_history(REGISTER, after=self._after)
            if NAMESPACE in (e.get("metadata") or {})
        }
        return sorted(seen)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = op.namespace_prefix
        spaces = [ns for ns in self._namespaces() if ns[: len(prefix)] == prefix]
        current = [
            (ns, key, v)
            for ns in spaces
            for key, v in self._versions(ns).items()
            if v.value is not None and _matches(v.value, op.filter)
        ]
        streams = [stream_of(ns, self._user_at) for ns in spaces]
        scores = self._scores(op.query, streams, op.limit + op.offset)
        if op.query:
            current = [c for c in current if c[2].event_id in scores]
            current.sort(key=lambda c: -scores[c[2].event_id])
        else:
            current.sort(key=lambda c: c[2].updated_at, reverse=True)
        return [
            SearchItem(namespace=ns, key=key, value=v.value or {}, created_at=v.created_at,
                       updated_at=v.updated_at, score=scores.get(v.event_id))
            for ns, key, v in current[op.offset : op.offset + op.limit]
        ]  # fmt: skip

    def _scores(self, query: str | None, streams: list[str], wanted: int) -> dict[str, float]:
        """Recall's score of each event of ``streams`` for ``query`` (none without one)."""
        if not query or not streams:
            return {}
        k = min(100, max(10, 3 * wanted))
        hits = self._client.recall(query, k=k, scope={"stream": streams}, after=self._after)
        return {str(h["item_id"]): float(h.get("score") or 0.0) for h in hits}

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = [ns for ns in self._namespaces() if _admitted(ns, op.match_conditions)]
        if op.max_depth is not None:
            found = sorted({ns[: op.max_depth] for ns in found})
        return found[op.offset : op.offset + op.limit]


def _text(value: Mapping[str, Any], index: Any) -> str:
    """What search reads of a value: its ``index`` fields (top-level names), else all of it."""
    if isinstance(index, list) and index:
        parts = [value.get(f) for f in index if value.get(f) is not None]
        text = " ".join(p if isinstance(p, str) else json.dumps(p) for p in parts)
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text.strip() or "(empty)"


def _matches(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """Equality on each field ``wanted`` names (``{"$eq": x}`` and ``{"$ne": x}`` too)."""
    for field, want in (wanted or {}).items():
        have = value.get(field)
        if isinstance(want, Mapping) and set(want) <= {"$eq", "$ne"}:
            if "$eq" in want and have != want["$eq"]:
                return False
            if "$ne" in want and have == want["$ne"]:
                return False
        elif have != want:
            return False
    return True


def _admitted(ns: tuple[str, ...], conditions: tuple[MatchCondition, ...] | None) -> bool:
    for c in conditions or ():
        path = tuple(c.path)
        part = ns[: len(path)] if c.match_type == "prefix" else ns[len(ns) - len(path) :]
        if len(ns) < len(path) or any(p not in ("*", q) for p, q in zip(path, part, strict=True)):
            return False
    return True
