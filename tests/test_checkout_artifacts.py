"""Checkout reuses parsed latent artifacts briefly, and forgets them on demand (a purge), also
while checkouts on other threads add to them."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import latentdata
from memstream.checkout.artifacts import ArtifactCache
from memstream.checkout.service import CheckoutService
from memstream.projection.live import LiveStores
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
    stores = LiveStores(
        registry=FileProjectionRegistry(tmp_path / "projections.json"),
        graph_for=lambda _info: graph,  # type: ignore[arg-type,return-value]
        index_for=lambda _info: None,
    )
    svc = CheckoutService(stores=stores)
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
    cache = ArtifactCache(clock=lambda: clock[0])
    svc, info = service(tmp_path, graph)
    svc.artifacts = cache
    g: Any = graph

    def current(tenant: str, hits: list[VectorHit]) -> list[LatentArtifact]:
        return cache.current(g, info.name, tenant, hits)

    hits = [hit(glaze), hit(kiln), hit(old), hit("gone"), hit(kiln)]
    assert current(T, hits) == [glaze, kiln]  # in hit order, stale ones left out
    assert graph.asked == [[glaze.artifact_id, kiln.artifact_id, old.artifact_id, "gone"]]
    clock[0] += cache.ttl - 0.1
    assert current(T, hits) == [glaze, kiln]
    assert graph.asked[1:] == [["gone"]]  # only what was not found is asked again
    clock[0] += 0.2
    current(T, [hit(kiln)])
    assert graph.asked[2:] == [[kiln.artifact_id]]  # past the TTL: read again
    svc.forget_tenant(T)
    current(T, [hit(kiln)])
    assert graph.asked[3:] == [[kiln.artifact_id]]
    assert current("other", [hit(kiln)]) == []  # per tenant


def test_a_purge_forgets_while_checkouts_on_other_threads_add_artifacts(tmp_path: Path) -> None:
    svc, _ = service(tmp_path, Graph([]))
    kiln = latentdata.episode(T, "s", "the kiln", [latentdata.ref(T, "e1")])
    cache = svc.artifacts
    for i in range(3000):
        cache.put("v1", f"tenant-{i % 7}", kiln.model_copy(update={"artifact_id": f"a{i}"}), 0.0)
    stop = threading.Event()

    def checkouts() -> None:
        i = 0
        while not stop.is_set():
            cache.put("v1", "busy", kiln.model_copy(update={"artifact_id": f"b{i % 5000}"}), 0.0)
            cache.forget("busy")
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
    assert cache.held("tenant-3", set(), "") == 0
    assert cache.held("tenant-4", set(), "") == 428
