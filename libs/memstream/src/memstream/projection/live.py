"""The live projection version's stores, for whoever reads them: one lookup, apart from checkout.

Checkout, forgetting, read-after and feedback each take the stores they need from here, never
from each other. The live version is read from the registry at every call (a promote is
atomic); a version's graph store and (server) vector index are opened once and kept, and in
the embedded stack the vector index is the one this process's own projector holds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from memstream.graph.factory import open_graph_store
from memstream.graph.port import GraphStore
from memstream.projection.projectors import VectorProjector
from memstream.projection.runner import ProjectionManager
from memstream.projection.versions import FileProjectionRegistry, VersionInfo, registry_path
from memstream.settings import Settings
from memstream.vectors.factory import open_vector_index
from memstream.vectors.port import VectorIndex


class NoProjection(RuntimeError):
    """No live projection version (or its index) to read from yet."""


@dataclass
class LiveStores:
    """The live version and its stores, looked up at each call."""

    registry: FileProjectionRegistry
    graph_for: Callable[[VersionInfo], GraphStore]
    index_for: Callable[[VersionInfo], VectorIndex | None]

    def live(self) -> VersionInfo:
        """The live version, read from the registry now (:class:`NoProjection`: none yet)."""
        reg = self.registry.load()
        if reg.live is None or reg.live not in reg.versions:
            raise NoProjection("no live projection version yet")
        return reg.versions[reg.live]

    def graph(self) -> GraphStore:
        """The live version's graph store."""
        return self.graph_for(self.live())

    def index(self) -> VectorIndex | None:
        """The live version's vector index, if this process can read it (None: not open
        here)."""
        return self.index_for(self.live())

    def open_index(self, info: VersionInfo) -> VectorIndex:
        """``info``'s vector index; :class:`NoProjection` while it is not open here."""
        index = self.index_for(info)
        if index is None:
            raise NoProjection(f"the vector index of {info.name} is not open yet")
        return index


@dataclass
class _Opened:
    """Each version's stores, opened once."""

    settings: Settings
    vectors: ProjectionManager | None
    graphs: dict[str, GraphStore] = field(default_factory=dict)
    indexes: dict[str, VectorIndex] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def graph(self, info: VersionInfo) -> GraphStore:
        with self.lock:
            if info.name not in self.graphs:
                self.graphs[info.name] = open_graph_store(self.settings, info.graph_namespace)
            return self.graphs[info.name]

    def index(self, info: VersionInfo) -> VectorIndex | None:
        if self.vectors is not None:  # embedded: the projector in this process holds the shard
            projector = self.vectors.projector(info.name)
            return projector.index if isinstance(projector, VectorProjector) else None
        with self.lock:
            if info.name not in self.indexes:
                self.indexes[info.name] = open_vector_index(
                    self.settings, info.vector_collection, info.config.dim
                )
            return self.indexes[info.name]


def open_live_stores(settings: Settings, vectors: ProjectionManager | None) -> LiveStores:
    """The live stores of ``settings``' deployment; ``vectors``: this process's own vector
    projection (the embedded stack), whose index reads go to."""
    opened = _Opened(settings, vectors)
    return LiveStores(
        FileProjectionRegistry(registry_path(settings.data_dir)), opened.graph, opened.index
    )
