"""A record the broker refuses for good leaves the outbox for the DLQ, on a real broker.

Here the outbox is handed a record past its producer's limit directly (the edge refuses such
an event with 413; a limit lowered while events wait in the outbox makes one). Its
neighbours reach the raw topic at once; it waits, counted as undeliverable and making the
outbox unhealthy, until the DLQ takes its dead letter, and is never sent again.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from memstream.events import Event, EventAdapter
from memstream.intake.outbox import Outbox
from memstream.intake.producer import BatchProducer
from memstream.kafka.topics import RAW, ensure_topics
from memstream.metrics import OUTBOX_DEAD_LETTERED, OUTBOX_RESENT, OUTBOX_UNDELIVERABLE
from memstream.ops.loops import outbox_problems
from memstream.settings import Settings
from prometheus_client import REGISTRY
from stackproc import wait_until
from topicread import read_topic

LIMIT = 64 << 10


def message(tenant: str, i: int, text: str) -> Event:
    return EventAdapter.validate_python(
        {
            "id": f"{tenant}-{i}",
            "tenant": tenant,
            "stream": "s1",
            "agent": "Noor",
            "type": "tool.result",
            "occurred_at": datetime(2026, 11, 29, tzinfo=UTC),
            "payload": {"tool": "fetch", "output": text},
        }
    )


def problems() -> list[str]:
    samples = [s for m in REGISTRY.collect() for s in m.samples]
    return outbox_problems(samples, 300.0)


def _letter_failed(caplog: pytest.LogCaptureFixture) -> bool:
    return any(
        r.getMessage().startswith("dead letter of outbox event")
        and "not delivered" in r.getMessage()
        for r in caplog.records
    )


def test_a_poison_record_goes_to_the_dlq_without_holding_its_neighbours(
    broker: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ensure_topics(broker, Settings())
    tenant = f"poison{uuid.uuid4().hex[:6]}"
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"  # created only later: its first dead letter fails
    # A short delivery timeout: the dead letter to the missing topic fails within seconds.
    producer = BatchProducer(broker, "outbox-test", None, LIMIT, **{"message.timeout.ms": 3000})
    outbox = Outbox(tmp_path / "outbox", broker, producer, 1 << 30, "outbox-test", dlq=dlq)
    undeliverable = OUTBOX_UNDELIVERABLE.labels("outbox-test")
    resent = OUTBOX_RESENT.labels("outbox-test")._value.get()
    try:
        events = [message(tenant, 0, "before"), message(tenant, 1, "ü" * LIMIT),
                  message(tenant, 2, "after")]  # fmt: skip
        values = producer.encode(events)
        spooled = asyncio.run(outbox.accept(events, values, 5.0))
        assert spooled.pending is not None and f"{tenant}-1" in spooled.pending
        assert outbox.tracker.undeliverable() == 1
        outbox.spool.roll_if_due()  # nothing else is written: close the segment by its age
        # Each tick sends the dead letter again once the last one failed: wait for a failure
        # reported, not for a moment with none on its way (under load one is always on it).
        wait_until(lambda: (outbox.tick() or True) and _letter_failed(caplog), 30,
                   "the dead letter to the missing DLQ topic to fail")  # fmt: skip
        assert undeliverable._value.get() == 1
        assert problems() == [
            "outbox: 1 accepted event(s) refused by the broker for good and not yet in the DLQ"
        ]
        raw_ids = {orjson.loads(m.value() or b"{}")["id"] for m in read_topic(broker, RAW)}
        assert {f"{tenant}-0", f"{tenant}-2"} <= raw_ids and f"{tenant}-1" not in raw_ids

        admin = AdminClient({"bootstrap.servers": broker})
        admin.create_topics([NewTopic(dlq, 1, 1)])[dlq].result()
        dead = OUTBOX_DEAD_LETTERED.labels("outbox-test")._value.get()
        wait_until(lambda: (outbox.tick() or True) and outbox.tracker.undeliverable() == 0,
                   30, "the dead letter to reach the DLQ")  # fmt: skip
        assert undeliverable._value.get() == 0 and problems() == []
        assert OUTBOX_DEAD_LETTERED.labels("outbox-test")._value.get() == dead + 1
        (letter,) = [orjson.loads(m.value() or b"{}") for m in read_topic(broker, dlq)]
        assert "Message size too large" in letter["reason"]
        source = letter["source"]
        assert source["event_id"] == f"{tenant}-1" and source["line"] == 1
        assert source["tenant"] == tenant and source["bytes"] == len(values[1])
        assert letter["raw_truncated"] and letter["raw_bytes"] == len(values[1])
        head = base64.b64decode(letter["raw_b64"])
        assert head == values[1][: LIMIT // 2]  # a head that fits a record under the limit
        for _ in range(3):  # later ticks never send it (or its neighbours) again
            outbox.tick()
        assert OUTBOX_RESENT.labels("outbox-test")._value.get() == resent
        assert len(read_topic(broker, dlq)) == 1
    finally:
        outbox.spool.close()
        producer.close()
