"""Restore the ledger topic from archive segments into a fresh broker."""

from __future__ import annotations

from pathlib import Path

import orjson
from memstream.archive.purge import load_purged
from memstream.archive.segments import read_archive, tenant_dirs
from memstream.kafka.clients import make_producer
from memstream.kafka.produce import DeliveryReports, flush_or_raise, produce_with_backpressure
from memstream.kafka.reading import high_watermarks
from memstream.kafka.topics import LEDGER
from memstream.ledger.purge import is_purged, purged_form
from memstream.settings import RECORD_BYTES_CEILING


def ledger_is_empty(bootstrap: str) -> bool:
    return sum(high_watermarks(bootstrap, LEDGER).values()) == 0


def restore_ledger(bootstrap: str, archive: Path) -> int:
    """Produce every archived entry to the ledger, keyed as the sequencer keys them.

    Only valid on an empty ledger topic (a fresh broker); returns the number restored.
    Purged entries are restored as they are: they keep their chain positions, so the
    sequencer's heads continue from them. An entry a recorded purge names but whose segment
    a crash left unrewritten is restored purged all the same (the archiver finishes the
    rewrite when it starts). Raises DeliveryFailed naming the entries Kafka did not acknowledge.
    """
    # The archive is the authority: an entry ledgered under a larger record limit than
    # today's is restored all the same.
    producer = make_producer(
        bootstrap, **{"linger.ms": 20, "message.max.bytes": RECORD_BYTES_CEILING + 4096}
    )
    reports = DeliveryReports()
    count = 0
    purged = {t.name: load_purged(t) for t in tenant_dirs(archive)}
    for entry, _where in read_archive(archive):
        by = purged.get(str(entry.get("tenant")), {}).get(str(entry.get("id")))
        if by is not None and not is_purged(entry):
            entry = purged_form(entry, by)
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
