"""The graph and vector projectors: decode ledger records, extract, write; the loop commits.

Both read ``memory.ledger`` and ``memory.latents`` (latent artifacts, DESIGN §3.6) in one
consumer group, so a replayed version gets both from the start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Message, Producer

from memstream.embed.port import Embedder
from memstream.graph.port import GraphStore
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.reading import headers_of
from memstream.kafka.topics import LATENTS, LEDGER
from memstream.ledger.entry import Opener, load_entry, read_loaded
from memstream.ledger.opening import EntryOpener
from memstream.metrics import PURGE_APPLIED_AT, PURGE_ITEMS_REMOVED, PURGES_APPLIED
from memstream.position import RAW_HEADER
from memstream.projection.extract import graph_batch
from memstream.projection.keys import KeyForm, Turn, index_keys
from memstream.projection.latents import decode_artifacts, latent_changes, split_records
from memstream.projection.latents import point_key as latent_point_key
from memstream.projection.metrics import (
    FRESHNESS,
    OPTIMIZING,
    POINTS,
    PROJECTED,
    PROJECTED_LATENTS,
    UNOPTIMIZED,
)
from memstream.projection.previous import (
    Known,
    Said,
    Slot,
    Stream,
    follows,
    in_batch,
    last_of_streams,
    missing,
    said_in,
)
from memstream.projection.progress import RawKey, applied_in
from memstream.projection.purge import Decoded, PurgeOrder, Read, read_entry
from memstream.records.latent import LatentDeletion, LatentRecord
from memstream.records.projected import Extraction, VectorHit, VectorPoint
from memstream.text.names import entity_key
from memstream.times import epoch_seconds
from memstream.vectors.port import KEY_OF, VectorIndex, event_point_key

log = logging.getLogger(__name__)
GRAPH, VECTORS = "graph", "vectors"  # the ``store`` label of the purge metrics


def _read(loaded: Any, light: bool, opener: Opener | None) -> Read | str:
    """What the record gives a projector, or why the record itself cannot be projected."""
    return read_loaded(loaded, lambda entry: read_entry(entry, light), opener)


class _Base:
    """Decoding with dead letters: a record that cannot be projected never stops the loop.

    A record the store refuses is found and dead-lettered by the loop (``dead_letters``,
    see ``kafka/loop.py``): ``process`` only has to raise the store's error, and to be
    safe to run again on a part of the batch (every write is a MERGE or an upsert by id).
    """

    component = "projector"
    kind = "none"  # the ``projection`` label

    def __init__(self, version: str, producer: Producer, opener: EntryOpener | None) -> None:
        self.version = version
        self.producer = producer
        self.opener = opener
        self.dead_letters = DeadLetterWriter(producer, self.component, LEDGER, also=(LATENTS,))
        # The series exists from the start, so a quiet projector reads 0, not "no data".
        PROJECTED.labels(self.component, self.kind, version)
        PROJECTED_LATENTS.labels(self.component, self.kind, version)

    def decode(self, msgs: list[Message], light: bool) -> Decoded:
        """Extractions and purges of the records, and the raw offsets they stand for;
        purged entries are skipped, bad ones are dead-lettered and flushed before
        returning."""
        out = Decoded()
        now = datetime.now(UTC)
        read: list[tuple[str | None, bytes | None, int]] = []
        loaded = [load_entry(m.value()) for m in msgs]
        opener = self.opener.for_batch(loaded) if self.opener is not None else None
        for m, doc in zip(msgs, loaded, strict=True):
            found = _read(doc, light, opener)
            if isinstance(found, str):
                reason = f"{self.component} {self.version}: {found}"[:500]
                self.dead_letters.write(m, reason, now)
                continue
            read.append((found.tenant, headers_of(m).get(RAW_HEADER), m.partition() or 0))
            if found.extraction is not None:
                out.extractions.append(found.extraction)
            else:
                out.skipped += 1
            if found.purge is not None:
                out.purges.append(found.purge)
        self.dead_letters.flush()
        out.applied = applied_in(read)
        return out

    def purged(self, store: str, order: PurgeOrder | None, removed: dict[str, int]) -> None:
        """Count one applied tombstone (or latent deletions: ``order`` None); ids only in logs."""
        if order is not None:
            PURGES_APPLIED.labels(self.component, store).inc()
            log.info("%s %s applied purge %s: %s", self.component, self.version,
                     order.tombstone_id, removed)  # fmt: skip
        for kind, n in removed.items():
            PURGE_ITEMS_REMOVED.labels(self.component, store, kind).inc(n)
        PURGE_APPLIED_AT.labels(self.component, store).set(time.time())

    def decode_latents(self, msgs: list[Message]) -> list[LatentRecord]:
        """The artifacts and deletions of ``memory.latents`` records; bad ones are
        dead-lettered (flushed), shredded ones (their data key destroyed) skipped.

        Only validation can fail here, and only because of the record, so every failure is
        a dead letter; what the projector does with an artifact afterwards may still raise.
        """
        out: list[LatentRecord] = []
        now = datetime.now(UTC)
        found_all = decode_artifacts([m.value() for m in msgs], self.opener)
        for m, found in zip(msgs, found_all, strict=True):
            if found is None:  # its data key was destroyed by a purge: nothing to read
                continue
            if not isinstance(found, str):
                out.append(found)
            else:
                reason = f"{self.component} {self.version}: {found}"[:500]
                self.dead_letters.write(m, reason, now)
        self.dead_letters.flush()
        return out

    def observe(self, extractions: list[Extraction]) -> None:
        now = time.time()
        hist = FRESHNESS.labels(self.component, self.kind, self.version)
        for x in extractions:
            hist.observe(max(0.0, now - epoch_seconds(x.event.ingested_at)))
        PROJECTED.labels(self.component, self.kind, self.version).inc(len(extractions))


def by_topic(msgs: list[Message]) -> tuple[list[Message], list[Message]]:
    """(ledger records, latent artifact records) of one batch, each in consumed order."""
    ledger: list[Message] = []
    latents: list[Message] = []
    for m in msgs:
        (latents if m.topic() == LATENTS else ledger).append(m)
    return ledger, latents


class GraphProjector(_Base):
    component = "graph-projector"
    kind = "graph"

    def __init__(
        self,
        store: GraphStore,
        version: str,
        producer: Producer,
        feedback: bool = True,
        opener: EntryOpener | None = None,
    ) -> None:
        super().__init__(version, producer, opener)
        self.store = store
        self.feedback = feedback  # False: a version that ranks as if no feedback was ever given
        store.ensure_schema()

    def process(self, msgs: list[Message]) -> None:
        """Write the batch, then obey its tombstones and latent deletions (both come after
        what they remove); after any of them, compact the store's files."""
        ledger, latent_records = by_topic(msgs)
        # light: no projection stores quantities or dates (checkout and the latent builder
        # find them in the text), so parsing them here would be wasted
        decoded = self.decode(ledger, light=True)
        records = self.decode_latents(latent_records)
        artifacts, deletions = split_records(records)
        if decoded.extractions:
            batch = graph_batch(decoded.extractions)
            if not self.feedback:
                batch = batch.model_copy(update={"feedback": []})
            self.store.write(batch)
            self.observe(decoded.extractions)
        if artifacts:
            self.store.write_latents(artifacts)
        if records:
            PROJECTED_LATENTS.labels(self.component, self.kind, self.version).inc(len(records))
        for order in decoded.purges:
            self.purged(GRAPH, order, self.store.purge_events(order.tenant, list(order.event_ids)))
        for tenant, ids in _by_tenant(deletions).items():
            self.purged(GRAPH, None, {"latents": self.store.delete_latents(tenant, ids)})
        if decoded.purges or deletions:
            self.store.compact()
        # Last, in the version's own namespace: published only once the batch is applied.
        self.store.record_progress(decoded.applied)

    def close(self) -> None:
        self.producer.flush(10)

    def discard(self) -> None:
        self.store.drop()


def _by_tenant(deletions: list[LatentDeletion]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d in deletions:
        out.setdefault(d.tenant, []).append(d.artifact_id)
    return out


def event_point(
    x: Extraction, previous: Said | None = None, form: KeyForm = "context"
) -> VectorPoint:
    """One point per event (so counts match the ledger); payload per DESIGN.md §3.3. Its
    ``text`` is the sparse key; the dense vector is left for :func:`vector_points`."""
    return _keyed(x, previous, form)[0]


def _keyed(x: Extraction, previous: Said | None, form: KeyForm) -> tuple[VectorPoint, str]:
    """The point (without its dense vector) and the text to embed for it."""
    e = x.event
    keys = index_keys(Turn.of_event(e), previous.turn if previous else None, form)
    payload = {
        "tenant": e.tenant,
        "kind": "event",
        "stream": e.stream,
        "seq": e.seq,
        "hash": e.hash,
        "event_id": e.event_id,
        "type": e.type,
        "agent": e.agent,
        "actor_key": entity_key(e.agent),
        "occurred_at": e.occurred_at,
        "valid_to": None,
        "entity_keys": sorted({m.entity_key for m in x.mentions}),
        "metadata": e.metadata,
        "text": e.text,  # checkout cites it without a graph round trip
    }
    if previous is not None and form == "context":
        # the key copies these events' words: a purge of one of them re-keys this point
        payload[KEY_OF] = [previous.event_id]
    point = VectorPoint(
        point_key=event_point_key(e.tenant, e.event_id), dense=[], text=keys.sparse, payload=payload
    )
    return point, keys.dense


def vector_points(
    extractions: list[Extraction],
    embedder: Embedder,
    previous: Known | None = None,
    form: KeyForm = "context",
) -> list[VectorPoint]:
    """Event points with their dense vectors (the sparse one is derived from ``text``);
    ``previous``: the messages the batch's messages follow (see ``projection.previous``)."""
    known = previous or {}
    keyed = [_keyed(x, _previous(x, known), form) for x in extractions]
    return _embedded(keyed, embedder)


def _previous(x: Extraction, known: Known) -> Said | None:
    slot = follows(x)
    return known.get(slot) if slot is not None else None


def _embedded(keyed: list[tuple[VectorPoint, str]], embedder: Embedder) -> list[VectorPoint]:
    if not keyed:
        return []
    vectors = embedder.embed([dense for _, dense in keyed])
    return [
        p.model_copy(update={"dense": v.tolist()}) for (p, _), v in zip(keyed, vectors, strict=True)
    ]


def rekeyed(hits: list[VectorHit], form: KeyForm) -> list[tuple[VectorPoint, str]]:
    """Event points whose key copied a purged message's words, keyed again without them:
    what a replay keys them by, since it no longer finds the purged message."""
    out: list[tuple[VectorPoint, str]] = []
    for h in hits:
        payload = {k: v for k, v in h.payload.items() if k != KEY_OF}
        keys = index_keys(Turn.of(payload), None, form)
        point = VectorPoint(point_key=h.point_key, dense=[], text=keys.sparse, payload=payload)
        out.append((point, keys.dense))
    return out


LAST_STREAMS = 100_000  # streams whose last position the vector projector keeps
OPTIMIZE_MIN_NEW = 2000  # points written before a build is worth it
OPTIMIZE_IDLE_S = 3.0  # seconds without writes before a build starts


class IdleOptimizer:
    """Builds the index (HNSW, segment merges) when writes pause, off the projection loop.

    Only indexes that have ``optimize()`` (Qdrant Edge) need it; a server optimizes itself.
    Qdrant Edge holds the GIL for the whole build (measured: 26 s for 60k 256-d points, no
    other thread of the process ran), so it is off unless ``enabled``: in the embedded stack
    the index lives in the API process, which a build would freeze.
    """

    def __init__(
        self,
        index: VectorIndex,
        min_new: int = OPTIMIZE_MIN_NEW,
        idle_s: float = OPTIMIZE_IDLE_S,
        component: str = "vector-projector",
        version: str = "",
        enabled: bool = False,
    ) -> None:
        self.index = index
        self.min_new = min_new
        self.idle_s = idle_s
        self.new = 0
        self.last_write = time.monotonic()
        self.stop = threading.Event()
        self._m_new = UNOPTIMIZED.labels(component, version)
        self._m_busy = OPTIMIZING.labels(component, version)
        self._m_busy.set(0)
        self.thread = threading.Thread(target=self._run, name="vector-optimizer", daemon=True)
        if enabled and callable(getattr(index, "optimize", None)):
            self.thread.start()

    def wrote(self, n: int) -> None:
        self.new += n
        self.last_write = time.monotonic()
        self._m_new.set(self.new)

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            if self.new >= self.min_new and time.monotonic() - self.last_write >= self.idle_s:
                self._m_busy.set(1)  # before ``new`` drops, so a watcher never sees neither
                self.new = 0
                try:
                    self.index.optimize()  # type: ignore[attr-defined]
                except Exception:
                    log.exception("optimizing the vector index failed")
                finally:
                    self._m_busy.set(0)
                    self._m_new.set(self.new)


POINTS_EVERY_S = 5.0  # how old the points gauge's count may be


class PointCount:
    """The index's event points for ``memstream_projection_points``, counted when the gauge
    is read (a scrape) and at most every ``every_s`` seconds of ``clock``.

    Counting after every batch cost ~5% of the projection's thread; counted on read, the
    gauge still converges (within ``every_s``) when no batch follows the last write.
    """

    def __init__(
        self,
        index: VectorIndex,
        every_s: float = POINTS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.index, self.every_s, self.clock = index, every_s, clock
        self.value = 0.0
        self.counted_at: float | None = None
        self.closed = False
        self._lock = threading.Lock()  # scrapes may come from several threads

    def __call__(self) -> float:
        with self._lock:
            now = self.clock()
            due = self.counted_at is None or now - self.counted_at >= self.every_s
            if due and not self.closed:
                try:
                    self.value = float(self.index.count(kinds=["event"]))
                    self.counted_at = now
                except Exception:
                    # A failing gauge would fail the process's whole /metrics answer.
                    log.warning("counting the vector index's points failed", exc_info=True)
            return self.value

    def close(self) -> None:
        """Keep the last count: the index is closing (or dropped)."""
        with self._lock:
            self.closed = True


class VectorProjector(_Base):
    component = "vector-projector"
    kind = "vector"

    def __init__(
        self,
        index: VectorIndex,
        embedder: Embedder,
        version: str,
        producer: Producer,
        optimize: bool = False,
        opener: EntryOpener | None = None,
        keys: KeyForm = "context",
        clock: Callable[[], float] = time.monotonic,
        on_purge: Callable[[PurgeOrder], None] | None = None,
    ) -> None:
        super().__init__(version, producer, opener)
        self.on_purge = on_purge
        self.index = index
        self.embedder = embedder
        self.keys = keys
        # The last position written of each stream (for the next batch's first message): a
        # copy of what the index holds, so a restart (empty) reads the index instead.
        self.last: dict[Stream, tuple[int, Said | None]] = {}
        # What it applied, per tenant: (epoch, raw partition) -> raw offset. In memory: a
        # restarted projector starts empty, and reads fall back to its committed offsets.
        self._applied: dict[str, dict[tuple[str, int], int]] = {}
        self._applied_lock = threading.Lock()
        index.ensure()
        # The latest projector of a version serves its gauge (a restart replaces it).
        self.points = PointCount(index, clock=clock)
        POINTS.labels(self.component, version).set_function(self.points)
        self.optimizer = IdleOptimizer(
            index, component=self.component, version=version, enabled=optimize
        )

    def process(self, msgs: list[Message]) -> None:
        """Write the batch, then obey its tombstones and latent deletions; after any of
        them, compact the index so deleted points leave its files."""
        ledger, latent_records = by_topic(msgs)
        decoded = self.decode(ledger, light=True)
        records = self.decode_latents(latent_records)
        artifacts, deletions = split_records(records)
        previous = self.previous(decoded.extractions) if self.keys == "context" else None
        points = vector_points(decoded.extractions, self.embedder, previous, self.keys)
        if records:
            changes = latent_changes(artifacts, self.embedder)
            points += changes.upserts
            self.index.delete(changes.deletes + [latent_point_key(d) for d in deletions])
            PROJECTED_LATENTS.labels(self.component, self.kind, self.version).inc(len(records))
        if points:
            self.index.upsert(points)
            self.optimizer.wrote(len(points))
        if previous is not None:
            self._written(previous)
        self.observe(decoded.extractions)
        for order in decoded.purges:
            self.last.clear()  # it may hold a purged message
            removed = self.index.purge_events(order.tenant, list(order.event_ids))
            removed["context_keys"] = self.rekey(order)
            self.purged(VECTORS, order, removed)
            if self.on_purge is not None:  # what the process holds beside the index
                self.on_purge(order)
        if deletions:
            self.purged(VECTORS, None, {"latents": len(deletions)})
        if decoded.purges or deletions:
            self.index.compact()
        self._publish(decoded.applied)

    def _publish(self, applied: dict[RawKey, int]) -> None:
        """Publish what a batch applied (after its writes succeeded)."""
        if not applied:
            return
        with self._applied_lock:
            for (epoch, tenant, p), offset in applied.items():
                mine = self._applied.setdefault(tenant, {})
                if offset > mine.get((epoch, p), -1):
                    mine[(epoch, p)] = offset

    def applied_raw(self, tenant: str) -> dict[tuple[str, int], int]:
        """The tenant's progress since this projector started: (broker epoch, raw
        partition) -> the highest raw offset applied. Safe from any thread."""
        with self._applied_lock:
            return dict(self._applied.get(tenant, {}))

    def previous(self, extractions: list[Extraction]) -> dict[Slot, Said | None]:
        """What the positions the batch's messages follow hold: in the batch, else the last
        position written of the stream (kept from the batches before), else the index (one
        read by position per stream)."""
        known = in_batch(extractions)
        for (tenant, stream), seqs in missing(extractions, known).items():
            last = self.last.get((tenant, stream))
            if last is not None and seqs == [last[0]]:
                known[Slot(tenant, stream, last[0])] = last[1]
            else:
                known |= said_in([h.payload for h in self.index.at(tenant, stream, seqs)])
        return known

    def _written(self, known: Known) -> None:
        if len(self.last) > LAST_STREAMS:
            self.last.clear()
        self.last.update(last_of_streams(known))

    def rekey(self, order: PurgeOrder) -> int:
        """Key again, without the purged messages' words, the points whose key copied them."""
        hits = self.index.keyed_by(order.tenant, list(order.event_ids))
        points = _embedded(rekeyed(hits, self.keys), self.embedder)
        if points:
            self.index.upsert(points)
        return len(points)

    def close(self) -> None:
        self.optimizer.stop.set()
        self.points.close()
        self.producer.flush(10)
        self.index.close()

    def discard(self) -> None:
        self.points.close()
        self.index.drop()
