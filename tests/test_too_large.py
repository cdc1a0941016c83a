"""A record that fits the raw topic but whose ledger entry Kafka refuses for its size: the
sequencer dead-letters it (truncated raw bytes, the reason, the offset) and the stream's
chain goes on from the entry before it, instead of failing the batch forever."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import orjson
import pytest
from memstream.kafka.clients import make_producer
from memstream.kafka.dlq import MAX_RAW_BYTES
from memstream.kafka.topics import DLQ, LEDGER, ensure_topics
from memstream.metrics import RECORDS_TOO_LARGE
from memstream.settings import Settings
from proving import sequencer
from scratchtopics import envelope, scratch_topic
from topicread import read_topic

RAW_BYTES = 999_850  # fits the producer's 1,000,000; the chain fields push the entry over


def padded(tenant: str, i: int, size: int) -> bytes:
    """A tool result whose output (unbounded, unlike a message's text) makes ``size`` bytes."""

    def doc(output: str) -> dict[str, Any]:
        return envelope(tenant, i, "") | {
            "type": "tool.result",
            "payload": {"tool": "scraper", "output": output},
        }

    raw = orjson.dumps(doc("x" * (size - len(orjson.dumps(doc(""))))))
    assert len(raw) == size
    return raw


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


def test_an_entry_too_large_for_kafka_is_dead_lettered_and_the_chain_goes_on(
    topics: str,
) -> None:
    tenant = f"big{uuid.uuid4().hex[:6]}"
    values = [
        orjson.dumps(envelope(tenant, 0, "before")),
        padded(tenant, 1, RAW_BYTES),
        orjson.dumps(envelope(tenant, 2, "after")),
    ]
    topic, msgs = scratch_topic(topics, values)
    too_large = RECORDS_TOO_LARGE.labels("sequencer", LEDGER)
    before = too_large._value.get()
    seq = sequencer(topics, make_producer(topics, **{"delivery.report.only.error": True}))
    seq.process(msgs)  # returns: the loop commits past all three
    ledger = [
        orjson.loads(m.value() or b"{}")
        for m in read_topic(topics, LEDGER)
        if (m.key() or b"").startswith(tenant.encode())
    ]
    assert [(e["id"], e["seq"]) for e in ledger] == [(f"{tenant}-0", 1), (f"{tenant}-2", 2)]
    assert ledger[1]["prev_hash"] == ledger[0]["hash"]
    assert too_large._value.get() - before == 1
    dead = [
        doc
        for doc in (orjson.loads(m.value() or b"{}") for m in read_topic(topics, DLQ))
        if doc["source"]["topic"] == topic
    ]
    assert len(dead) == 1
    [doc] = dead
    assert doc["source"] == {"topic": topic, "partition": 0, "offset": 1}
    assert doc["reason"].startswith("ledger entry of ") and "MSG_SIZE_TOO_LARGE" in doc["reason"]
    assert doc["raw_truncated"] is True and doc["raw_bytes"] == RAW_BYTES
    assert base64.b64decode(doc["raw_b64"]) == values[1][:MAX_RAW_BYTES]
