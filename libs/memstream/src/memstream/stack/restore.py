"""Restore the ledger topic from archive segments into a fresh broker."""

from __future__ import annotations

from pathlib import Path

import orjson

from memstream.archive.segments import read_archive
from memstream.kafka.clients import make_producer
from memstream.kafka.produce import DeliveryReports, flush_or_raise, produce_with_backpressure
from memstream.kafka.reading import high_watermarks
from memstream.kafka.topics import LEDGER


def ledger_is_empty(bootstrap: str) -> bool:
    return sum(high_watermarks(bootstrap, LEDGER).values()) == 0


def restore_ledger(bootstrap: str, archive: Path) -> int:
    """Produce every archived entry to the ledger, keyed as the sequencer keys them.

    Only valid on an empty ledger topic (a fresh broker); returns the number restored.
    Raises DeliveryFailed naming the entries Kafka did not acknowledge.
    """
    producer = make_producer(bootstrap, **{"linger.ms": 20})
    reports = DeliveryReports()
    count = 0
    for entry, _where in read_archive(archive):
        key = f"{entry['tenant']}/{entry['stream']}"
        headers: list[tuple[str, str | bytes | None]] = [
            ("event_id", str(entry["id"]).encode()),
            ("seq", str(entry["seq"]).encode()),
            ("hash", str(entry["hash"]).encode()),
        ]
        produce_with_backpressure(
            producer,
            LEDGER,
            orjson.dumps(entry),
            key=key,
            headers=headers,
            on_delivery=reports,
            record_id=str(entry["id"]),
        )
        count += 1
        if count % 10000 == 0:
            producer.poll(0)
    flush_or_raise(producer, 60, reports, f"{LEDGER} entries restored from {archive}")
    return count
