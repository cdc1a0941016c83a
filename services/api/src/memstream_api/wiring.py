"""Builds the checkout and forget services over this process's live stores."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from memstream.checkout.service import CheckoutService
from memstream.forget.service import ForgetService, Forgetting, NothingHeld, forget_ordered
from memstream.forget.topics import purge_topics
from memstream.intake.producer import BatchProducer
from memstream.kafka.topics import CHECKOUTS
from memstream.learning.trace import CheckoutTrace
from memstream.metrics import PURGE_ITEMS_REMOVED
from memstream.projection.live import LiveStores
from memstream.projection.purge import PurgeOrder
from memstream.shred.port import DataKeys
from memstream.shred.traces import TraceSealer
from memstream.summarize.providers import SummarizeDisabled
from memstream.summarize.service import Summarizer

from memstream_api.context import ApiContext


def build_checkout(
    stores: LiveStores, producer: BatchProducer, sealer: TraceSealer | None = None
) -> CheckoutService:
    """Checkout over the live stores; its traces sealed under their packet's key by
    ``sealer`` (none: clear) and sent to memory.checkouts."""
    traces = sealer or TraceSealer(None)

    def trace(doc: CheckoutTrace) -> None:
        value = traces.encode(doc.model_dump(mode="json"))
        if value is not None:  # None: a purge destroyed the packet's key while it was answered
            producer.send(CHECKOUTS, doc.tenant, value)

    return CheckoutService(stores=stores, trace=trace)


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
    stores: LiveStores,
    checkout: CheckoutService,
    keys: DataKeys,
    summarizer: Summarizer | SummarizeDisabled,
) -> ForgetService:
    """The forget service over the live stores and what this process holds in memory
    (checkout's recent packets and caches, the summary cache)."""
    return ForgetService(
        stores=stores,
        packets=checkout.packets,
        reread=checkout.forget_tenant,
        keys=keys,
        topics=partial(purge_topics, ctx.bootstrap, ctx.settings),
        archive=ctx.settings.archive_dir,
        memory=memory_of(checkout, summarizer),
        pending=ctx.pending_purges,
        component=ctx.component,
    )
