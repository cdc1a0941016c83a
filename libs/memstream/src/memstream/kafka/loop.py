"""The thin consumer shell: consume a batch -> process (handlers + writes) -> commit.

Offsets are committed only after ``process`` returned, i.e. after its writes succeeded. What
``process`` raises decides what happens to the batch (the taxonomy of
:mod:`memstream.store_errors`):

- ``StoreUnavailable``: a store is down. The same batch is processed again with capped
  exponential backoff, in place: nothing is committed, nothing dead-lettered, the loop lives
  (``memstream_consumer_waiting`` is 1 meanwhile).
- ``StoreRefused``: a store refuses something in the batch. With ``dead_letters`` set, the
  batch is split in halves and each half processed again, down to the records the store
  refuses on their own; each of those is dead-lettered with the store's reason and its
  offset, and the rest commit. Processing a contiguous part of a batch is what a smaller
  batch would have been, so this needs nothing more of ``process`` than redelivery does: an
  idempotent write (MERGE, upsert), and positions returned as None. If *every* record of a
  batch of several is refused on its own and the store did not point at the data of each
  (``StoreRefused.in_data``: the adapter found the NUL byte itself), it is not their data but
  what we send: the loop raises. What stays ambiguous: a batch of one record the server
  refuses (its data, or our query with any data) is dead-lettered, the log and the DLQ say
  which, and a consumer refusing everything shows as dead letters on every record it reads;
  a batch made only of records the server refuses raises, and the loop starts again on a
  batch that holds other records too.
- anything else is a bug, or a broker failure: it ends the loop (the supervisor or the
  projection runner starts it again, which rebuilds its state from the durable logs).

Bad *data* that a handler can judge by itself (malformed records) never raises: handlers
dead-letter it. By default the loop commits past every record of the batch. A handler that
holds records back (e.g. an outcome waiting for its checkout trace) returns the positions to
commit instead, and an ``idle`` hook lets it act on time passing while no record arrives.

A ``fair`` loop reads ahead (up to ``readahead_bytes``; its partitions are paused while the
buffer is full, resumed once it is below half) and builds each batch by tenant
(:mod:`memstream.kafka.fair`): a record of a small tenant is processed in one of the next
batches, not behind everything another tenant sent before it. While more than one tenant is
queued a batch holds at most ``fair_batch`` records, so the turns come round quickly. It
commits per partition the low-water mark (everything below it processed), so a restart
re-reads what was processed above it: its ``process`` must return None and be idempotent.
A revoked partition's queued records are dropped; its next owner reads them again.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from prometheus_client.metrics import MetricWrapperBase

from memstream.kafka.clients import member_id
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.fair import FairQueue
from memstream.metrics import (
    BATCH_SECONDS,
    BATCH_SIZE,
    CONSUMER_ASSIGNED,
    CONSUMER_COMMITTED,
    CONSUMER_LAG,
    CONSUMER_LAST_COMMIT,
    CONSUMER_MEMBER,
    CONSUMER_QUEUED_TENANTS,
    CONSUMER_READAHEAD_BYTES,
    CONSUMER_REBALANCES,
    CONSUMER_RETRIES,
    CONSUMER_RUNNING,
    CONSUMER_SERIES,
    CONSUMER_STARTED,
    CONSUMER_WAITING,
    FAIR_SERIES,
    UP,
)
from memstream.store_errors import StoreRefused, StoreUnavailable

log = logging.getLogger(__name__)

AssignHook = Callable[[list[int]], None]
# The next offset to read, per (topic, partition): what a handler allows the loop to commit.
Positions = dict[tuple[str, int], int]
IDLE_LAG_EVERY_S = 5.0  # how often an idle loop refreshes its lag gauges
READAHEAD_BYTES = 64 * 1024 * 1024
FAIR_BATCH = 500
REASON_CHARS = 500


@dataclass(frozen=True)
class Backoff:
    """Waits between attempts at a batch while a store is unavailable: doubling, capped."""

    first_s: float = 0.5
    max_s: float = 30.0


class IsolationFailed(RuntimeError):
    """Every record of a batch was refused on its own: the fault is in what we send."""


class StopRequested(Exception):
    """The loop was asked to stop while it waited for a store: leave without committing."""


@dataclass
class BatchLoop:
    """``on_assign``/``on_revoke`` hear of the partitions of ``topic``; ``also`` names more
    topics the group consumes. ``process`` and ``idle`` may return the positions to commit
    (None: past every record consumed). ``dead_letters`` turns on the isolation of records a
    store refuses; ``fair`` the tenant-fair read-ahead (see the module), without ``idle``."""

    consumer: Consumer
    topic: str
    group: str
    component: str
    process: Callable[[list[Message]], Positions | None]
    on_assign: AssignHook | None = None
    on_revoke: AssignHook | None = None
    batch_size: int = 2000
    wait_s: float = 0.05
    also: tuple[str, ...] = ()
    idle: Callable[[], Positions | None] | None = None
    dead_letters: DeadLetterWriter | None = None
    backoff: Backoff = field(default_factory=Backoff)
    stop_event: threading.Event = field(default_factory=threading.Event)
    assigned: list[tuple[str, int]] = field(default_factory=list)
    committed: Positions = field(default_factory=dict)
    fair: bool = False
    readahead_bytes: int = READAHEAD_BYTES
    fair_batch: int = FAIR_BATCH
    _lag_at: float = 0.0
    _queue: FairQueue | None = None
    _paused: bool = False  # the partitions are paused: the read-ahead is full
    _rebalanced: bool = False  # partitions changed since the last pause or resume

    def __post_init__(self) -> None:
        if self.fair:
            if self.idle is not None:
                raise ValueError("a fair loop commits its low marks; it takes no idle hook")
            self._queue = FairQueue()

    def committed_offsets(self, topic: str) -> dict[int, int]:
        """Partition -> the offset last committed on ``topic`` (everything below it is
        processed), of the partitions this member owns; a copy, safe from any thread (the
        copy of a dict runs no Python code, so the loop cannot change it half-way)."""
        done = dict(self.committed)
        return {p: off for (t, p), off in done.items() if t == topic}

    def _mine(self, partitions: list[TopicPartition]) -> list[int]:
        return sorted(tp.partition for tp in partitions if tp.topic == self.topic)

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        parts = sorted((tp.topic, tp.partition) for tp in partitions)
        log.info("%s assigned %s", self.component, parts)
        CONSUMER_REBALANCES.labels(self.component, self.group, "assign").inc()
        for topic, p in parts:
            CONSUMER_ASSIGNED.labels(self.component, self.group, topic, str(p)).set(1)
        if self.on_assign is not None:
            self.on_assign(self._mine(partitions))
        self.assigned = parts
        self._paused, self._rebalanced = False, True

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        parts = {(tp.topic, tp.partition) for tp in partitions}
        CONSUMER_REBALANCES.labels(self.component, self.group, "revoke").inc()
        if self.on_revoke is not None:
            self.on_revoke(self._mine(partitions))
        self.assigned = [tp for tp in self.assigned if tp not in parts]
        if self._queue is not None:  # read again from the mark committed for them
            self._queue.drop(parts)
        self._paused, self._rebalanced = False, True
        for topic, p in parts:  # the new owner reports it; a stale copy here would count it twice
            CONSUMER_LAG.remove(self.component, self.group, topic, str(p))
            CONSUMER_ASSIGNED.remove(self.component, self.group, topic, str(p))
            self.committed.pop((topic, p), None)

    def _update_lag(self, last: Positions) -> None:
        """Lag gauges from the last offset handled per partition (cached watermarks)."""
        for (topic, p), off in last.items():
            try:
                _low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=1.0, cached=True
                )
            except Exception:  # lag is informative; never stop the loop for it
                continue
            if high >= 0:
                CONSUMER_LAG.labels(self.component, self.group, topic, str(p)).set(
                    max(0, high - off - 1)
                )

    def _idle_lag(self) -> None:
        """While no record arrives, the lag is what is left after the consumer's position
        (so a loop that caught up reads 0 even if its last batch saw more behind it)."""
        now = time.monotonic()
        if now - self._lag_at < IDLE_LAG_EVERY_S or not self.assigned:
            return
        self._lag_at = now
        try:
            at = self.consumer.position([TopicPartition(t, p) for t, p in self.assigned])
        except Exception:
            return
        self._update_lag({(tp.topic, tp.partition): tp.offset - 1 for tp in at if tp.offset >= 0})

    def _commit(self, positions: Positions, counts: dict[tuple[str, int], int]) -> None:
        """Commit the positions that moved (an idle loop must not commit every poll) of the
        partitions this member still owns. ``counts``: records per partition, for a
        partition whose previous position this member does not know."""
        owned = set(self.assigned)
        moved = {
            tp: off
            for tp, off in positions.items()
            if tp in owned and self.committed.get(tp) != off
        }
        if not moved:
            return
        self.consumer.commit(
            offsets=[TopicPartition(t, p, off) for (t, p), off in moved.items()],
            asynchronous=False,
        )
        done = sum(
            off - self.committed[tp] if tp in self.committed else counts.get(tp, 0)
            for tp, off in moved.items()
        )
        self.committed.update(moved)
        CONSUMER_COMMITTED.labels(self.component, self.group).inc(max(0, done))
        CONSUMER_LAST_COMMIT.labels(self.component, self.group).set(time.time())

    def _good(self, msgs: list[Message]) -> list[Message]:
        good: list[Message] = []
        for m in msgs:
            err = m.error()
            if err is None:
                good.append(m)
            elif err.code() != KafkaError._PARTITION_EOF:
                log.warning("%s consume error: %s", self.component, err)
        return good

    def _batch(self, good: list[Message]) -> None:
        started = time.perf_counter()
        first: Positions = {}
        last: Positions = {}
        counts: dict[tuple[str, int], int] = {}
        for m in good:
            t, p, off = m.topic(), m.partition(), m.offset()
            if t is not None and p is not None and off is not None:
                first.setdefault((t, p), off - 1)
                last[(t, p)] = max(last.get((t, p), -1), off)
                counts[(t, p)] = counts.get((t, p), 0) + 1
        queue = self._queue
        if queue is not None:  # the lag behind the low marks, this batch included
            marks = queue.low_marks()
            first = {tp: min(o, marks.get(tp, o + 1) - 1) for tp, o in first.items()}
        self._update_lag(first)  # the batch included: a loop stuck on it shows its lag
        held = self.handle(good)
        if queue is None:
            positions = held if held is not None else {tp: o + 1 for tp, o in last.items()}
        elif held is not None:
            raise TypeError("a fair loop commits its low marks; its process must return None")
        else:
            positions = queue.low_marks()
            last = {tp: o - 1 for tp, o in positions.items()}
        self._commit(positions, counts)
        BATCH_SECONDS.labels(self.component).observe(time.perf_counter() - started)
        BATCH_SIZE.labels(self.component).observe(len(good))
        self._update_lag(last)

    def _next_batch(self) -> list[Message]:
        if self._queue is not None:
            return self._read_ahead(self._queue)
        msgs = self.consumer.consume(self.batch_size, timeout=self.wait_s)
        return self._good(msgs) if msgs else []

    def _read_ahead(self, queue: FairQueue) -> list[Message]:
        """Queue what the client has fetched, up to the budget (waiting only while nothing
        is queued), pause or resume the partitions, and take the next fair batch."""
        wait = self.wait_s if not queue.tenants else 0.0
        while True:  # at least one call a batch: it serves the group's callbacks
            msgs = self.consumer.consume(self.batch_size, timeout=wait)
            queue.add(self._good(msgs))
            if len(msgs) < self.batch_size or queue.bytes >= self.readahead_bytes:
                break
            wait = 0.0
        self._flow(queue.bytes)
        batch = queue.take(self.fair_batch if queue.tenants > 1 else self.batch_size)
        CONSUMER_READAHEAD_BYTES.labels(self.component, self.group).set(queue.bytes)
        CONSUMER_QUEUED_TENANTS.labels(self.component, self.group).set(queue.tenants)
        return batch

    def _flow(self, queued: int) -> None:
        """Pause every partition while ``queued`` bytes fill the read-ahead; resume them
        below half of it. After a rebalance they are resumed whatever their state was (a
        partition assigned again may keep the client's pause)."""
        parts = [TopicPartition(t, p) for t, p in self.assigned]
        if not parts:
            return
        if queued >= self.readahead_bytes:
            if not self._paused:
                self.consumer.pause(parts)
                self._paused, self._rebalanced = True, False
        elif (self._paused or self._rebalanced) and queued < self.readahead_bytes // 2:
            self.consumer.resume(parts)
            self._paused, self._rebalanced = False, False

    def _attempt(self, msgs: list[Message]) -> Positions | None:
        """``process(msgs)``, again and again while a store is unavailable."""
        delay, since, waited = self.backoff.first_s, time.monotonic(), False
        waiting = CONSUMER_WAITING.labels(self.component, self.group)
        try:
            while True:
                try:
                    return self.process(msgs)
                except StoreUnavailable as exc:
                    CONSUMER_RETRIES.labels(self.component, self.group).inc()
                    waiting.set(1)
                    waited = True
                    log.warning(
                        "%s (%s): %s store unavailable (%s); batch of %d again in %.1fs",
                        self.component, self.group, exc.store, exc, len(msgs), delay,
                    )  # fmt: skip
                    if self.stop_event.wait(delay):
                        raise StopRequested from exc
                    delay = min(delay * 2, self.backoff.max_s)
        finally:
            if waited:
                waiting.set(0)
                log.info("%s (%s): store back after %.1fs", self.component, self.group,
                         time.monotonic() - since)  # fmt: skip

    def handle(self, msgs: list[Message]) -> Positions | None:
        """Process one batch as the module says: again while a store is unavailable; with
        ``dead_letters``, split until the records a store refuses on their own are found,
        which are dead-lettered (flushed) while the rest is processed. Returns what
        ``process`` returned (None after a split); raises IsolationFailed when every record
        of a batch of several is refused, StopRequested when the loop is asked to stop while
        it waits for a store, and whatever else ``process`` raises."""
        try:
            return self._attempt(msgs)
        except StoreRefused as exc:
            if self.dead_letters is None:
                raise
            refused = self._split(msgs, exc)
        if len(msgs) > 1 and len(refused) == len(msgs) and not all(e.in_data for _, e in refused):
            raise IsolationFailed(
                f"{self.component} ({self.group}): each of the {len(msgs)} records of a batch "
                f"was refused on its own, so the fault is in what we send: {refused[0][1]}"
            ) from refused[0][1]
        for m, e in refused:
            where = f"{m.topic()}[{m.partition()}]@{m.offset()}"
            log.warning("%s (%s): %s refused; dead-lettered", self.component, self.group, where)
            # Only the content-free part: a dead letter's reason is never sealed.
            reason = f"{self.component} ({self.group}): {e.store} refused: {e.content_free}"
            self.dead_letters.write(m, reason[:REASON_CHARS])
        self.dead_letters.flush()
        return None

    def _split(self, msgs: list[Message], exc: StoreRefused) -> list[tuple[Message, StoreRefused]]:
        """The records of ``msgs`` (refused as a whole with ``exc``) refused on their own,
        with the store's refusal; every other record has been processed."""
        if len(msgs) == 1:
            return [(msgs[0], exc)]
        mid = len(msgs) // 2
        refused: list[tuple[Message, StoreRefused]] = []
        for half in (msgs[:mid], msgs[mid:]):
            try:
                held = self._attempt(half)
            except StoreRefused as inner:
                refused += self._split(half, inner)
                continue
            if held is not None:
                raise TypeError("isolating refused records needs a process that returns None")
        return refused

    def run(self) -> None:
        topics = [self.topic, *self.also]
        self.consumer.subscribe(topics, on_assign=self._assigned, on_revoke=self._revoked)
        self._started()
        clean = False
        try:
            while not self.stop_event.is_set():
                good = self._next_batch()
                if good:
                    self._batch(good)
                    continue
                self._idle_lag()
                if self.idle is not None:
                    positions = self.idle()
                    if positions is not None:
                        self._commit(positions, {})
            clean = True
        except StopRequested:
            clean = True
        finally:
            self._ended(clean)

    def _started(self) -> None:
        UP.labels(self.component).set(1)
        now = time.time()
        for series in self._series():  # every series exists from the start (0 = nothing yet)
            series.labels(self.component, self.group)
        for kind in ("assign", "revoke"):
            CONSUMER_REBALANCES.labels(self.component, self.group, kind)
        CONSUMER_MEMBER.labels(*self._member()).set(1)
        CONSUMER_RUNNING.labels(self.component, self.group).set(1)
        CONSUMER_STARTED.labels(self.component, self.group).set(now)
        # Until the first commit, "no commit for T s" counts from the start.
        CONSUMER_LAST_COMMIT.labels(self.component, self.group).set(now)

    def _ended(self, clean: bool) -> None:
        """A loop asked to stop leaves no series behind (e.g. a dropped projection version);
        one that failed says so until it is started again."""
        UP.labels(self.component).set(0)
        self.consumer.close()
        for topic, p in self.assigned:  # e.g. a dropped projection version: no stale lag
            CONSUMER_LAG.remove(self.component, self.group, topic, str(p))
            CONSUMER_ASSIGNED.remove(self.component, self.group, topic, str(p))
        CONSUMER_MEMBER.remove(*self._member())  # closed: no longer a member
        if not clean:
            CONSUMER_RUNNING.labels(self.component, self.group).set(0)
            for gauge in (CONSUMER_WAITING, *(FAIR_SERIES if self.fair else ())):
                gauge.labels(self.component, self.group).set(0)  # nothing read ahead now
            return
        for series in self._series():
            series.remove(self.component, self.group)

    def _member(self) -> tuple[str, str, str, str]:
        return (self.component, self.group, member_id(self.group), str(os.getpid()))

    def _series(self) -> tuple[MetricWrapperBase, ...]:
        return (*CONSUMER_SERIES, *FAIR_SERIES) if self.fair else CONSUMER_SERIES


def tune_gc_for_batches() -> None:
    """Move start-up objects out of the collector's view and collect less often.

    Consumer batches allocate thousands of short-lived dicts; with the default threshold
    (700) the collector runs every few records and costs 10-20% of a worker's throughput.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
