"""Topic names and idempotent topic administration."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from memstream.settings import Settings

RAW = "memory.events.raw"
LEDGER = "memory.ledger"
DLQ = "memory.dlq"
FACTS = "memory.facts"
LATENTS = "memory.latents"
CHECKOUTS = "memory.checkouts"

# Consumer groups, named once so status/lag and the workers agree.
SEQUENCER_GROUP = "memstream-sequencer"
ARCHIVER_GROUP = "memstream-archiver"
RETROSPECTIVE_GROUP = "memstream-retrospective"
LATENTS_GROUP = "memstream-latents"


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    retention_ms: int  # -1 = forever


def topic_specs(settings: Settings) -> list[TopicSpec]:
    """Every topic of DESIGN.md §2; raw and ledger share a partition count (see sequencer)."""
    p = settings.topic_partitions
    return [
        TopicSpec(RAW, p, settings.raw_retention_ms),
        TopicSpec(LEDGER, p, -1),
        TopicSpec(DLQ, 1, settings.dlq_retention_ms),
        TopicSpec(FACTS, p, -1),
        TopicSpec(LATENTS, p, -1),
        TopicSpec(CHECKOUTS, p, settings.dlq_retention_ms),
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
                config={"retention.ms": str(s.retention_ms)},
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
