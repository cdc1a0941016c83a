"""The Kafka offsets a read given ``after=`` waits on, read by one watch thread per API.

The sequencer's committed raw offsets, the ledger's end offsets and the projection groups'
committed ledger offsets, read only while some read waits on them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer
from memstream.kafka.reading import committed_with, end_offsets_with, reader
from memstream.kafka.topics import LEDGER, RAW, SEQUENCER_GROUP
from memstream.outbox.tracker import Offsets

log = logging.getLogger(__name__)
KAFKA_POLL_S = 0.2  # how often the watch reads Kafka offsets while some read needs them


@dataclass(frozen=True)
class Snapshot:
    """Kafka offsets read by the watch: the sequencer's committed raw offsets, then (after
    them) the ledger's end offsets, and the projection groups' committed ledger offsets."""

    sequenced: Offsets = field(default_factory=dict)
    ledger_end: Offsets = field(default_factory=dict)
    committed: Mapping[str, Offsets] = field(default_factory=dict)


class KafkaWatch:
    """Reads the offsets rule 2 needs, every :data:`KAFKA_POLL_S`, only while a read waits
    on them; the consumers are opened once and kept (none joins a group)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.latest = Snapshot()
        self._lock = threading.Lock()
        self._wanted: dict[str, int] = {}  # projection group -> reads waiting on it
        self._waiters = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._readers: dict[str, Consumer] = {}
        self._thread = threading.Thread(target=self._run, name="read-after-watch", daemon=True)

    def start(self) -> KafkaWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(30)

    def need(self, groups: list[str], on: bool) -> None:
        """A read starts (``on``) or stops waiting on the offsets of ``groups``."""
        with self._lock:
            self._waiters += 1 if on else -1
            for g in groups:
                self._wanted[g] = self._wanted.get(g, 0) + (1 if on else -1)
                if self._wanted[g] <= 0:
                    del self._wanted[g]
        if on:
            self._wake.set()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                with self._lock:
                    busy, groups = self._waiters > 0, sorted(self._wanted)
                if not busy:
                    self._wake.wait()
                    self._wake.clear()
                    continue
                try:
                    self.latest = self._read(groups)
                except Exception:  # Kafka away: the reads wait for their bound, then warn
                    log.warning("read-after: offsets not readable", exc_info=True)
                self._stop.wait(KAFKA_POLL_S)
        finally:
            for c in self._readers.values():
                c.close()

    def _reader(self, group: str | None) -> Consumer:
        key = group or ""
        if key not in self._readers:
            self._readers[key] = reader(self.bootstrap, group)
        return self._readers[key]

    def _read(self, groups: list[str]) -> Snapshot:
        sequenced = committed_with(self._reader(SEQUENCER_GROUP), RAW)
        ends = end_offsets_with(self._reader(None), LEDGER)  # after the commits: see ledger_marks
        committed = {g: committed_with(self._reader(g), LEDGER) for g in groups}
        return Snapshot(sequenced, ends, committed)
