"""Qdrant Edge's payload cache: searches read ids, payloads come from a bounded cache.

The same points go into an index without the cache and one with it: every search answers the
same hits with the same payloads, cold and warm; a write (upsert, delete, delete by field, a
purge, a compaction) is seen by the next search; a tenant's search never returns another
tenant's points; the cache never holds more than its limit.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memstream.records.projected import VectorHit, VectorPoint
from memstream.settings import Settings
from memstream.vectors.edge import EdgeVectorIndex, _Payloads
from memstream.vectors.edge_shards import EdgeTenantShards
from memstream.vectors.factory import open_vector_index
from memstream.vectors.port import Search
from memstream.vectors.sparse import point_id

DIM = 16
TENANTS = ("acme", "Société Générale")  # a tenant with a space and accents
PER_TENANT = 120
WORDS = ("harbour crane", "Ünal's ferry", "night shift", "north quay", "José's barge")


def vec(seed: int) -> list[float]:
    return [float(x) for x in np.random.default_rng(seed).standard_normal(DIM)]


def point(tenant: str, i: int, note: str = "") -> VectorPoint:
    payload: dict[str, Any] = {
        "tenant": tenant,
        "kind": "event",
        "stream": f"thread {i % 3}",
        "seq": i,
        "event_id": f"ev-{i}",
        "actor_key": ["josé", "ünal"][i % 2],
        "entity_keys": ["north quay"] if i % 4 == 0 else [],
        "occurred_at": f"2024-05-{1 + i % 28:02d}T10:{i % 60:02d}:00Z",
        # a length of its own: no two texts with the same words score alike
        "text": " ".join([tenant, f"item {i}:", WORDS[i % len(WORDS)], *["pad"] * i, note]),
        "note": note,
    }
    return VectorPoint(
        point_key=f"event:{tenant}:ev-{i}",
        dense=vec(i + 1000 * TENANTS.index(tenant)),
        text=str(payload["text"]),
        payload=payload,
    )


SEARCHES = [
    Search(10, "dense", ["event"]),
    Search(10, "sparse", ["event"]),
    Search(10, "dense", ["event"], actors=["josé"]),
    Search(10, "sparse", ["event"], entities=["north quay"]),
    Search(12, "hybrid", ["event"], streams=["thread 1"]),
]


def answers(index: EdgeVectorIndex, tenant: str, seed: int, text: str) -> list[list[Any]]:
    """Each search's hits as (score, key, payload). Points of equal score (many texts share
    their words) may come in either order, and the last ones kept may be any of them: below
    the lowest score kept only the scores are compared."""
    found = index.query_batch(tenant, vec(seed), text, SEARCHES)
    out = []
    for hits in found:
        rows = sorted(_row(h) for h in hits)
        cut = rows[-1][0] if rows else 0.0
        out.append([r if r[0] != cut else (r[0], "", []) for r in rows])
    return out


def _row(h: VectorHit) -> tuple[float, str, list[tuple[str, str]]]:
    return (-round(h.score, 5), h.point_key, sorted((k, repr(v)) for k, v in h.payload.items()))


def stored(index: EdgeVectorIndex, tenant: str, seed: int, text: str) -> list[VectorHit]:
    return [h for hits in index.query_batch(tenant, vec(seed), text, SEARCHES) for h in hits]


def pair(tmp_path: Path, limit: int = 10_000) -> tuple[EdgeVectorIndex, EdgeVectorIndex]:
    points = [point(t, i) for t in TENANTS for i in range(PER_TENANT)]
    plain = EdgeVectorIndex(tmp_path / "plain", "m", DIM)
    cached = EdgeVectorIndex(tmp_path / "cached", "m", DIM, payload_cache=limit)
    plain.upsert(points)
    cached.upsert(points)
    return plain, cached


QUERIES = [(3, "harbour crane"), (7, "josé's BARGE"), (11, "north quay night"), (5, "ferry")]


def test_cached_searches_answer_what_uncached_ones_do_cold_and_warm(tmp_path: Path) -> None:
    plain, cached = pair(tmp_path)
    assert cached._payloads is not None
    for _ in range(2):  # the first pass fills the cache, the second reads from it
        for tenant in TENANTS:
            for seed, text in QUERIES:
                want = answers(plain, tenant, seed, text)
                assert all(want), "every search finds something"
                assert answers(cached, tenant, seed, text) == want
                for h in stored(cached, tenant, seed, text):
                    seq = int(h.payload["seq"])
                    assert h.payload == point(tenant, seq).payload
                    assert h.point_key == f"event:{tenant}:ev-{seq}"
    assert len(cached._payloads.items) > 0


def test_a_write_is_seen_by_the_next_search(tmp_path: Path) -> None:
    plain, cached = pair(tmp_path)
    tenant = TENANTS[1]
    for seed, text in QUERIES:
        answers(cached, tenant, seed, text)  # warm
    changed = [point(tenant, i, note="rescheduled") for i in range(0, PER_TENANT, 2)]
    writes: list[Callable[[EdgeVectorIndex], object]] = [
        lambda index: index.upsert(changed),
        lambda index: index.delete([f"event:{tenant}:ev-{i}" for i in range(1, 40, 2)]),
        lambda index: index.delete_where(tenant, "stream", "thread 1"),
    ]
    for step, write in enumerate(writes):
        for index in (plain, cached):
            write(index)
        for seed, text in QUERIES:
            assert answers(cached, tenant, seed, text) == answers(plain, tenant, seed, text)
            hits = stored(cached, tenant, seed, text)
            assert hits, "the searches still find points"
            for h in hits:
                seq = int(h.payload["seq"])
                note = "rescheduled" if seq % 2 == 0 else ""
                assert h.payload == point(tenant, seq, note).payload
                assert step < 1 or not (seq < 40 and seq % 2 == 1)
                assert step < 2 or h.payload["stream"] != "thread 1"


def test_a_purge_and_a_compaction_leave_nothing_stale(tmp_path: Path) -> None:
    _, cached = pair(tmp_path)
    tenant = TENANTS[0]
    before = answers(cached, tenant, 3, "harbour crane")
    purged = [f"ev-{i}" for i in range(PER_TENANT) if i % 5 == 0]
    cached.purge_events(tenant, purged)
    after = answers(cached, tenant, 3, "harbour crane")
    gone = {f"event:{tenant}:{e}" for e in purged}
    assert not gone & {h.point_key for h in stored(cached, tenant, 3, "harbour crane")}
    assert before != after
    assert cached._payloads is not None and not cached._payloads.items.keys() & {
        uuid.UUID(point_id(k)) for k in gone
    }
    cached.compact()
    assert answers(cached, tenant, 3, "harbour crane") == after


def test_a_tenant_never_sees_another_tenants_points(tmp_path: Path) -> None:
    _, cached = pair(tmp_path)
    first, second = TENANTS
    for seed, text in QUERIES:
        answers(cached, first, seed, text)  # the cache holds the first tenant's points
    for seed, text in QUERIES:
        for hits in cached.query_batch(second, vec(seed), text, SEARCHES):
            assert hits
            assert {h.payload["tenant"] for h in hits} == {second}
            assert all(h.point_key.startswith(f"event:{second}:") for h in hits)


def test_the_cache_holds_at_most_its_limit(tmp_path: Path) -> None:
    plain, cached = pair(tmp_path, limit=7)
    assert cached._payloads is not None
    for tenant in TENANTS:
        for seed, text in QUERIES:
            assert answers(cached, tenant, seed, text) == answers(plain, tenant, seed, text)
            assert len(cached._payloads.items) <= 7


def test_a_read_that_began_before_a_write_does_not_keep_what_it_fetched() -> None:
    cache = _Payloads(10)
    began = cache.generation
    cache.drop([1])  # a write lands while the read fetches
    cache.keep({1: {"text": "old"}}, began)
    assert cache.known([1]) == {}
    cache.keep({1: {"text": "new"}}, cache.generation)
    assert cache.known([1]) == {1: {"text": "new"}}
    cache.drop()
    assert cache.known([1]) == {}


@pytest.mark.parametrize(("limit", "on"), [(0, False), (50, True)])
def test_the_setting_turns_the_cache_on_and_off(tmp_path: Path, limit: int, on: bool) -> None:
    settings = Settings(data_dir=tmp_path, vector_payload_cache=limit)
    index = open_vector_index(settings, "m", DIM)
    assert isinstance(index, EdgeTenantShards)
    assert (index._payloads is not None) is on
    index.upsert([point(t, i) for i, t in enumerate(TENANTS)])
    shards = [index._for(t) for t in TENANTS]
    assert all(s._payloads is index._payloads for s in shards)  # one cache, shared
    index.close()


def test_no_search_serves_a_payload_older_than_a_write_done_before_it(tmp_path: Path) -> None:
    """Readers search while a writer rewrites every point again and again (and compacts
    now and then): each hit carries the last version written before its search began, or a
    newer one, never an older one."""
    _, cached = pair(tmp_path)
    tenant, rounds = TENANTS[0], 12
    done = [0]  # the last version whose upsert returned
    stop = threading.Event()
    problems: list[str] = []
    searched = [0]

    def reader(seed: int) -> None:
        while not stop.is_set():
            floor = done[0]
            for hits in cached.query_batch(tenant, vec(seed), "harbour crane", SEARCHES):
                for h in hits:
                    version = int(str(h.payload["note"]).removeprefix("v") or 0)
                    if version < floor:
                        problems.append(f"{h.point_key}: v{version} after v{floor} was written")
            searched[0] += 1

    threads = [threading.Thread(target=reader, args=(s,)) for s in (3, 7, 11)]
    for t in threads:
        t.start()
    try:
        for version in range(1, rounds + 1):
            cached.upsert([point(tenant, i, note=f"v{version}") for i in range(PER_TENANT)])
            done[0] = version
            if version % 4 == 0:
                cached.compact()
            seen = searched[0]
            deadline = time.monotonic() + 60  # let the readers search this version
            while searched[0] < seen + 3 and time.monotonic() < deadline:
                time.sleep(0.005)
            assert searched[0] >= seen + 3, f"no 3 searches of version {version} within 60 s"
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert problems == [], problems[:3]
    assert searched[0] >= rounds * 3
    final = [h for hits in cached.query_batch(tenant, vec(3), "crane", SEARCHES) for h in hits]
    assert final and {h.payload["note"] for h in final} == {f"v{rounds}"}
