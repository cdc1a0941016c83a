"""The embedded index build: off by default (it freezes its process), on when asked."""

from __future__ import annotations

import time
from pathlib import Path

from memstream.embed.hashing import HashingEmbedder
from memstream.projection.metrics import OPTIMIZING, UNOPTIMIZED
from memstream.projection.projectors import IdleOptimizer
from memstream.records.projected import VectorPoint
from memstream.vectors.edge import EdgeVectorIndex


def points(n: int, dim: int) -> list[VectorPoint]:
    emb = HashingEmbedder()
    texts = [f"note {i} about kayaks" for i in range(n)]
    vecs = emb.embed(texts)
    return [
        VectorPoint(
            point_key=f"p{i}",
            dense=vecs[i].tolist(),
            text=t,
            payload={"tenant": "t", "kind": "event", "stream": "s"},
        )
        for i, t in enumerate(texts)
    ]


def test_off_by_default(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path, "off", 256)
    try:
        opt = IdleOptimizer(index, version="off")
        assert not opt.thread.is_alive()
    finally:
        index.close()


def test_builds_after_writes_pause_and_reports_it(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path, "on", 256)
    index.ensure()
    opt = IdleOptimizer(index, min_new=50, idle_s=0.2, version="on", enabled=True)
    try:
        index.upsert(points(120, 256))
        opt.wrote(120)
        assert UNOPTIMIZED.labels("vector-projector", "on")._value.get() == 120
        deadline = time.monotonic() + 30
        while opt.new and time.monotonic() < deadline:
            time.sleep(0.05)
        while OPTIMIZING.labels("vector-projector", "on")._value.get() and (
            time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert opt.new == 0
        assert UNOPTIMIZED.labels("vector-projector", "on")._value.get() == 0
        assert OPTIMIZING.labels("vector-projector", "on")._value.get() == 0
        assert index.count() == 120
    finally:
        opt.stop.set()
        opt.thread.join(30)
        index.close()
