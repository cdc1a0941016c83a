"""The vector projector: a version's ledger and latent artifacts as points of its vector index.

Both projectors read ``memory.ledger`` and ``memory.latents`` in one consumer group, so a
replayed version gets both from the start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import Message, Producer

from memstream.embed.port import Embedder
from memstream.ledger.opening import EntryOpener
from memstream.projection.components import VECTOR_PROJECTOR
from memstream.projection.keys import KeyForm, Turn, index_keys
from memstream.projection.latents import latent_changes, split_records
from memstream.projection.latents import point_key as latent_point_key
from memstream.projection.metrics import (
    OPTIMIZING,
    POINTS,
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
from memstream.projection.progress import RawKey
from memstream.projection.projectors.shell import VECTORS, ProjectorShell, by_topic
from memstream.projection.purge import PurgeOrder
from memstream.records.projected import Extraction, VectorHit, VectorPoint
from memstream.text.names import entity_key
from memstream.vectors.port import KEY_OF, VectorIndex, event_point_key

log = logging.getLogger(__name__)


def event_point(
    x: Extraction, previous: Said | None = None, form: KeyForm = "context"
) -> VectorPoint:
    """One point per event (so counts match the ledger), its payload what a checkout cites
    without a graph round trip. Its ``text`` is the sparse key; the dense vector is left for
    :func:`vector_points`."""
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
        "user": e.user,
        "actor_key": entity_key(e.agent),
        "occurred_at": e.occurred_at,
        "valid_to": None,
        "entity_keys": sorted({m.entity_key for m in x.mentions}),
        "metadata": e.metadata,
        "caused_by": e.caused_by,
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
        component: str = VECTOR_PROJECTOR,
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


class VectorProjector(ProjectorShell):
    component = VECTOR_PROJECTOR
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
