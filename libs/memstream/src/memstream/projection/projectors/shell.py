"""What the graph and vector projectors share: decoding a batch, dead letters, metrics.

A projector is a shell over pure steps: reading an entry (:mod:`memstream.projection.purge`,
:mod:`memstream.ledger.entry`) and extracting what it says (:mod:`memstream.projection.extract`)
are pure, with the time passed in; the shell decodes a batch, sends what cannot be projected
to the DLQ, writes the rest to its store and counts it. The loop commits once it returned
(``kafka/loop.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Message, Producer

from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.reading import headers_of
from memstream.kafka.topics import LATENTS, LEDGER
from memstream.ledger.entry import Opener, load_entry, read_loaded
from memstream.ledger.opening import EntryOpener
from memstream.metrics import PURGE_APPLIED_AT, PURGE_ITEMS_REMOVED, PURGES_APPLIED
from memstream.position import RAW_HEADER
from memstream.projection.latents import decode_artifacts
from memstream.projection.metrics import (
    FRESHNESS,
    PROJECTED,
    PROJECTED_LATENTS,
)
from memstream.projection.progress import applied_in
from memstream.projection.purge import Decoded, PurgeOrder, Read, read_entry
from memstream.records.latent import LatentRecord
from memstream.records.projected import Extraction
from memstream.times import epoch_seconds

log = logging.getLogger(__name__)
GRAPH, VECTORS = "graph", "vectors"  # the ``store`` label of the purge metrics


def read_record(loaded: Any, light: bool, opener: Opener | None) -> Read | str:
    """What the record gives a projector, or why the record itself cannot be projected."""
    return read_loaded(loaded, lambda entry: read_entry(entry, light), opener)


class ProjectorShell:
    """Decoding with dead letters: a record that cannot be projected never stops the loop.

    A record the store refuses is found and dead-lettered by the loop (``dead_letters``,
    see ``kafka/loop.py``): ``process`` only has to raise the store's error, and to be
    safe to run again on a part of the batch (every write is a MERGE or an upsert by id).
    """

    component = "projector"
    kind = "none"  # the ``projection`` label

    def __init__(
        self,
        version: str,
        producer: Producer,
        opener: EntryOpener | None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.version = version
        self.clock = clock  # when a dead letter says it was written
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
        now = self.clock()
        read: list[tuple[str | None, bytes | None, int]] = []
        loaded = [load_entry(m.value()) for m in msgs]
        opener = self.opener.for_batch(loaded) if self.opener is not None else None
        for m, doc in zip(msgs, loaded, strict=True):
            found = read_record(doc, light, opener)
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
        now = self.clock()
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
