"""Restore the ledger topic from archive segments into a fresh broker."""

from __future__ import annotations

from pathlib import Path

import orjson

from memstream.archive.segments import read_archive
from memstream.kafka.clients import make_producer
from memstream.kafka.reading import high_watermarks
from memstream.kafka.topics import LEDGER


def ledger_is_empty(bootstrap: str) -> bool:
    return sum(high_watermarks(bootstrap, LEDGER).values()) == 0


def restore_ledger(bootstrap: str, archive: Path) -> int:
    """Produce every archived entry to the ledger, keyed as the sequencer keys them.

    Only valid on an empty ledger topic (a fresh broker); returns the number restored.
    """
    producer = make_producer(bootstrap, **{"linger.ms": 20})
    failures: list[str] = []

    def _report(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    count = 0
    for entry, _where in read_archive(archive):
        key = f"{entry['tenant']}/{entry['stream']}"
        headers: list[tuple[str, str | bytes | None]] = [
            ("event_id", str(entry["id"]).encode()),
            ("seq", str(entry["seq"]).encode()),
            ("hash", str(entry["hash"]).encode()),
        ]
        while True:
            try:
                producer.produce(
                    LEDGER, orjson.dumps(entry), key=key, headers=headers, on_delivery=_report
                )
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
        if count % 10000 == 0:
            producer.poll(0)
    remaining = producer.flush(60)
    if remaining or failures:
        raise RuntimeError(f"restore failed: {remaining} undelivered, errors {failures[:3]}")
    return count
