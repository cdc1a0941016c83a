"""The API's outbox shell: spool accepted events (fsync), track them to the archive, re-send.

``POST /v1/events`` answers 2xx only once its events are in the spool on disk; from there
they reach the ledger even if the broker, the sequencer or this process dies. A thread
advances the pure :class:`~memstream.outbox.tracker.Tracker` once a second with offsets read
from Kafka, deletes segments proved archived and re-sends the others when the broker lost
its memory (told by :meth:`Outbox.broker_restarted`, or seen in the ledger's end offsets).
While the broker is known to be down a request does not wait for it at all.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson
from confluent_kafka import Message
from memstream.events import Event
from memstream.kafka.produce import DeliveryFailed
from memstream.kafka.reading import committed_offsets, end_offsets
from memstream.kafka.topics import ARCHIVER_GROUP, LEDGER, RAW, SEQUENCER_GROUP
from memstream.metrics import OUTBOX_EVENTS, OUTBOX_RESENT
from memstream.outbox.spool import Segment, Spool, read_lines
from memstream.outbox.tracker import Observation, Offsets, Tracker
from starlette.concurrency import run_in_threadpool

from memstream_api.producing import BatchProducer, Report

log = logging.getLogger(__name__)
TICK_S = 1.0
# Archived segments whose ledger marks are kept for reads given after= a position naming them.
ARCHIVED_KEPT = 4096


@dataclass(frozen=True)
class Spooled:
    """Events durable in segment ``seg_id``; ``pending``: why Kafka had not acknowledged
    them all when :meth:`Outbox.accept` returned (None: every one was)."""

    seg_id: int
    pending: str | None


class OutboxFull(RuntimeError):
    """The spool holds more than its limit (a long outage): refuse until it drains."""


class Outbox:
    """Spool + tracker + the thread that moves them; one per API process."""

    def __init__(
        self, directory: Path, bootstrap: str, producer: BatchProducer, max_bytes: int,
        component: str = "api",
    ) -> None:  # fmt: skip
        self.spool = Spool(directory)
        self.bootstrap = bootstrap
        self.producer = producer
        self.max_bytes = max_bytes
        self.component = component
        self.tracker = Tracker()
        self.lock = threading.Lock()
        self.events: dict[int, int] = {}  # segment id -> events, for the gauge
        self.archived: OrderedDict[int, Offsets] = OrderedDict()  # segment id -> ledger mark
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outbox", daemon=True)

    def start(self) -> Outbox:
        """Take over segments an earlier process left (they go again), then start ticking."""
        for seg in self.spool.existing():
            with self.lock:
                self.tracker.recovered(seg.seg_id)
                self.events[seg.seg_id] = seg.events
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.spool.close()

    async def accept(
        self, events: Sequence[Event], wait_s: float, on_report: Report | None = None
    ) -> Spooled:
        """Spool ``events`` durably, then produce them, waiting at most ``wait_s`` for Kafka,
        not at all while the broker is down (then ``pending`` says why; the tracker re-sends
        whatever did not arrive). ``on_report`` hears of each event's delivery, as the
        tracker does, even after the answer."""
        if self.spool.size_bytes() > self.max_bytes:
            raise OutboxFull(f"outbox holds over {self.max_bytes} bytes; retry later")
        lines = await run_in_threadpool(self.producer.encode, events)
        seg_id, closed = await run_in_threadpool(self.spool.append, lines)
        with self.lock:
            self.tracker.sent(seg_id, len(events))
            self.events[seg_id] = self.events.get(seg_id, 0) + len(events)
            if closed is not None:
                self.tracker.close(closed.seg_id)
        wait = 0.0 if self.producer.broker_down else wait_s
        report = self._report(seg_id, on_report)
        try:
            await self.producer.produce(events, on_report=report, wait_s=wait, values=lines)
        except DeliveryFailed as exc:
            return Spooled(seg_id, exc.reason)
        return Spooled(seg_id, None)

    def broker_restarted(self) -> None:
        """The broker came back empty: every segment goes again once its sends are settled
        (a replaced producer fails what it held at once)."""
        log.warning("broker restarted; re-sending the outbox")
        with self.lock:
            self.tracker.broker_restarted()
            self.archived.clear()  # marks of the old broker's ledger

    def _archived(self, seg_id: int, mark: Offsets | None) -> None:
        if mark is not None:
            self.archived[seg_id] = dict(mark)
            while len(self.archived) > ARCHIVED_KEPT:
                self.archived.popitem(last=False)

    def segment_mark(self, seg_id: int) -> tuple[bool, Offsets | None]:
        """``(held, ledger mark)`` of a segment for a read given after= a position naming
        it: held while this process holds it or saw it archived (the mark it had then);
        not held after a restart or when another process spooled it."""
        with self.lock:
            state = self.tracker.segments.get(seg_id)
            if state is not None:
                return True, state.ledger_mark
            mark = self.archived.get(seg_id)
            return mark is not None, mark

    def _report(self, seg_id: int, also: Report | None = None) -> Report:
        def report(event_id: str, msg: Message | None) -> None:
            with self.lock:
                if msg is None:
                    self.tracker.delivered(seg_id, None, None)
                else:
                    self.tracker.delivered(seg_id, msg.partition(), msg.offset())
            if also is not None:
                also(event_id, msg)

        return report

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self.tick()
            except Exception as exc:  # Kafka unreachable: the next tick tries again
                log.warning("outbox tick: %s", exc)

    def tick(self) -> None:
        """Close a due segment, advance the tracker, act on it."""
        closed = self.spool.roll_if_due()
        with self.lock:
            if closed is not None:
                self.tracker.close(closed.seg_id)
            settled = self.tracker.settled()
            if not self.tracker.segments:
                OUTBOX_EVENTS.labels(self.component).set(0)
                return
        obs = self._observe()
        with self.lock:
            marks = {i: s.ledger_mark for i, s in self.tracker.segments.items()}
            actions = self.tracker.step(obs, settled)
            for seg_id in actions.delete:
                self.events.pop(seg_id, None)
                self._archived(seg_id, marks.get(seg_id))
            OUTBOX_EVENTS.labels(self.component).set(sum(self.events.values()))
        for seg_id in actions.delete:
            (self.spool.directory / f"{seg_id:012d}.jsonl").unlink(missing_ok=True)
        for seg_id in actions.resend:
            self._resend(Segment(seg_id, self.spool.directory / f"{seg_id:012d}.jsonl"))

    def _resend(self, seg: Segment) -> None:
        lines = list(read_lines(seg.path)) if seg.path.exists() else []
        with self.lock:
            self.tracker.sent(seg.seg_id, len(lines))
        report = self._report(seg.seg_id)
        for line in lines:
            doc = orjson.loads(line)
            key = f"{doc['tenant']}/{doc['stream']}"
            self.producer.send_tracked(RAW, key, line, str(doc["id"]), report)
        OUTBOX_RESENT.labels(self.component).inc(len(lines))

    def _observe(self) -> Observation:
        return Observation(
            sequenced=committed_offsets(self.bootstrap, SEQUENCER_GROUP, RAW),
            ledger_ends=end_offsets(self.bootstrap, LEDGER, timeout=5),
            archived=committed_offsets(self.bootstrap, ARCHIVER_GROUP, LEDGER),
        )
