"""Latent builder: memory.ledger -> memory.latents.

The I/O shell around :class:`memstream.latent.builder.LatentBuilder`, in two loops:

- **route** (group ``memstream-latents-route``, over memory.ledger): copies every entry as it
  is, sealed, to memory.latent-inputs keyed by tenant alone (:mod:`memstream.kafka.route`).
  The builder groups a tenant's whole ledger (sessions, runs, preferences across streams),
  and the ledger spreads a tenant over its partitions; re-keyed, a tenant is on one.
- **build** (group ``memstream-latents``, over memory.latent-inputs): memory.latents is keyed
  by tenant with the same partition count, so a replica's partitions of both hold the same
  whole tenants. On each assignment the replica learns its tenants' current artifacts from
  memory.latents and folds their inputs again from the beginning (its open groups live in
  memory); equal inputs give equal ids, so the re-read sends only what is new. Then the loop
  reads on; an entry already folded in is skipped by its seq. Artifacts are produced keyed by
  tenant and flushed before offsets are committed.

An episode's centroid is the mean of its turns' vectors under the live version's embedder.

Purges: before folding the inputs on an assignment, every tombstone's event ids are
collected, so a purged event is skipped even while the broker still holds its content. A live
tombstone sends a ``LatentDeletion`` (keyed by tenant, like the artifacts) for every artifact
citing a purged event, then the inputs are folded again without the purged events, so the
groups they were part of (closed episodes, finished runs) come back from what remains.

Sealing: every artifact record is sealed under the artifact's data key
(:mod:`memstream.shred.artifacts`). The worker knows every artifact id it ever produced or
read back, by source event; a tombstone destroys the keys of all of them that cite a purged
event (current, stale and superseded alike), after their deletions are on the topic. The
same is done on each assignment for every tombstone of its tenants, so a stop between the
two, or a tombstone applied before sealing, is made good (destroying a destroyed key changes
nothing).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from confluent_kafka import Message, Producer
from memstream.embed.port import Embedder
from memstream.embed.registry import get_embedder
from memstream.kafka.clients import make_producer
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.produce import (
    DeliveryFailed,
    DeliveryReports,
    flush_or_raise,
    produce_with_backpressure,
    refused_as_too_large,
)
from memstream.kafka.reading import read_to_end
from memstream.kafka.route import not_co_partitioned, route_loop, tenant_router
from memstream.kafka.runner import run_loops, worker_loop
from memstream.kafka.topics import (
    LATENT_INPUTS,
    LATENTS,
)
from memstream.kafka.worker import start_worker
from memstream.latent.builder import Built, LatentBuilder, LatentInput, Output, latent_input
from memstream.latent.metrics import BUILT, CURRENT, ENTRIES, LAG, STALE, init_latents
from memstream.ledger.entry import decode_entry, load_entry, read_loaded
from memstream.ledger.opening import EntryOpener, reading_keys
from memstream.metrics import (
    EVENTS_PRODUCED,
    PURGE_APPLIED_AT,
    PURGE_ITEMS_REMOVED,
    PURGES_APPLIED,
    RECORDS_TOO_LARGE,
)
from memstream.projection.latents import decode_artifacts
from memstream.projection.purge import PURGE_TYPE
from memstream.projection.versions import FileProjectionRegistry, registry_path
from memstream.records.altitudes import ARTIFACT_TYPES
from memstream.records.latent import LatentArtifact, LatentDeletion
from memstream.settings import Settings
from memstream.shred.sealer import ArtifactSealer
from memstream.sinks import sink
from memstream.times import to_datetime

BUILDS = sink("latents")
COMPONENT = BUILDS.component
STORE = "latents"  # the purge metrics' store label
# Canonical JSON has no spaces: only a tombstone's record holds this (see ``_note_purges``).
PURGE_MARK = b'"type":"memory.purge"'
MAX_OPEN_S = 5.0
RESTORE_CHUNK = 500  # memory.latents records opened per key store round trip on start
log = logging.getLogger(f"memstream.{COMPONENT}")


class LatentWorker:
    """Feeds the builder, embeds episode centroids, produces what it builds."""

    def __init__(
        self,
        bootstrap: str,
        producer: Producer,
        embedder: Embedder,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        opener: EntryOpener | None = None,
        sealer: ArtifactSealer | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.opener = opener  # opens ledger entries and artifacts; its store shreds artifacts
        self.sealer = sealer or ArtifactSealer(None)
        # (tenant, event id) -> every artifact id built from it, sent or read back
        self.derived: dict[tuple[str, str], set[str]] = {}
        self.producer = producer
        self.embedder = embedder
        self.builder = LatentBuilder()
        self.partitions: list[int] = []  # of memory.latent-inputs (and memory.latents) held
        self.clock = clock
        self.reports = DeliveryReports()
        self.dead_letters = DeadLetterWriter(producer, COMPONENT, LATENT_INPUTS)
        self.pending: list[datetime] = []  # ingest times of entries folded in, not yet built
        init_latents(COMPONENT)
        EVENTS_PRODUCED.labels(COMPONENT, LATENTS)
        RECORDS_TOO_LARGE.labels(COMPONENT, LATENTS)
        PURGES_APPLIED.labels(COMPONENT, STORE)
        PURGE_ITEMS_REMOVED.labels(COMPONENT, STORE, "artifacts")
        PURGE_ITEMS_REMOVED.labels(COMPONENT, STORE, "artifact_keys")

    def rebuild(self, partitions: list[int]) -> None:
        """The state of the tenants on ``partitions`` (every assignment, the whole of it):
        their current artifacts (and deletions) from memory.latents, the purged event ids,
        then their inputs folded in again."""
        self.forget(self.partitions)
        self.partitions = sorted(partitions)
        known = 0
        chunk: list[Message] = []
        for m in read_to_end(self.bootstrap, LATENTS, self.partitions):
            chunk.append(m)
            if len(chunk) == RESTORE_CHUNK:
                known += self._remember(chunk)
                chunk = []
        known += self._remember(chunk)
        self._note_purges()
        now = self.clock()
        out = self._fold(now)
        log.info("partitions %s: %d artifact records; inputs folded again", partitions, known)
        self._send([*out, *self.builder.flush(now)])
        by_tenant: dict[str, list[str]] = {}
        for tenant, eid in self.builder.purged:
            by_tenant.setdefault(tenant, []).append(eid)
        for tenant, ids in by_tenant.items():
            self._shred(tenant, ids)

    def forget(self, _partitions: list[int]) -> None:
        """Partitions revoked: the state goes (the next assignment, whole under the eager
        protocol, rebuilds what the replica holds then)."""
        self.builder = LatentBuilder()
        self.derived = {}
        self.pending = []
        self.partitions = []

    def _remember(self, msgs: list[Message]) -> int:
        """Records read back on start into the builder and the index of derived ids; an
        artifact whose key is gone was shredded: it is neither."""
        known = 0
        found_all = decode_artifacts([m.value() for m in msgs], self.opener)
        for m, found in zip(msgs, found_all, strict=True):
            if isinstance(found, str):
                log.warning("skipping malformed record %s:%s", m.partition(), m.offset())
                continue
            if found is None:
                continue
            if isinstance(found, LatentArtifact):
                self._derived(found)
            self.builder.remember(found)
            known += 1
        return known

    def _derived(self, a: LatentArtifact) -> None:
        for eid in a.source_ids:
            self.derived.setdefault((a.tenant, eid), set()).add(a.artifact_id)

    def _shred(self, tenant: str, event_ids: Sequence[str]) -> None:
        """Destroy the data keys of every artifact ever built from ``event_ids`` (their
        deletions are on the topic already); counted by how many existed."""
        aids: set[str] = set()
        for eid in event_ids:
            aids |= self.derived.pop((tenant, eid), set())
        if not aids or self.opener is None or self.opener.keys is None:
            return
        # Never built again under a new key (a refold cannot rebuild one, its inputs are gone).
        self.builder.deleted.update((tenant, aid) for aid in aids)
        gone = self.opener.keys.destroy(tenant, "latent", sorted(aids))
        if gone:
            PURGE_ITEMS_REMOVED.labels(COMPONENT, STORE, "artifact_keys").inc(gone)
            PURGE_APPLIED_AT.labels(COMPONENT, STORE).set(time.time())
            log.info("destroyed the data keys of %d artifacts of tenant %s", gone, tenant)

    def _note_purges(self) -> None:
        """Every tombstone's event ids, before the fold: tombstones come after what they
        purge, and the broker may still hold the purged entries' content."""
        for m in read_to_end(self.bootstrap, LATENT_INPUTS, self.partitions):
            raw = m.value()
            if raw is None or PURGE_MARK not in raw:
                continue
            item = decode_entry(raw, latent_input, self.opener)
            if isinstance(item, LatentInput) and item.purge:
                self.builder.note_purge(item.extraction.event.tenant, item.purge)

    def _fold(self, now: datetime) -> list[Output]:
        """The inputs held folded into the builder (entries it has seen change nothing)."""
        out: list[Output] = []
        for m in read_to_end(self.bootstrap, LATENT_INPUTS, self.partitions):
            item = decode_entry(m.value(), latent_input, self.opener)
            if not isinstance(item, str):  # a bad one is dead-lettered when the loop reads it
                out += self.builder.observe(item, now)
        return out

    def process(self, msgs: list[Message]) -> None:
        now = self.clock()
        out: list[Output] = []
        tombstones: list[tuple[str, tuple[str, ...]]] = []
        loaded = [load_entry(m.value()) for m in msgs]
        opener = self.opener.for_batch(loaded) if self.opener is not None else None
        for m, doc in zip(msgs, loaded, strict=True):
            item = read_loaded(doc, latent_input, opener)
            if isinstance(item, str):
                self.dead_letters.write(m, f"{COMPONENT}: {item}"[:500], now)
                continue
            if item is None or self.builder.seen(item):  # None: purged, nothing to read
                continue
            ENTRIES.labels(COMPONENT).inc()
            self.pending.append(to_datetime(item.extraction.event.ingested_at))
            out += self.builder.observe(item, now)
            if item.extraction.event.type == PURGE_TYPE:
                tombstones.append((item.extraction.event.tenant, item.purge))
        self.dead_letters.flush()
        # Under steady load the ledger is never idle: open groups are built at least this often.
        if self.pending and (now - min(self.pending)).total_seconds() > MAX_OPEN_S:
            out += self._flush(now)
        self._send(out)
        for tenant, event_ids in tombstones:
            self._shred(tenant, event_ids)
        if tombstones:
            self._refold(now, len(tombstones))

    def _refold(self, now: datetime, tombstones: int) -> None:
        """After a tombstone: the inputs folded again into a builder that knows the purge,
        so closed episodes and finished runs come back without the purged events."""
        self.builder = self.builder.after_purge()
        self._send([*self._fold(now), *self._flush(now)])
        PURGES_APPLIED.labels(COMPONENT, STORE).inc(tombstones)
        PURGE_APPLIED_AT.labels(COMPONENT, STORE).set(time.time())

    def idle(self) -> None:
        """The ledger is quiet: build the groups that changed (open sessions, preferences)."""
        if self.pending or self.builder.dirty:
            self._send(self._flush(self.clock()))

    def _flush(self, now: datetime) -> list[Built]:
        built = self.builder.flush(now)
        for at in self.pending:
            LAG.labels(COMPONENT).observe(max(0.0, (now - at).total_seconds()))
        self.pending = []
        return built

    def _send(self, out: Sequence[Output]) -> None:
        """Produce, wait for Kafka (raises: nothing is committed), then count.

        An artifact larger than Kafka takes (a group of long texts) is not sent: it is
        derived from many ledger entries, none of which is at fault or could be
        dead-lettered for it, and the same inputs would build it again. It is logged by id
        and counted (``memstream_records_too_large_total``); memory answers without it.
        """
        records = [o if isinstance(o, LatentDeletion) else self._with_centroid(o) for o in out]
        unwritten = 0
        for record, value in zip(records, self.sealer.encode(records), strict=True):
            if value is None:  # built from events a purge reached before this builder saw it
                unwritten += 1
                continue
            if isinstance(record, LatentArtifact):
                self._derived(record)
            try:
                produce_with_backpressure(
                    self.producer,
                    LATENTS,
                    value,
                    key=record.key,
                    on_delivery=self.reports,
                    record_id=record.artifact_id,
                )
            except DeliveryFailed as exc:
                if not refused_as_too_large(exc):
                    raise
                RECORDS_TOO_LARGE.labels(COMPONENT, LATENTS).inc()
                log.error("artifact %s (%d bytes) is larger than Kafka takes; not sent",
                          record.artifact_id, len(value))  # fmt: skip
        if out:
            flush_or_raise(self.producer, 30, self.reports, f"{COMPONENT} artifacts to {LATENTS}")
        EVENTS_PRODUCED.labels(COMPONENT, LATENTS).inc(len(out) - unwritten)
        if unwritten:
            PURGE_ITEMS_REMOVED.labels(COMPONENT, STORE, "artifacts_unwritten").inc(unwritten)
        self._count(out)

    def _count(self, out: Sequence[Output]) -> None:
        deleted = 0
        for o in out:
            if isinstance(o, LatentDeletion):
                deleted += 1
                continue
            kind = STALE if o.artifact.stale_at is not None else BUILT
            kind.labels(COMPONENT, o.artifact.artifact_type).inc()
        if deleted:
            PURGE_ITEMS_REMOVED.labels(COMPONENT, STORE, "artifacts").inc(deleted)
            PURGE_APPLIED_AT.labels(COMPONENT, STORE).set(time.time())
        # Every type is set, so a type whose last artifact was deleted reads 0.
        counts: dict[str, int] = {t: 0 for t in ARTIFACT_TYPES if t != "memory_weave"}
        for a in self.builder.current.values():
            counts[a.artifact_type] = counts.get(a.artifact_type, 0) + 1
        for t, n in counts.items():
            CURRENT.labels(COMPONENT, t).set(n)

    def _with_centroid(self, b: Built) -> LatentArtifact:
        if not b.texts or b.artifact.stale_at is not None:
            return b.artifact
        vectors = self.embedder.embed([t for t in b.texts if t.strip()] or [b.artifact.summary])
        mean = vectors.mean(axis=0)
        norm = float(np.linalg.norm(mean)) or 1.0
        return b.artifact.model_copy(
            update={
                "centroid": [round(float(v), 6) for v in mean / norm],
                "payload_kind": "centroid",
                "payload_ref": f"centroid:{self.embedder.name}",
            }
        )


def _stream(entry: dict[str, Any]) -> tuple[str, str]:
    return str(entry["tenant"]), str(entry["stream"])


def live_embedder(settings: Settings) -> Embedder:
    """The live projection version's embedder (centroids must live in its vector space)."""
    registry = FileProjectionRegistry(registry_path(settings.data_dir)).load()
    info = registry.versions.get(registry.live or "")
    return get_embedder(info.config.embedder if info is not None else None)


def main() -> None:
    settings, bootstrap = start_worker(COMPONENT)
    problem = not_co_partitioned(bootstrap, LATENT_INPUTS, LATENTS)
    if problem is not None:
        sys.exit(f"memstream-latents: {problem}")
    producer = make_producer(
        bootstrap,
        **{"delivery.report.only.error": True, "message.max.bytes": settings.max_record_bytes},
    )
    keys = reading_keys(settings)  # artifacts sealed earlier open and shred with sealing off
    sealer = ArtifactSealer(keys if settings.seal else None)
    worker = LatentWorker(
        bootstrap, producer, live_embedder(settings), opener=EntryOpener(keys), sealer=sealer
    )
    router = tenant_router(bootstrap, settings, COMPONENT, LATENT_INPUTS)
    stop = threading.Event()
    routes, builds = BUILDS.groups
    route = route_loop(bootstrap, settings, routes.group, router, stop)
    build = worker_loop(
        bootstrap, settings, builds.group, builds.topics, COMPONENT, worker.process,
        idle=worker.idle, on_assign=worker.rebuild, on_revoke=worker.forget, stop_event=stop,
    )  # fmt: skip
    try:
        run_loops([route, build])
    finally:
        producer.flush(30)
        router.producer.flush(30)


if __name__ == "__main__":
    main()
