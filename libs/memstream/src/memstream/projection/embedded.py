"""Wiring of the vector projection (Edge in the API process, or a Qdrant server).

In the embedded stack the projection lives in the API process, which outlives broker
restarts: on a new broker epoch the API gives its loops new consumers
(:meth:`ProjectionManager.restart_loops`), the index and projectors stay open for reads.
"""

from __future__ import annotations

from collections.abc import Callable

from memstream.embed.registry import get_embedder
from memstream.kafka.clients import make_producer
from memstream.ledger.opening import EntryOpener, reading_keys
from memstream.projection.components import VECTOR_PROJECTOR
from memstream.projection.keys import KeyForm
from memstream.projection.projectors import VectorProjector
from memstream.projection.purge import PurgeOrder
from memstream.projection.runner import ProjectionManager
from memstream.projection.versions import (
    DEFAULT_VERSION,
    FileProjectionRegistry,
    ProjectionConfig,
    VersionInfo,
    registry_path,
)
from memstream.settings import Settings
from memstream.vectors.factory import open_vector_index

# The projector's producer only sends dead letters. An idempotent producer whose broker
# restarted empty never delivers again (its producer id is unknown there; seen with Tansu),
# a plain one reconnects; acks=all stays. A dead letter sent twice is harmless.
DEAD_LETTER_PRODUCER = {"enable.idempotence": False}


def default_config(
    embedder_name: str | None = None, feedback: bool = True, keys: KeyForm = "context"
) -> ProjectionConfig:
    embedder = get_embedder(embedder_name)
    return ProjectionConfig(
        embedder=embedder.name,
        embedder_version=embedder.version,
        dim=embedder.dim,
        feedback=feedback,
        keys=keys,
    )


def ensure_default_version(settings: Settings) -> None:
    """A fresh data dir gets version ``v1`` with the default embedder, live."""
    registry = FileProjectionRegistry(registry_path(settings.data_dir))
    if not registry.load().versions:
        registry.register(DEFAULT_VERSION, default_config())


def vector_manager(
    settings: Settings, bootstrap: str, on_purge: Callable[[PurgeOrder], None] | None = None
) -> ProjectionManager:
    """The vector projection of every version; ``on_purge`` hears each tombstone it obeyed."""
    opener = EntryOpener(reading_keys(settings))

    def factory(info: VersionInfo) -> VectorProjector:
        embedder = get_embedder(info.config.embedder)
        index = open_vector_index(settings, info.vector_collection, info.config.dim)
        producer = make_producer(bootstrap, **DEAD_LETTER_PRODUCER)
        return VectorProjector(
            index,
            embedder,
            info.name,
            producer,
            optimize=settings.vector_optimize,
            opener=opener,
            keys=info.config.keys,
            on_purge=on_purge,
        )

    return ProjectionManager(
        settings=settings,
        bootstrap=bootstrap,
        registry=FileProjectionRegistry(registry_path(settings.data_dir)),
        component=VECTOR_PROJECTOR,
        factory=factory,
        group_of=lambda info: settings.api_replica_group(info.vector_group),
    )
