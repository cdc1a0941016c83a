"""Checkout reuses parsed latent artifacts briefly, and forgets them on demand (a purge), also
while checkouts on other threads add to them."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import latentdata
from memstream.checkout.service import CheckoutService
from memstream.projection.versions import FileProjectionRegistry, ProjectionConfig, VersionInfo
from memstream.records.latent import LatentArtifact
from memstream.records.projected import VectorHit

T = "atelier"


class Graph:
    """The one read ``_artifacts`` makes, counted."""

    def __init__(self, artifacts: list[LatentArtifact]) -> None:
        self.by_id = {a.artifact_id: a for a in artifacts}
        self.asked: list[list[str]] = []

    def latents_by_id(
        self, tenant: str, ids: list[str], refs: int | None = None
    ) -> list[LatentArtifact]:
        self.asked.append(list(ids))
        return [self.by_id[i] for i in ids if i in self.by_id and tenant == T]


def hit(a: LatentArtifact | str) -> VectorHit:
    artifact_id = a if isinstance(a, str) else a.artifact_id
    return VectorHit(
        point_key=f"latent:{T}:{artifact_id}", score=1.0, payload={"artifact_id": artifact_id}
    )


def service(tmp_path: Path, graph: Graph) -> tuple[CheckoutService, VersionInfo]:
    cfg = ProjectionConfig(embedder="static", embedder_version="1", dim=8)
    info = VersionInfo(name="v1", config=cfg, config_hash="x" * 16, created_at="2026-01-01")
    svc = CheckoutService(
        registry=FileProjectionRegistry(tmp_path / "projections.json"),
        graph_for=lambda _info: graph,  # type: ignore[arg-type,return-value]
        index_for=lambda _info: None,
    )
    return svc, info


def test_artifacts_are_reused_within_the_ttl_and_forgotten_on_demand(
    tmp_path: Path, monkeypatch: Any
) -> None:
    ref = latentdata.ref(T, "e1")
    kiln = latentdata.episode(T, "s", "Ngozi Adébáyọ̀ fixed the kiln", [ref])
    glaze = latentdata.episode(T, "s", "the glaze order", [ref], group="g2")
    old = latentdata.stale(latentdata.episode(T, "s", "the old kiln", [ref], group="g3"))
    graph = Graph([kiln, glaze, old])
    clock = [100.0]
    monkeypatch.setattr("memstream.checkout.service.time.monotonic", lambda: clock[0])
    svc, info = service(tmp_path, graph)
    hits = [hit(glaze), hit(kiln), hit(old), hit("gone"), hit(kiln)]
    assert svc._artifacts(info, T, hits) == [glaze, kiln]  # in hit order, stale ones left out
    assert graph.asked == [[glaze.artifact_id, kiln.artifact_id, old.artifact_id, "gone"]]
    clock[0] += svc.artifact_ttl - 0.1
    assert svc._artifacts(info, T, hits) == [glaze, kiln]
    assert graph.asked[1:] == [["gone"]]  # only what was not found is asked again
    clock[0] += 0.2
    svc._artifacts(info, T, [hit(kiln)])
    assert graph.asked[2:] == [[kiln.artifact_id]]  # past the TTL: read again
    svc.forget_tenant(T)
    svc._artifacts(info, T, [hit(kiln)])
    assert graph.asked[3:] == [[kiln.artifact_id]]
    assert svc._artifacts(info, "other", [hit(kiln)]) == []  # per tenant


def test_a_purge_forgets_while_checkouts_on_other_threads_add_artifacts(tmp_path: Path) -> None:
    svc, _ = service(tmp_path, Graph([]))
    kiln = latentdata.episode(T, "s", "the kiln", [latentdata.ref(T, "e1")])
    for i in range(3000):
        svc.artifacts[("v1", f"tenant-{i % 7}", f"a{i}")] = (0.0, kiln)
    stop = threading.Event()

    def checkouts() -> None:
        i = 0
        while not stop.is_set():
            svc.artifacts[("v1", "busy", f"b{i % 5000}")] = (0.0, kiln)
            svc.artifacts.pop(("v1", "busy", f"b{(i - 100) % 5000}"), None)
            i += 1

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows at once
    adding = threading.Thread(target=checkouts)
    adding.start()
    try:
        for _ in range(2000):
            svc.forget_tenant("tenant-3")  # raised "dictionary changed size" before
    finally:
        stop.set()
        adding.join()
        sys.setswitchinterval(switch)
    assert not [k for k in svc.artifacts if k[1] == "tenant-3"]
    assert sum(1 for k in svc.artifacts if k[1] == "tenant-4") == 428
