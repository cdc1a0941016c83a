"""The API's outbox shell: spool accepted events (fsync), track them to the archive, re-send.

``POST /v1/events`` answers 2xx only once its events are in the spool on disk; from there
they reach the ledger even if the broker, the sequencer or this process dies. A thread
advances the pure :class:`~memstream.outbox.tracker.Tracker` once a second with offsets read
from Kafka, deletes segments proved archived and re-sends the others when the broker lost
its memory (told by :meth:`Outbox.broker_restarted`, or seen in the ledger's end offsets).
While the broker is known to be down a request does not wait for it at all.

A record the broker refuses for good (too large for it, say: the limit lowered while the
record waited here) goes to the DLQ with its reason and where it was spooled, on the next
tick, and its segment goes on without it. Until the DLQ has it, ``memstream_outbox_undeliverable``
counts it and ``memstream status`` is unhealthy. One tenant's backlog may hold only its share
of the spool's bytes: past it that tenant alone is refused (:class:`TenantBacklog`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson
from anyio import to_thread
from confluent_kafka import Message

from memstream.events import Event
from memstream.intake.producer import BatchProducer, Refused, Report
from memstream.kafka.dlq import letter
from memstream.kafka.produce import DeliveryFailed
from memstream.kafka.reading import committed_offsets, end_offsets
from memstream.kafka.topics import ARCHIVER_GROUP, DLQ, LEDGER, RAW, SEQUENCER_GROUP
from memstream.metrics import (
    OUTBOX_DEAD_LETTERED,
    OUTBOX_EVENTS,
    OUTBOX_OLDEST_AGE,
    OUTBOX_RESENT,
    OUTBOX_UNDELIVERABLE,
)
from memstream.outbox.spool import Segment, Spool, read_lines
from memstream.outbox.tracker import Observation, Offsets, Tracker

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


class TenantBacklog(RuntimeError):
    """One tenant's backlog holds its whole share of the spool: refuse that tenant only."""


@dataclass(frozen=True)
class Line:
    """One spooled record: whose it is and how large, for the per-tenant share."""

    tenant: str
    size: int


class Outbox:
    """Spool + tracker + the thread that moves them; one per API process."""

    def __init__(
        self, directory: Path, bootstrap: str, producer: BatchProducer, max_bytes: int,
        component: str = "api", *, tenant_share: float = 1.0, dlq: str = DLQ,
    ) -> None:  # fmt: skip
        self.spool = Spool(directory)
        self.bootstrap = bootstrap
        self.producer = producer
        self.max_bytes = max_bytes
        self.tenant_max_bytes = int(max_bytes * tenant_share)
        self.component = component
        self.dlq = dlq
        self.tracker = Tracker()
        self.lock = threading.Lock()
        self.events: dict[int, int] = {}  # segment id -> events, for the gauge
        self.born: dict[int, float] = {}  # segment id -> wall time of its first record
        self.tenants: dict[int, Counter[str]] = {}  # segment id -> bytes per tenant
        self.held: Counter[str] = Counter()  # bytes per tenant in every segment
        self.archived: OrderedDict[int, Offsets] = OrderedDict()  # segment id -> ledger mark
        self._lettering: set[str] = set()  # poison ids whose dead letter is on its way
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outbox", daemon=True)
        for gauge in (OUTBOX_UNDELIVERABLE, OUTBOX_OLDEST_AGE):
            gauge.labels(component).set(0)
        OUTBOX_DEAD_LETTERED.labels(component)  # 0 from the start, as the gauges
        OUTBOX_RESENT.labels(component)

    def start(self) -> Outbox:
        """Take over segments an earlier process left (they go again), then start ticking."""
        for seg in self.spool.existing():
            lines = [_line(raw) for raw in read_lines(seg.path)]
            with self.lock:
                self.tracker.recovered(seg.seg_id)
                self.events[seg.seg_id] = seg.events
                self.born[seg.seg_id] = seg.path.stat().st_mtime
                self._hold(seg.seg_id, lines)
        self._thread.start()
        return self

    def _hold(self, seg_id: int, lines: Sequence[Line]) -> None:
        held = self.tenants.setdefault(seg_id, Counter())
        for line in lines:
            held[line.tenant] += line.size
            self.held[line.tenant] += line.size

    def _release(self, seg_id: int) -> None:
        for tenant, size in self.tenants.pop(seg_id, Counter()).items():
            self.held[tenant] -= size
            if self.held[tenant] <= 0:
                del self.held[tenant]

    def admit(self, tenant: str, size: int) -> None:
        """Refuse a write of ``size`` bytes for ``tenant`` when the spool is full
        (:class:`OutboxFull`) or the tenant's backlog would pass its share
        (:class:`TenantBacklog`)."""
        with self.lock:
            total, mine = sum(self.held.values()), self.held.get(tenant, 0)
        if total > self.max_bytes:
            raise OutboxFull(f"outbox holds over {self.max_bytes} bytes; retry later")
        if mine and mine + size > self.tenant_max_bytes:
            raise TenantBacklog(
                f"tenant {tenant}'s backlog in the outbox holds {mine} bytes; with this write "
                f"it would pass its share of {self.tenant_max_bytes} bytes; retry later"
            )

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.spool.close()

    async def accept(
        self, events: Sequence[Event], lines: Sequence[bytes], wait_s: float,
        on_report: Report | None = None,
    ) -> Spooled:  # fmt: skip
        """Spool ``events`` (``lines``: as encoded) durably, then produce them, waiting at
        most ``wait_s`` for Kafka, not at all while the broker is down (then ``pending`` says
        why; the tracker re-sends whatever did not arrive). ``on_report`` hears of each
        event's delivery, as the tracker does, even after the answer. Raises OutboxFull or
        TenantBacklog (see :meth:`admit`) before anything is spooled."""
        self.admit(events[0].tenant, sum(len(v) + 1 for v in lines))
        seg_id, closed = await to_thread.run_sync(self.spool.append, list(lines))
        with self.lock:
            self.tracker.sent(seg_id, len(events))
            self.events[seg_id] = self.events.get(seg_id, 0) + len(events)
            self.born.setdefault(seg_id, time.time())
            self._hold(
                seg_id, [Line(e.tenant, len(v) + 1) for e, v in zip(events, lines, strict=True)]
            )
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
        def report(event_id: str, msg: Message | Refused) -> None:
            with self.lock:
                if not isinstance(msg, Refused):
                    self.tracker.delivered(seg_id, msg.partition(), msg.offset())
                elif msg.for_good:
                    log.error("outbox segment %d: event %s refused for good (%s); it goes to "
                              "the DLQ", seg_id, event_id, msg.reason)  # fmt: skip
                    self.tracker.refused(seg_id, event_id, msg.reason)
                else:
                    self.tracker.delivered(seg_id, None, None)
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
        """Close a due segment, dead-letter poison, advance the tracker, act on it."""
        closed = self.spool.roll_if_due()
        with self.lock:
            if closed is not None:
                self.tracker.close(closed.seg_id)
            poisoned = self.tracker.poisoned()
        for seg_id, poison in poisoned.items():
            self._dead_letter(seg_id, poison)
        with self.lock:
            settled = self.tracker.settled()
            self._gauges()
            if not self.tracker.segments:
                return
        obs = self._observe()
        with self.lock:
            marks = {i: s.ledger_mark for i, s in self.tracker.segments.items()}
            actions = self.tracker.step(obs, settled)
            for seg_id in actions.delete:
                self.events.pop(seg_id, None)
                self.born.pop(seg_id, None)
                self._release(seg_id)
                self._archived(seg_id, marks.get(seg_id))
            self._gauges()
        for seg_id in actions.delete:
            self._path(seg_id).unlink(missing_ok=True)
        for seg_id in actions.resend:
            self._resend(Segment(seg_id, self._path(seg_id)))

    def _path(self, seg_id: int) -> Path:
        return self.spool.directory / f"{seg_id:012d}.jsonl"

    def _gauges(self) -> None:
        """The backlog gauges (under the lock)."""
        OUTBOX_EVENTS.labels(self.component).set(sum(self.events.values()))
        OUTBOX_UNDELIVERABLE.labels(self.component).set(self.tracker.undeliverable())
        oldest = min(self.born.values(), default=None)
        age = 0.0 if oldest is None else max(0.0, time.time() - oldest)
        OUTBOX_OLDEST_AGE.labels(self.component).set(age)

    def _resend(self, seg: Segment) -> None:
        lines = list(read_lines(seg.path)) if seg.path.exists() else []
        with self.lock:
            skipped = self.tracker.skipped(seg.seg_id)
        sends = []
        for line in lines:
            doc = orjson.loads(line)
            if str(doc["id"]) not in skipped:
                sends.append((f"{doc['tenant']}/{doc['stream']}", line, str(doc["id"])))
        with self.lock:
            self.tracker.sent(seg.seg_id, len(sends))
        report = self._report(seg.seg_id)
        for key, line, event_id in sends:
            self.producer.send_tracked(RAW, key, line, event_id, report)
        OUTBOX_RESENT.labels(self.component).inc(len(sends))

    def _dead_letter(self, seg_id: int, poison: dict[str, str]) -> None:
        """Send the poison records of a segment to the DLQ: the reason, where the record was
        spooled, and as much of it as a dead letter can hold (its head beyond that). The DLQ's
        acknowledgement lets the segment go on; a failure leaves them for the next tick."""
        path = self._path(seg_id)
        lines = list(read_lines(path)) if path.exists() else []
        now = datetime.now(UTC)
        # A dead letter is itself a record under the limit: keep a head that fits in base64.
        max_raw = self.producer.max_record_bytes // 2
        for n, line in enumerate(lines):
            doc = orjson.loads(line)
            event_id = str(doc["id"])
            with self.lock:
                if event_id not in poison or event_id in self._lettering:
                    continue
                self._lettering.add(event_id)
            source = {
                "outbox_segment": seg_id, "line": n, "event_id": event_id,
                "tenant": doc.get("tenant"), "stream": doc.get("stream"), "bytes": len(line),
            }  # fmt: skip
            value = letter(poison[event_id], line, source, self.component, now, max_raw)
            key = f"{doc.get('tenant')}/{doc.get('stream')}"
            self.producer.send_tracked(self.dlq, key, value, event_id, self._letter(seg_id))

    def _letter(self, seg_id: int) -> Report:
        def report(event_id: str, msg: Message | Refused) -> None:
            with self.lock:
                self._lettering.discard(event_id)
                if isinstance(msg, Refused):
                    log.warning("dead letter of outbox event %s not delivered: %s", event_id,
                                msg.reason)  # fmt: skip
                    return
                self.tracker.dead_lettered(seg_id, event_id)
                self._gauges()
            OUTBOX_DEAD_LETTERED.labels(self.component).inc()

        return report

    def _observe(self) -> Observation:
        return Observation(
            sequenced=committed_offsets(self.bootstrap, SEQUENCER_GROUP, RAW),
            ledger_ends=end_offsets(self.bootstrap, LEDGER, timeout=5),
            archived=committed_offsets(self.bootstrap, ARCHIVER_GROUP, LEDGER),
        )


def _line(raw: bytes) -> Line:
    """A spooled record's tenant and size (a segment left by an earlier process)."""
    try:
        tenant = str(orjson.loads(raw).get("tenant"))
    except (orjson.JSONDecodeError, AttributeError):
        tenant = ""
    return Line(tenant, len(raw) + 1)
