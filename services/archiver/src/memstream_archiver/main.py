"""Archiver: memory.ledger -> fsync'd segment files per tenant and ledger partition.

Idempotent by seq: entries at or below a stream's archived head are skipped, so
redeliveries and a ledger restored from this very archive change nothing. A replica that
takes a partition over reads its heads again from the partition's segments. A
``memory.purge`` tombstone rewrites every segment of the tenant, whichever replica appends
to it (see :mod:`memstream.archive.purge`), before the batch's offsets are committed; the
tenant's lock keeps the replicas' appends and rewrites apart.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Message, Producer
from memstream.archive.plan import Append, Poison, plan_record
from memstream.archive.purge import (
    PURGED_IDS,
    Tombstone,
    add_tombstone,
    apply_purges,
    load_purged,
    purge_line,
    read_tombstone,
    save_purged,
)
from memstream.archive.segments import (
    TenantWriter,
    archive_heads,
    partition_heads,
    tenant_dirs,
    tenant_lock,
)
from memstream.kafka.clients import make_producer
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.reading import headers_of
from memstream.kafka.runner import run_loops, worker_loop
from memstream.kafka.topics import LEDGER
from memstream.kafka.worker import start_worker
from memstream.metrics import (
    ARCHIVE_LAG,
    ENTRIES_ARCHIVED,
    PURGE_APPLIED_AT,
    PURGE_ITEMS_REMOVED,
    PURGES_APPLIED,
)
from memstream.sinks import sink

ARCHIVE = sink("archive")
COMPONENT = ARCHIVE.component
STORE = "archive"
log = logging.getLogger(f"memstream.{COMPONENT}")


@dataclass
class _TenantBatch:
    """What one batch brings for one tenant: appends (with their ledger partition and event
    id) and tombstones."""

    appends: list[tuple[int, Append, bytes | None]] = field(default_factory=list)
    tombstones: list[Tombstone] = field(default_factory=list)


class Archiver:
    """Appends the ledger partitions it holds to their own segments; any number of replicas
    share one archive directory (see :mod:`memstream.archive.segments`)."""

    def __init__(self, archive: Path, producer: Producer) -> None:
        self.archive = archive
        self.dead_letters = DeadLetterWriter(producer, COMPONENT, LEDGER)
        self.heads = archive_heads(archive)
        self.writers: dict[tuple[str, int], TenantWriter] = {}
        self.purged: dict[str, dict[str, str]] = {}
        self._purged_seen: dict[str, tuple[int, int, int] | None] = {}
        self._m_purges = PURGES_APPLIED.labels(COMPONENT, STORE)
        self._m_lines = PURGE_ITEMS_REMOVED.labels(COMPONENT, STORE, "lines")
        # A crash between recording a purge and rewriting every segment is finished here.
        finished = 0
        for tdir in tenant_dirs(archive):
            with tenant_lock(tdir):
                finished += apply_purges(tdir, self._purged_now(tdir.name))
        self._m_lines.inc(finished)
        log.info(
            "archive at %s holds %d streams; %d purged ids, %d lines purged on start",
            archive,
            len(self.heads),
            sum(len(ids) for ids in self.purged.values()),
            finished,
        )

    def assigned(self, partitions: list[int]) -> None:
        """Partitions taken over (maybe from another replica): their heads read again from
        their segments, so what the last holder archived but did not commit is skipped."""
        for key, seq in partition_heads(self.archive, partitions).items():
            if seq > self.heads.get(key, 0):
                self.heads[key] = seq

    def revoked(self, partitions: list[int]) -> None:
        """Partitions given up: their segments are closed (the loop committed their batch)."""
        for key in [k for k in self.writers if k[1] in partitions]:
            self.writers.pop(key).close()

    def _purged_now(self, tenant: str) -> dict[str, str]:
        """The tenant's purged ids, read again when another replica recorded a purge since
        (``save_purged`` replaces the file, so its identity changes). Under the lock."""
        seen = _identity(self.archive / tenant / PURGED_IDS)
        if tenant not in self.purged or self._purged_seen.get(tenant) != seen:
            self.purged[tenant] = load_purged(self.archive / tenant)
            self._purged_seen[tenant] = seen
        return self.purged[tenant]

    def _writer(self, tenant: str, partition: int) -> TenantWriter:
        w = self.writers.get((tenant, partition))
        if w is not None and w.stale():  # a purge replaced its segment
            w.close()
            w = None
        if w is None:
            w = self.writers[(tenant, partition)] = TenantWriter(self.archive / tenant, partition)
            w.open()
        return w

    def process(self, msgs: list[Message]) -> None:
        now = datetime.now(UTC)
        batches: dict[str, _TenantBatch] = {}
        oldest_ms: int | None = None  # ledger append time of the oldest archived entry
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
            tomb = read_tombstone(m.value() or b"")
            if tomb is not None:
                batches.setdefault(tomb.tenant, _TenantBatch()).tombstones.append(tomb)
            if isinstance(out, Append):
                part = m.partition() or 0
                batches.setdefault(out.tenant, _TenantBatch()).appends.append(
                    (part, out, h.get("event_id"))
                )
                ts_type, ts_ms = m.timestamp()
                if ts_type != TIMESTAMP_NOT_AVAILABLE and (oldest_ms is None or ts_ms < oldest_ms):
                    oldest_ms = ts_ms
        for tenant in sorted(batches):
            self._apply(tenant, batches[tenant])
        if oldest_ms is not None:
            ARCHIVE_LAG.labels(COMPONENT).set(max(0.0, time.time() - oldest_ms / 1000))
        self.dead_letters.flush()  # raises before the loop commits past an unrecorded poison
        ENTRIES_ARCHIVED.labels(COMPONENT).inc(sum(len(b.appends) for b in batches.values()))

    def _apply(self, tenant: str, batch: _TenantBatch) -> None:
        """One tenant's share of a batch, under its lock: the purge recorded first (the
        intent log), the entries appended (in purged form where it names them) and synced,
        then every segment of the tenant rewritten, other replicas' partitions included."""
        tdir = self.archive / tenant
        with tenant_lock(tdir):
            purged = self._purged_now(tenant)
            new = [t for t in batch.tombstones if add_tombstone(purged, t)]
            if new:
                save_purged(tdir, purged)
                self._purged_seen[tenant] = _identity(tdir / PURGED_IDS)
                self._m_purges.inc(len(new))
            removed = 0
            touched: dict[int, TenantWriter] = {}
            for partition, out, event_id in batch.appends:
                w = touched[partition] = self._writer(tenant, partition)
                removed += _append(w, out, event_id, purged)
            for w in touched.values():
                w.sync()
            if new:
                removed += apply_purges(tdir, purged)
        self._m_lines.inc(removed)
        if new or removed:
            PURGE_APPLIED_AT.labels(COMPONENT, STORE).set(time.time())
        if new:
            log.info("purged %d archived lines of tenant %s", removed, tenant)

    def close(self) -> None:
        for w in self.writers.values():
            w.close()


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _append(w: TenantWriter, out: Append, event_id: bytes | None, purged: dict[str, str]) -> int:
    """Append one entry, in its purged form if a tombstone already named it; 1 if so.

    That happens when the tombstone's partition was archived ahead of this entry's.
    """
    named = purged and (event_id is None or event_id.decode() in purged)
    new = purge_line(out.line, purged) if named else None
    w.append(out.line if new is None else new)
    return 0 if new is None else 1


def main() -> None:
    settings, bootstrap = start_worker(COMPONENT)
    archiver = Archiver(settings.archive_dir, make_producer(bootstrap))
    (reads,) = ARCHIVE.groups
    loop = worker_loop(
        bootstrap, settings, reads.group, reads.topics, COMPONENT, archiver.process,
        on_assign=archiver.assigned, on_revoke=archiver.revoked,
    )  # fmt: skip
    try:
        run_loops([loop])
    finally:
        archiver.close()


if __name__ == "__main__":
    main()
