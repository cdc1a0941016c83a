"""Topic names and idempotent topic administration."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from memstream.settings import Settings

RAW = "memory.events.raw"
LEDGER = "memory.ledger"
DLQ = "memory.dlq"
FACTS = "memory.facts"
LATENTS = "memory.latents"
CHECKOUTS = "memory.checkouts"
# The ledger entries the retrospective pass reads, copied as they are and keyed by tenant
# alone, so a tenant's task records land on the partition of its checkout traces.
LEARNING = "memory.learning"
# Every ledger entry, copied as it is and keyed by tenant alone: the latent builder groups a
# tenant's whole ledger, so each of its replicas must hold whole tenants.
LATENT_INPUTS = "memory.latent-inputs"

log = logging.getLogger(__name__)
MAX_MESSAGE_BYTES = "max.message.bytes"

# Consumer groups, named once so status/lag and the workers agree.
SEQUENCER_GROUP = "memstream-sequencer"
ARCHIVER_GROUP = "memstream-archiver"
RETROSPECTIVE_GROUP = "memstream-retrospective"
LEARNING_ROUTE_GROUP = "memstream-learning-route"
LATENTS_GROUP = "memstream-latents"
LATENTS_ROUTE_GROUP = "memstream-latents-route"


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    retention_ms: int  # -1 = forever


def topic_specs(settings: Settings) -> list[TopicSpec]:
    """Every topic memstream writes; raw and ledger share a partition count (see sequencer), and
    so do the traces and the learning records (see the retrospective), and the latent inputs
    and the artifacts (see the latent builder)."""
    p = settings.topic_partitions
    return [
        TopicSpec(RAW, p, settings.raw_retention_ms),
        TopicSpec(LEDGER, p, -1),
        TopicSpec(DLQ, 1, settings.dlq_retention_ms),
        TopicSpec(FACTS, p, -1),
        TopicSpec(LATENTS, p, -1),
        TopicSpec(CHECKOUTS, p, settings.dlq_retention_ms),
        # Kept as long as the ledger: a replica rebuilds its tenants' task records from it.
        TopicSpec(LEARNING, p, -1),
        # The same for the latent builder's copy; keyed like memory.latents, so a replica's
        # partitions of both hold the same tenants.
        TopicSpec(LATENT_INPUTS, p, -1),
    ]


def ensure_topics(bootstrap: str, settings: Settings, timeout: float = 15.0) -> list[str]:
    """Create missing topics; return the names created. Existing topics are left alone."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=timeout).topics)
    wanted = [s for s in topic_specs(settings) if s.name not in existing]
    if not wanted:
        return []
    futures = admin.create_topics(
        [
            NewTopic(
                s.name,
                s.partitions,
                settings.topic_replication,
                config={
                    "retention.ms": str(s.retention_ms),
                    MAX_MESSAGE_BYTES: str(settings.max_record_bytes),
                },
            )
            for s in wanted
        ],
        operation_timeout=timeout,
    )
    created = []
    for name, fut in futures.items():
        try:
            fut.result()
            created.append(name)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    return created


@dataclass(frozen=True)
class RecordLimit:
    """The largest record the raw and ledger topics take, and where that was read."""

    bytes: int
    source: str


def record_limit(bootstrap: str, ceiling: int, timeout: float = 5.0) -> RecordLimit:
    """The smaller of ``ceiling`` (the producer's own limit: ``MEMSTREAM_MAX_RECORD_BYTES``)
    and the ``max.message.bytes`` the broker reports for the raw and ledger topics. A broker
    that does not answer, or reports no limit, leaves the ceiling."""
    limit = RecordLimit(ceiling, "MEMSTREAM_MAX_RECORD_BYTES")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in (RAW, LEDGER)]
    try:
        futures = admin.describe_configs(resources, request_timeout=timeout)
        for resource, future in futures.items():
            entry = future.result(timeout).get(MAX_MESSAGE_BYTES)
            value = entry.value if entry is not None else None
            if value is not None and value.isdigit() and int(value) < limit.bytes:
                limit = RecordLimit(int(value), f"{MAX_MESSAGE_BYTES} of {resource.name}")
    except Exception as exc:  # KafkaException, a timeout: the setting stands
        log.warning("topic record limits not read from %s (%s); using %s", bootstrap, exc,
                    limit.source)  # fmt: skip
    return limit
