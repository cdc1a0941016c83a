"""Re-keying a topic by tenant: what a worker that must hold whole tenants reads.

The ledger is keyed ``tenant/stream``, so one tenant's streams spread over its partitions. A
worker whose state is per tenant (the retrospective pass, the latent builder) cannot split the
ledger's partitions among replicas; a route loop copies the records it needs, as they are
(sealed copies stay sealed under the same keys), to a topic keyed by the tenant alone. Topics
with the same partition count and keys then put a tenant on the same partition number, so a
replica's assignment holds whole tenants. A copy routed twice (a crash between producing and
committing) is one the reader already skips.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from confluent_kafka import Message, Producer

from memstream.kafka.clients import make_producer
from memstream.kafka.loop import BatchLoop
from memstream.kafka.produce import DeliveryReports, flush_or_raise, produce_with_backpressure
from memstream.kafka.reading import headers_of, partition_count
from memstream.kafka.runner import worker_loop
from memstream.kafka.topics import LEDGER
from memstream.metrics import EVENTS_PRODUCED
from memstream.settings import Settings


def tenant_key(ledger_key: bytes | None) -> bytes | None:
    """The tenant of a ledger key (``tenant/stream``: a tenant holds no ``/``); None when the
    key has no tenant."""
    if not ledger_key or b"/" not in ledger_key:
        return None
    tenant = ledger_key.split(b"/", 1)[0]
    return tenant or None


class TenantRouter:
    """Copies the records ``wanted`` accepts (all without it) to ``topic``, keyed by tenant.

    A record with no tenant in its key is malformed and not copied: the projectors, which
    read the ledger itself, dead-letter it."""

    def __init__(
        self,
        producer: Producer,
        component: str,
        topic: str,
        wanted: Callable[[bytes], bool] | None = None,
    ) -> None:
        self.producer = producer
        self.component = component
        self.topic = topic
        self.wanted = wanted
        self.reports = DeliveryReports()
        self._m_routed = EVENTS_PRODUCED.labels(component, topic)

    def process(self, msgs: list[Message]) -> None:
        routed = 0
        for m in msgs:
            value, key = m.value(), tenant_key(m.key())
            if key is None or value is None or (self.wanted is not None and not self.wanted(value)):
                continue
            produce_with_backpressure(
                self.producer,
                self.topic,
                value,
                key=key,
                headers=list(headers_of(m).items()),
                on_delivery=self.reports,
                record_id=f"{m.partition()}:{m.offset()}",
            )
            routed += 1
        if routed:  # raises when one was not written: nothing is committed
            where = f"{self.component} copies to {self.topic}"
            flush_or_raise(self.producer, 30, self.reports, where)
        self._m_routed.inc(routed)


def not_co_partitioned(bootstrap: str, a: str, b: str) -> str | None:
    """Why topics ``a`` and ``b`` do not put a tenant on the same partition number (their
    partition counts differ), or None when they do."""
    na, nb = partition_count(bootstrap, a), partition_count(bootstrap, b)
    if na == nb:
        return None
    return f"{a} has {na} partitions, {b} {nb}: a replica would not hold whole tenants of both"


def route_loop(
    bootstrap: str,
    settings: Settings,
    group: str,
    router: TenantRouter,
    stop: threading.Event,
) -> BatchLoop:
    """The loop of group ``group`` that feeds the ledger to ``router``, sharing ``stop``."""
    return worker_loop(
        bootstrap, settings, group, (LEDGER,), router.component, router.process, stop_event=stop
    )


def tenant_router(
    bootstrap: str,
    settings: Settings,
    component: str,
    topic: str,
    wanted: Callable[[bytes], bool] | None = None,
) -> TenantRouter:
    """A router with its own producer (failures reported only; ``flush`` still waits for
    every acknowledgement), taking records as large as the ledger's."""
    producer = make_producer(
        bootstrap,
        **{"delivery.report.only.error": True, "message.max.bytes": settings.max_record_bytes},
    )
    return TenantRouter(producer, component, topic, wanted)
