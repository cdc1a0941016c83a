"""Raw events and one-partition scratch topics for tests that drive a consumer directly."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from proving import proved
from topicread import read_topic


def envelope(tenant: str, i: int, text: str) -> dict[str, Any]:
    """A user message of ``tenant``'s stream ``s1``, id ``<tenant>-<i>``."""
    return {
        "id": f"{tenant}-{i}",
        "tenant": tenant,
        "stream": "s1",
        "agent": "Noor",
        "type": "message.user",
        "occurred_at": "2025-09-01T10:00:00Z",
        "payload": {"text": text},
    }


def journal_event(eid: str, text: str, tenant: str = "acme", **extra: Any) -> dict[str, Any]:
    """A user message in ``tenant``'s stream ``journal``, with an accented agent and place."""
    doc: dict[str, Any] = {
        "id": eid,
        "tenant": tenant,
        "stream": "journal",
        "agent": "Zoë Ångström-Nuñez",
        "type": "message.user",
        "occurred_at": "2026-05-01T10:00:00Z",
        "schema_version": 1,
        "payload": {"text": text},
        "metadata": {"place": "Café Müller"},
    }
    doc.update(extra)
    return doc


def raw_event(tenant: str, i: int) -> bytes:
    """The raw record of ``envelope`` saying the deploy key rotated."""
    return orjson.dumps(envelope(tenant, i, f"the deploy key rotated ({i})"))


def scratch_topic(
    bootstrap: str, values: list[bytes], *, prefix: str = "raw", key: bytes = b"t/s1"
) -> tuple[str, list[Message]]:
    """A fresh one-partition topic holding ``values`` at offsets 0..n-1, read back in order."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:  # proved as the stack's producers prove raw records
        producer.produce(topic, value, key=key, headers=proved(value))
    assert producer.flush(10) == 0
    msgs = sorted(read_topic(bootstrap, topic), key=lambda m: m.offset() or 0)
    assert [m.offset() for m in msgs] == list(range(len(values)))
    return topic, msgs


def tenant_reach(bootstrap: str, topic: str, tenant: str) -> dict[int, int]:
    """Per partition of ``topic``, the highest offset of ``tenant``'s records."""
    reach: dict[int, int] = {}
    for m in read_topic(bootstrap, topic):
        partition, offset = m.partition(), m.offset()
        if (m.key() or b"").startswith(f"{tenant}/".encode()) and partition is not None:
            reach[partition] = max(reach.get(partition, -1), offset or 0)
    return reach
