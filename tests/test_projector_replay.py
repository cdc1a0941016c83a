"""Replaying the same ledger gives identical projections; re-projection changes nothing."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
from falkordb import FalkorDB
from memstream.embed.hashing import HashingEmbedder
from memstream.graph.falkor import FalkorGraphStore
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.projection.extract import extract, graph_batch
from memstream.projection.projectors import vector_points
from memstream.stack.servers import Server
from memstream.vectors.edge import EdgeVectorIndex


def ledger(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    state, out = SequencerState(), []
    people = ["Marta Lopez", "Tom Berg", "Aiko Tanaka"]
    for i in range(n):
        kind = rng.choice(["msg", "msg", "fact", "tool"])
        doc: dict[str, Any] = {
            "id": f"e{i}",
            "tenant": rng.choice(["t1", "t2"]),
            "stream": f"s{rng.randrange(4)}",
            "agent": rng.choice(people),
            "occurred_at": f"2025-0{1 + i % 9}-1{i % 9}T10:00:00Z",
        }
        if kind == "msg":
            doc |= {
                "type": "message.user",
                "payload": {"text": f"Met {rng.choice(people)} in Oslo, paid ${i}"},
            }
        elif kind == "fact":
            doc |= {
                "type": "fact.asserted",
                "payload": {
                    "subject": rng.choice(people),
                    "predicate": "city",
                    "object": rng.choice(["Oslo", "Rome"]),
                },
            }
        else:
            doc |= {"type": "tool.call", "payload": {"tool": "maps", "arguments": {"q": i}}}
        o = sequence(RawRecord(orjson.dumps(doc), 0, i, "raw"), state, "2025-10-01T00:00:00Z")
        assert isinstance(o, Sequenced)
        out.append(o.entry)
    return out


def snapshot(store: FalkorGraphStore) -> dict[str, Any]:
    out: dict[str, Any] = {"counts": store.counts()}
    for tenant in ("t1", "t2"):
        facts = store.facts(tenant, include_superseded=True)
        out[tenant] = sorted(f.model_dump_json() for f in facts)
        out[tenant + "-chain"] = [e.model_dump_json() for e in store.chain(tenant, "e0", radius=50)]
    return out


def project(store: FalkorGraphStore, entries: list[dict[str, Any]], batch: int) -> None:
    store.ensure_schema()
    for i in range(0, len(entries), batch):
        store.write(graph_batch([extract(e) for e in entries[i : i + batch]]))


def test_graph_replay_is_identical_and_idempotent(falkordb_server: Server) -> None:
    client = FalkorDB(port=falkordb_server.port, password=falkordb_server.password)
    entries = ledger(300)
    a, b = FalkorGraphStore(client, "replay_a"), FalkorGraphStore(client, "replay_b")
    try:
        project(a, entries, batch=64)
        project(b, entries, batch=17)  # other batch boundaries, same result
        assert snapshot(a) == snapshot(b)
        assert a.counts()["events"] == 300
        before = snapshot(a)
        project(a, entries, batch=50)  # a redelivery of everything
        assert snapshot(a) == before
    finally:
        a.drop()
        b.drop()


def test_vector_replay_is_identical_and_idempotent(tmp_path: Path) -> None:
    entries = ledger(120)
    emb = HashingEmbedder()
    extractions = [extract(e, light=True) for e in entries]
    idx_a = EdgeVectorIndex(tmp_path / "a", "a", emb.dim)
    idx_b = EdgeVectorIndex(tmp_path / "b", "b", emb.dim)
    try:
        for idx in (idx_a, idx_b):
            idx.ensure()
            idx.upsert(vector_points(extractions, emb))
        idx_a.upsert(vector_points(extractions, emb))
        assert idx_a.count() == idx_b.count() == 120
        q = emb.embed(["Marta Lopez in Oslo"])[0].tolist()
        for tenant in ("t1", "t2"):
            # Every point of the tenant per lane: lane scores are exact, while fused ranks
            # of tied points may fall either way.
            for mode in ("dense", "sparse"):
                ha = idx_a.query(tenant, q, "Marta Oslo", limit=500, mode=mode)
                hb = idx_b.query(tenant, q, "Marta Oslo", limit=500, mode=mode)
                assert len(ha) > 20 or mode == "sparse"
                assert sorted((h.point_key, round(h.score, 5)) for h in ha) == sorted(
                    (h.point_key, round(h.score, 5)) for h in hb
                )
                assert all(h.payload["tenant"] == tenant for h in ha)
    finally:
        idx_a.close()
        idx_b.close()
