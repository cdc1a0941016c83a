"""Archiver: memory.ledger -> fsync'd segment files per tenant in the data dir.

Idempotent by seq: entries at or below a stream's archived head are skipped, so
redeliveries and a ledger restored from this very archive change nothing. A ``memory.purge``
tombstone rewrites the tenant's segments (see :mod:`memstream.archive.purge`) before the
batch's offsets are committed.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Message, Producer
from memstream.archive.plan import Append, Poison, plan_record
from memstream.archive.purge import (
    add_tombstone,
    apply_purges,
    load_purged,
    purge_line,
    read_tombstone,
    save_purged,
)
from memstream.archive.segments import TenantWriter, archive_heads, tenant_dirs
from memstream.kafka.clients import make_consumer, make_producer
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.loop import BatchLoop
from memstream.kafka.reading import headers_of
from memstream.kafka.runner import run_loops
from memstream.kafka.topics import ARCHIVER_GROUP, LEDGER
from memstream.kafka.worker import start_worker
from memstream.metrics import (
    ARCHIVE_LAG,
    ENTRIES_ARCHIVED,
    PURGE_APPLIED_AT,
    PURGE_ITEMS_REMOVED,
    PURGES_APPLIED,
)

COMPONENT = "archiver"
STORE = "archive"
log = logging.getLogger(COMPONENT)


class Archiver:
    def __init__(self, archive: Path, producer: Producer) -> None:
        self.archive = archive
        self.dead_letters = DeadLetterWriter(producer, COMPONENT, LEDGER)
        self.heads = archive_heads(archive)
        self.writers: dict[str, TenantWriter] = {}
        self.purged = {t.name: load_purged(t) for t in tenant_dirs(archive)}
        self._m_purges = PURGES_APPLIED.labels(COMPONENT, STORE)
        self._m_lines = PURGE_ITEMS_REMOVED.labels(COMPONENT, STORE, "lines")
        # A crash between recording a purge and rewriting every segment is finished here.
        finished = sum(apply_purges(archive / t, ids) for t, ids in self.purged.items())
        self._m_lines.inc(finished)
        log.info(
            "archive at %s holds %d streams; %d purged ids, %d lines purged on start",
            archive,
            len(self.heads),
            sum(len(ids) for ids in self.purged.values()),
            finished,
        )

    def _writer(self, tenant: str) -> TenantWriter:
        w = self.writers.get(tenant)
        if w is None:
            w = self.writers[tenant] = TenantWriter(self.archive / tenant)
            w.open()
        return w

    def process(self, msgs: list[Message]) -> None:
        touched: set[str] = set()
        purging: set[str] = set()  # tenants with ids newly purged in this batch
        appended = purged_on_append = 0
        oldest_ms: int | None = None  # ledger append time of the oldest archived entry
        now = datetime.now(UTC)
        for m in msgs:
            k, h = m.key(), headers_of(m)
            seq = h.get("seq")
            out = plan_record(
                m.value(),
                self.heads,
                k.decode() if isinstance(k, bytes) else None,
                int(seq) if seq is not None and seq.isdigit() else None,
            )
            if isinstance(out, Poison):
                self.dead_letters.write(m, out.reason, now)
                continue
            # A tombstone already archived is read again too: its purge may not have been
            # recorded before a crash (the offsets were not committed then).
            self._tombstone(m.value() or b"", purging)
            if isinstance(out, Append):
                purged_on_append += self._append(out, h.get("event_id"))
                touched.add(out.tenant)
                appended += 1
                ts_type, ts_ms = m.timestamp()
                if ts_type != TIMESTAMP_NOT_AVAILABLE and (oldest_ms is None or ts_ms < oldest_ms):
                    oldest_ms = ts_ms
        for tenant in touched:
            self.writers[tenant].sync()
        self._purge(purging, purged_on_append)
        if oldest_ms is not None:
            ARCHIVE_LAG.labels(COMPONENT).set(max(0.0, time.time() - oldest_ms / 1000))
        self.dead_letters.flush()  # raises before the loop commits past an unrecorded poison
        ENTRIES_ARCHIVED.labels(COMPONENT).inc(appended)

    def _tombstone(self, value: bytes, purging: set[str]) -> None:
        tomb = read_tombstone(value)
        if tomb is not None and add_tombstone(self.purged.setdefault(tomb.tenant, {}), tomb):
            purging.add(tomb.tenant)
            self._m_purges.inc()

    def _append(self, out: Append, event_id: bytes | None) -> int:
        """Append one entry, in its purged form if a tombstone already named it; 1 if so.

        That happens when the tombstone's partition was archived ahead of this entry's.
        """
        line, purged = out.line, self.purged.get(out.tenant)
        named = purged and (event_id is None or event_id.decode() in purged)
        new = purge_line(line, purged) if purged and named else None
        self._writer(out.tenant).append(line if new is None else new)
        return 0 if new is None else 1

    def _purge(self, tenants: set[str], purged_on_append: int) -> None:
        """Record the batch's purges, then rewrite the tenants' segments (before any commit)."""
        removed = purged_on_append
        for tenant in sorted(tenants):
            save_purged(self.archive / tenant, self.purged[tenant])
            w = self.writers.pop(tenant, None)
            if w is not None:  # its segment is about to be replaced: reopen on the next append
                w.close()
            removed += apply_purges(self.archive / tenant, self.purged[tenant])
        self._m_lines.inc(removed)
        if tenants or removed:
            PURGE_APPLIED_AT.labels(COMPONENT, STORE).set(time.time())
            log.info("purged %d archived lines for %d tombstoned tenants", removed, len(tenants))

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
    try:
        run_loops([loop])
    finally:
        archiver.close()


if __name__ == "__main__":
    main()
