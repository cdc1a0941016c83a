"""Qdrant Edge in shards by tenant: where points go, what a reopen keeps, what is refused.

What every ``VectorIndex`` does is in ``test_vector_contract.py`` (this layout included).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from elsewhere import elsewhere
from memstream.records.projected import VectorPoint
from memstream.settings import Settings
from memstream.vectors.edge import EdgeVectorIndex
from memstream.vectors.edge_shards import SHARDS_FILE, EdgeTenantShards, shard_of
from memstream.vectors.factory import open_vector_index
from memstream.vectors.port import VectorRefused

DIM = 4


def point(tenant: str, key: str, text: str, **payload: Any) -> VectorPoint:
    body = {"tenant": tenant, "kind": "event", "stream": "s", "seq": 1, "event_id": key}
    return VectorPoint(
        point_key=f"event:{tenant}:{key}",
        dense=[1.0, 0.0, 0.0, 0.0],
        text=text,
        payload={**body, **payload},
    )


def tenants_apart(shards: int) -> tuple[str, str]:
    """Two tenant names whose points land in different shards."""
    names = [f"tenant-{i}" for i in range(50)]
    first = names[0]
    other = next(n for n in names if shard_of(n, shards) != shard_of(first, shards))
    return first, other


def shard_count(path: Path, tenant: str) -> int:
    """Points of ``tenant`` in the shard directory at ``path``, read as one plain shard."""
    one = EdgeVectorIndex(path, "peek", DIM)
    try:
        return one.count(tenant)
    finally:
        one.close()


def test_shard_of_is_stable_and_spreads_tenants() -> None:
    tenants = ["acme", "globex", "Zoë", "a\x00b", "é/ü"]
    here = [shard_of(t, 64) for t in tenants]
    code = (
        "import json; from memstream.vectors.edge_shards import shard_of; "
        f"print(json.dumps([shard_of(t, 64) for t in {tenants!r}]))"
    )
    # Another process, another string hash seed: the same shards (a tenant's points are
    # found after a restart, and by every API replica).
    assert elsewhere(code, 1) == elsewhere(code, 2) == here
    assert len({shard_of(f"tenant-{i}", 64) for i in range(200)}) > 48
    for hostile in ("a\x00b", "\udcff", "../x", "é/ü", ""):
        assert 0 <= shard_of(hostile, 7) < 7


def test_a_tenant_lives_in_its_own_shard(tmp_path: Path) -> None:
    index = EdgeTenantShards(tmp_path / "c", "c", DIM, shards=8)
    mine, theirs = tenants_apart(8)
    index.upsert([point(mine, "e1", "kiln schedule"), point(theirs, "e2", "kiln schedule")])
    index.upsert([point(mine, "e3", "glaze recipe")])
    assert index.count() == 3 and index.count(mine) == 2 and index.count(theirs) == 1
    hits = index.query(mine, [1.0, 0.0, 0.0, 0.0], "kiln", limit=10)
    assert [h.payload["event_id"] for h in hits][:1] == ["e1"]
    assert {h.payload["tenant"] for h in hits} == {mine}
    index.close()
    dirs = sorted(p.name for p in (tmp_path / "c").iterdir() if p.is_dir())
    assert dirs == sorted(f"shard-{shard_of(t, 8):03d}" for t in (mine, theirs))
    mine_dir = tmp_path / "c" / f"shard-{shard_of(mine, 8):03d}"
    assert shard_count(mine_dir, mine) == 2 and shard_count(mine_dir, theirs) == 0


def test_a_collection_keeps_its_shard_count(tmp_path: Path) -> None:
    first = EdgeTenantShards(tmp_path / "c", "c", DIM, shards=3)
    first.upsert([point(f"tenant-{i}", f"e{i}", "note") for i in range(12)])
    first.close()
    assert (tmp_path / "c" / SHARDS_FILE).read_text().strip() == "3"
    again = EdgeTenantShards(tmp_path / "c", "c", DIM, shards=16)
    assert again.shards == 3
    assert all(again.count(f"tenant-{i}") == 1 for i in range(12))
    again.close()


def test_a_point_without_a_tenant_is_refused(tmp_path: Path) -> None:
    index = EdgeTenantShards(tmp_path / "c", "c", DIM, shards=4)
    bare = VectorPoint(point_key="event:x:e1", dense=[1.0, 0, 0, 0], text="x", payload={})
    with pytest.raises(VectorRefused, match="no tenant") as refused:
        index.upsert([point("acme", "e0", "kept"), bare])
    assert refused.value.in_data
    assert index.count() == 0  # refused before anything was written
    index.close()


def test_hostile_tenant_names_stay_apart(tmp_path: Path) -> None:
    index = EdgeTenantShards(tmp_path / "c", "c", DIM, shards=2)
    names = ["a\x00b", "a", "../../etc", "Zoë/ü\u202e"]
    index.upsert([point(n, f"e{i}", f"note {i}") for i, n in enumerate(names)])
    for i, n in enumerate(names):
        hits = index.query(n, [1.0, 0.0, 0.0, 0.0], "note", limit=10)
        assert [h.payload["event_id"] for h in hits] == [f"e{i}"]
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) <= [
        SHARDS_FILE,
        "shard-000",
        "shard-001",
    ]
    index.close()


def test_a_shard_cut_short_in_a_compaction_opens_whole(tmp_path: Path) -> None:
    """Killed between a compaction's renames, a shard lies aside as ``.old``: the collection
    still finds it (its count across tenants included), and it comes back in place."""
    index = EdgeTenantShards(tmp_path / "c", "c", DIM, shards=4)
    index.upsert([point("acme", "e1", "kept")])
    index.close()
    n = shard_of("acme", 4)
    live = tmp_path / "c" / f"shard-{n:03d}"
    live.rename(live.with_name(live.name + ".old"))
    again = EdgeTenantShards(tmp_path / "c", "c", DIM, shards=4)
    assert again.count() == 1 and again.count("acme") == 1
    assert live.is_dir() and not live.with_name(live.name + ".old").exists()
    again.close()


def test_closed_and_dropped(tmp_path: Path) -> None:
    index = EdgeTenantShards(tmp_path / "c", "c", DIM, shards=4)
    index.upsert([point("acme", "e1", "kept"), point("globex", "e2", "kept")])
    index.drop()
    assert not (tmp_path / "c").exists() and index.count() == 0
    index.upsert([point("acme", "e3", "again")])
    assert index.count() == 1
    index.close()
    with pytest.raises(RuntimeError, match="closed"):
        index.count("acme")


def test_one_shard_set_aside_by_a_compaction_is_not_hidden(tmp_path: Path) -> None:
    """A collection made as one shard, its compaction killed with the shard renamed aside:
    the factory opens it as one shard again, which puts it back, and nothing is lost."""
    path = tmp_path / "vectors" / "v1"
    one = EdgeVectorIndex(path, "v1", DIM)
    one.upsert([point("acme", "e1", "kept")])
    one.close()
    path.rename(path.with_name("v1.old"))
    index = open_vector_index(Settings(data_dir=tmp_path), "v1", DIM)
    assert isinstance(index, EdgeVectorIndex)
    assert index.count("acme") == 1 and path.is_dir()
    index.close()
