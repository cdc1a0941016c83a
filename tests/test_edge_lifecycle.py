"""Qdrant Edge shard lifecycle: reads never meet a closed or half-swapped shard.

A purge compacts the shard (a fresh shard replaces it) and an index build optimizes it while
checkouts read. Every read method runs in several threads while another thread compacts and
optimizes again and again: no read fails, and every read sees the whole collection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memstream.records.projected import VectorPoint
from memstream.vectors.edge import EdgeVectorIndex
from memstream.vectors.port import IndexUnavailable, Search

DIM = 16
TENANTS = ("acme", "Société Générale")  # a tenant with a space and accents
PER_TENANT = 600
SWAPS = 12


def vec(seed: int) -> list[float]:
    return [float(x) for x in np.random.default_rng(seed).standard_normal(DIM)]


def point(tenant: str, i: int) -> VectorPoint:
    payload: dict[str, Any] = {
        "tenant": tenant,
        "kind": "event",
        "stream": f"thread {i % 3}",
        "seq": i,
        "hash": f"h{i}",
        "event_id": f"ev-{i}",
        "occurred_at": f"2024-05-{1 + i % 28:02d}T10:{i % 60:02d}:00Z",
        "valid_to": None,
        "entities": [],
    }
    text = f"Éloïse noted item {i} about the harbour crane"
    return VectorPoint(point_key=f"event:{tenant}:ev-{i}", dense=vec(i), text=text, payload=payload)


def filled(path: Path) -> EdgeVectorIndex:
    index = EdgeVectorIndex(path, "memories", DIM, batch_size=256)
    index.upsert([point(t, i) for t in TENANTS for i in range(PER_TENANT)])
    return index


def whole_reads(index: EdgeVectorIndex, tenant: str) -> list[Callable[[], None]]:
    """Every read method, each asserting it saw the whole collection."""
    ids = [f"ev-{i}" for i in range(0, PER_TENANT, 7)]
    as_of = datetime(2024, 6, 1, tzinfo=UTC)

    def count() -> None:
        assert index.count(tenant, kinds=["event"]) == PER_TENANT

    def query() -> None:
        assert len(index.query(tenant, vec(3), "harbour crane", limit=10)) == 10

    def query_batch() -> None:
        searches = [Search(5, "dense"), Search(5, "sparse"), Search(8, "hybrid", ["event"])]
        found = index.query_batch(tenant, vec(5), "Éloïse crane", searches, as_of)
        assert [len(hits) for hits in found] == [5, 5, 8]

    def recent() -> None:
        assert len(index.recent(tenant, 12, streams=["thread 1"])) == 12

    def holding() -> None:
        assert index.holding(tenant, ids) == len(ids)

    return [count, query, query_batch, recent, holding]


def test_reads_never_fail_while_the_shard_is_compacted_and_optimized(tmp_path: Path) -> None:
    index = filled(tmp_path / "shard")
    errors: list[BaseException] = []
    reads = [0]
    done = threading.Event()
    lock = threading.Lock()

    def reader(tenant: str) -> None:
        calls = whole_reads(index, tenant)
        while not done.is_set():
            for call in calls:
                try:
                    call()
                except BaseException as exc:  # reported below, with the read that failed
                    errors.append(exc)
                with lock:
                    reads[0] += 1

    threads = [threading.Thread(target=reader, args=(t,)) for t in (*TENANTS, TENANTS[0])]
    for thread in threads:
        thread.start()
    try:
        for swap in range(SWAPS):
            seen = reads[0]
            index.compact()
            if swap % 3 == 0:
                index.optimize()
            # the next swap starts only once reads ran on this shard
            deadline = time.monotonic() + 120
            while reads[0] < seen + 10 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert reads[0] >= seen + 10, f"no 10 reads on swap {swap}'s shard within 120 s"
    finally:
        done.set()
        for thread in threads:
            thread.join(60)
    assert errors == [], errors[:3]
    assert reads[0] >= SWAPS * 10
    assert index.count() == PER_TENANT * len(TENANTS)
    assert not (tmp_path / "shard.old").exists() and not (tmp_path / "shard.compacting").exists()
    index.close()


def test_a_replaced_shard_closes_only_after_the_read_on_it_ends(tmp_path: Path) -> None:
    index = filled(tmp_path / "shard")
    with index._reading() as held:  # a read in flight on the shard a compaction replaces
        assert held is not None
        compaction = threading.Thread(target=index.compact)
        compaction.start()
        deadline = time.monotonic() + 120
        while index._held is held and time.monotonic() < deadline:
            time.sleep(0.01)
        assert index._held is not held, "the fresh shard was not published"
        assert index.count("acme") == PER_TENANT  # a new read takes the fresh shard
        # The compaction has retired the old shard and now waits for this read: then, not
        # after some pause that a slow machine could outlast, the shard must still be open.
        while not held.retired and time.monotonic() < deadline:
            time.sleep(0.01)
        assert held.retired, "the compaction never retired the replaced shard"
        assert held.shard.count(_all()) == PER_TENANT * len(TENANTS)  # still open, whole
        assert compaction.is_alive(), "the compaction ended with a read on its old shard"
    compaction.join(120)
    assert not compaction.is_alive()
    with pytest.raises(Exception, match="not initialized"):
        held.shard.count(_all())  # closed once its read ended
    index.close()


def test_a_closed_index_says_unavailable_and_lets_the_read_in_flight_finish(
    tmp_path: Path,
) -> None:
    index = filled(tmp_path / "shard")
    with index._reading() as held:
        assert held is not None
        closing = threading.Thread(target=index.close)
        closing.start()
        deadline = time.monotonic() + 60
        while index._held is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(IndexUnavailable, match="memories"):
            index.query("acme", vec(1), "crane")
        assert held.shard.count(_all()) == PER_TENANT * len(TENANTS)
    closing.join(60)
    assert not closing.is_alive()
    for read in whole_reads(index, "acme"):
        with pytest.raises(IndexUnavailable):
            read()
    with pytest.raises(IndexUnavailable):
        index.upsert([point("acme", 9999)])


def test_reads_of_a_dropped_index_find_nothing_and_writes_recreate_it(tmp_path: Path) -> None:
    index = filled(tmp_path / "shard")
    index.drop()
    assert index.count() == 0 and index.query("acme", vec(1), "crane") == []
    assert index.recent("acme", 5) == [] and index.holding("acme", ["ev-1"]) == 0
    index.upsert([point("acme", 1)])
    assert index.count("acme") == 1
    index.close()


def _all() -> Any:
    import qdrant_edge as qe

    return qe.CountRequest(exact=True)
