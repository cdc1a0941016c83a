"""Builds the checkout and forget services over this process's stores."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

from memstream.checkout.service import CheckoutService
from memstream.forget.service import ForgetService, Forgetting, NothingHeld, forget_ordered
from memstream.forget.topics import purge_topics
from memstream.graph.factory import open_graph_store
from memstream.graph.port import GraphStore
from memstream.kafka.topics import CHECKOUTS
from memstream.learning.trace import CheckoutTrace
from memstream.metrics import PURGE_ITEMS_REMOVED
from memstream.projection.projectors import VectorProjector
from memstream.projection.purge import PurgeOrder
from memstream.projection.runner import ProjectionManager
from memstream.projection.versions import FileProjectionRegistry, VersionInfo, registry_path
from memstream.settings import Settings
from memstream.shred.port import DataKeys
from memstream.shred.traces import TraceSealer
from memstream.summarize.providers import SummarizeDisabled
from memstream.summarize.service import Summarizer
from memstream.vectors.factory import open_vector_index
from memstream.vectors.port import VectorIndex

from memstream_api.context import ApiContext
from memstream_api.producing import BatchProducer


def build_checkout(
    settings: Settings,
    vectors: ProjectionManager | None,
    producer: BatchProducer,
    sealer: TraceSealer | None = None,
) -> CheckoutService:
    """Graph stores and (server) vector indexes are opened once per version and reused.
    Checkout traces are sealed under their packet's key by ``sealer`` (none: clear)."""
    traces = sealer or TraceSealer(None)
    graphs: dict[str, GraphStore] = {}
    indexes: dict[str, VectorIndex] = {}
    lock = threading.Lock()

    def graph_for(info: VersionInfo) -> GraphStore:
        with lock:
            if info.name not in graphs:
                graphs[info.name] = open_graph_store(settings, info.graph_namespace)
            return graphs[info.name]

    def index_for(info: VersionInfo) -> VectorIndex | None:
        if vectors is not None:  # embedded: the projector in this process holds the Edge shard
            projector = vectors.projector(info.name)
            return projector.index if isinstance(projector, VectorProjector) else None
        with lock:
            if info.name not in indexes:
                indexes[info.name] = open_vector_index(
                    settings, info.vector_collection, info.config.dim
                )
            return indexes[info.name]

    def trace(doc: CheckoutTrace) -> None:
        value = traces.encode(doc.model_dump(mode="json"))
        if value is not None:  # None: a purge destroyed the packet's key while it was answered
            producer.send(CHECKOUTS, doc.tenant, value)

    return CheckoutService(
        registry=FileProjectionRegistry(registry_path(settings.data_dir)),
        graph_for=graph_for,
        index_for=index_for,
        trace=trace,
    )


def memory_of(
    checkout: CheckoutService, summarizer: Summarizer | SummarizeDisabled
) -> dict[str, Forgetting]:
    """What this process holds in memory that a purge must forget, by report name."""
    cache = summarizer.cache if isinstance(summarizer, Summarizer) else NothingHeld()
    return {"summary_cache_entries": cache, "recent_packets": checkout.packets}


def tombstone_listener(
    ctx: ApiContext,
    checkout: CheckoutService,
    summarizer: Summarizer | SummarizeDisabled,
    keys: DataKeys,
) -> Callable[[PurgeOrder], None]:
    """Forgets, when this process's vector projection obeys a tombstone, what it holds of the
    purge: a purge run by another API replica reaches this one's memory so."""
    memory = memory_of(checkout, summarizer)
    for kind in memory:  # 0 until a tombstone is heard
        PURGE_ITEMS_REMOVED.labels(ctx.component, "memory", kind)

    def heard(order: PurgeOrder) -> None:
        checkout.forget_tenant(order.tenant)
        named = checkout.packets.named(order.tenant)
        gone = forget_ordered(order, memory, named, keys.tenant_secret(order.tenant))
        for kind, n in gone.items():
            PURGE_ITEMS_REMOVED.labels(ctx.component, "memory", kind).inc(n)

    return heard


def build_forget(
    ctx: ApiContext,
    checkout: CheckoutService,
    keys: DataKeys,
    summarizer: Summarizer | SummarizeDisabled,
) -> ForgetService:
    """The forget service over this process's stores and what it holds in memory."""
    memory = memory_of(checkout, summarizer)
    return ForgetService(
        checkout=checkout,
        keys=keys,
        topics=partial(purge_topics, ctx.bootstrap, ctx.settings),
        archive=ctx.settings.archive_dir,
        memory=memory,
        pending=ctx.pending_purges,
        component=ctx.component,
    )
