"""The API's producer outlives its Kafka client's fatal error. An idempotent client that a
broker restarted empty no longer knows fails for good (UNKNOWN_PRODUCER_ID), and the error
can reach the delivery thread before the broker watch sees the restart: a fresh client must
take its place, or every later send waits for reports nobody serves.

No broker can be made to give a fatal error on demand, so the client here is the real one
(against a real broker) with its next poll failing as librdkafka's fatal error does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from memstream.events import Event, EventAdapter
from memstream.intake.producer import BatchProducer
from memstream.kafka.topics import ensure_topics
from memstream.settings import Settings
from stackproc import wait_until


class FailsForGood:
    """A real client whose next poll raises the fatal error (and every one after, as a
    client that failed for good may)."""

    def __init__(self, client: Producer) -> None:
        self.client = client

    def poll(self, timeout: float = 0) -> int:
        error = KafkaError(KafkaError._FATAL, "unknown producer id", fatal=True)
        raise KafkaException(error)

    def __len__(self) -> int:
        return len(self.client)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def events(tag: str) -> list[Event]:
    def event(i: int) -> Event:
        doc = {"id": f"{tag}-{i}", "tenant": "t", "stream": f"s{i % 4}", "agent": "a",
               "type": "message.user", "payload": {"text": f"turn {i}"},
               "occurred_at": "2026-03-01T12:00:00Z"}  # fmt: skip
        return EventAdapter.validate_python(doc)

    return [event(i) for i in range(20)]


@pytest.mark.timeout(120)
def test_a_client_failed_for_good_is_replaced_and_the_next_sends_deliver(broker: str) -> None:
    ensure_topics(broker, Settings())
    producer = BatchProducer(broker, component="test")
    try:
        asyncio.run(producer.produce(events("before"), wait_s=30))
        with producer._swap:
            failing = producer._producer = FailsForGood(producer._producer)  # type: ignore[assignment]
        wait_until(lambda: producer._producer is not failing, 10, "a fresh client")
        assert producer._poller.is_alive()
        asyncio.run(producer.produce(events("after"), wait_s=30))  # raises if not delivered
    finally:
        producer.close(timeout=2)
