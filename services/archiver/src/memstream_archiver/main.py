"""Archiver: memory.ledger -> fsync'd segment files per tenant in the data dir.

Idempotent by seq: entries at or below a stream's archived head are skipped, so
redeliveries and a ledger restored from this very archive change nothing.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Message, Producer
from memstream.archive.plan import Append, Poison, plan_record
from memstream.archive.segments import TenantWriter, archive_heads
from memstream.kafka.clients import make_consumer, make_producer
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.loop import BatchLoop, tune_gc_for_batches
from memstream.kafka.reading import headers_of
from memstream.kafka.topics import ARCHIVER_GROUP, LEDGER
from memstream.kafka.worker import start_worker
from memstream.metrics import ARCHIVE_LAG, ENTRIES_ARCHIVED

COMPONENT = "archiver"
log = logging.getLogger(COMPONENT)


class Archiver:
    def __init__(self, archive: Path, producer: Producer) -> None:
        self.archive = archive
        self.dead_letters = DeadLetterWriter(producer, COMPONENT, LEDGER)
        self.heads = archive_heads(archive)
        self.writers: dict[str, TenantWriter] = {}
        log.info("archive at %s holds %d streams", archive, len(self.heads))

    def _writer(self, tenant: str) -> TenantWriter:
        w = self.writers.get(tenant)
        if w is None:
            w = self.writers[tenant] = TenantWriter(self.archive / tenant)
            w.open()
        return w

    def process(self, msgs: list[Message]) -> None:
        touched: set[str] = set()
        appended = 0
        oldest_ms: int | None = None  # ledger append time of the oldest archived entry
        now = datetime.now(UTC)
        for m in msgs:
            k, h = m.key(), headers_of(m).get("seq")
            out = plan_record(
                m.value(),
                self.heads,
                k.decode() if isinstance(k, bytes) else None,
                int(h) if h is not None and h.isdigit() else None,
            )
            if isinstance(out, Append):
                self._writer(out.tenant).append(out.line)
                touched.add(out.tenant)
                appended += 1
                ts_type, ts_ms = m.timestamp()
                if ts_type != TIMESTAMP_NOT_AVAILABLE and (oldest_ms is None or ts_ms < oldest_ms):
                    oldest_ms = ts_ms
            elif isinstance(out, Poison):
                self.dead_letters.write(m, out.reason, now)
        for tenant in touched:
            self.writers[tenant].sync()
        if oldest_ms is not None:
            ARCHIVE_LAG.labels(COMPONENT).set(max(0.0, time.time() - oldest_ms / 1000))
        self.dead_letters.flush()  # raises before the loop commits past an unrecorded poison
        ENTRIES_ARCHIVED.labels(COMPONENT).inc(appended)

    def close(self) -> None:
        for w in self.writers.values():
            w.close()


def main() -> None:
    settings, bootstrap = start_worker(COMPONENT)
    archiver = Archiver(settings.archive_dir, make_producer(bootstrap))
    loop = BatchLoop(
        consumer=make_consumer(bootstrap, ARCHIVER_GROUP, settings),
        topic=LEDGER,
        group=ARCHIVER_GROUP,
        component=COMPONENT,
        process=archiver.process,
        batch_size=settings.batch_size,
        wait_s=settings.batch_wait_s,
    )
    loop.install_signal_handlers()
    tune_gc_for_batches()
    try:
        loop.run()
    finally:
        archiver.close()


if __name__ == "__main__":
    main()
