"""The thin consumer shell: consume a batch -> process (handlers + writes) -> commit.

Offsets are committed only after ``process`` returned, i.e. after its writes succeeded; an
exception in ``process`` is an infrastructure failure and ends the loop (the supervisor
restarts the process, which rebuilds its state from the durable logs). Bad *data* never
raises: handlers turn it into dead letters.

By default the loop commits past every record of the batch. A handler that holds records
back (e.g. an outcome waiting for its checkout trace) returns the positions to commit
instead, and an ``idle`` hook lets it act on time passing while no record arrives.
"""

from __future__ import annotations

import gc
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from memstream.metrics import BATCH_SECONDS, BATCH_SIZE, CONSUMER_LAG, UP

log = logging.getLogger(__name__)

AssignHook = Callable[[list[int]], None]
# The next offset to read, per (topic, partition): what a handler allows the loop to commit.
Positions = dict[tuple[str, int], int]


@dataclass
class BatchLoop:
    """``on_assign``/``on_revoke`` hear of the partitions of ``topic``; ``also`` names more
    topics the group consumes. ``process`` and ``idle`` may return the positions to commit
    (None: past every record consumed)."""

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
    stop_event: threading.Event = field(default_factory=threading.Event)
    assigned: list[tuple[str, int]] = field(default_factory=list)
    committed: Positions = field(default_factory=dict)

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT finish the current batch, commit, and leave the group."""

        def _stop(_sig: int, _frame: object) -> None:
            self.stop_event.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)

    def _mine(self, partitions: list[TopicPartition]) -> list[int]:
        return sorted(tp.partition for tp in partitions if tp.topic == self.topic)

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        parts = sorted((tp.topic, tp.partition) for tp in partitions)
        log.info("%s assigned %s", self.component, parts)
        if self.on_assign is not None:
            self.on_assign(self._mine(partitions))
        self.assigned = parts

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        parts = {(tp.topic, tp.partition) for tp in partitions}
        if self.on_revoke is not None:
            self.on_revoke(self._mine(partitions))
        self.assigned = [tp for tp in self.assigned if tp not in parts]
        for topic, p in parts:  # the new owner reports it; a stale copy here would count it twice
            CONSUMER_LAG.remove(self.component, self.group, topic, str(p))
            self.committed.pop((topic, p), None)

    def _update_lag(self, last: Positions) -> None:
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

    def _commit(self, positions: Positions) -> None:
        """Commit the positions that moved (an idle loop must not commit every poll) of the
        partitions this member still owns."""
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
        self.committed.update(moved)

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
        held = self.process(good)
        last: Positions = {}
        for m in good:
            t, p, off = m.topic(), m.partition(), m.offset()
            if t is not None and p is not None and off is not None:
                last[(t, p)] = max(last.get((t, p), -1), off)
        self._commit(held if held is not None else {tp: o + 1 for tp, o in last.items()})
        BATCH_SECONDS.labels(self.component).observe(time.perf_counter() - started)
        BATCH_SIZE.labels(self.component).observe(len(good))
        self._update_lag(last)

    def run(self) -> None:
        topics = [self.topic, *self.also]
        self.consumer.subscribe(topics, on_assign=self._assigned, on_revoke=self._revoked)
        UP.labels(self.component).set(1)
        try:
            while not self.stop_event.is_set():
                msgs = self.consumer.consume(self.batch_size, timeout=self.wait_s)
                good = self._good(msgs) if msgs else []
                if good:
                    self._batch(good)
                elif self.idle is not None:
                    positions = self.idle()
                    if positions is not None:
                        self._commit(positions)
        finally:
            UP.labels(self.component).set(0)
            self.consumer.close()
            for topic, p in self.assigned:  # e.g. a dropped projection version: no stale lag
                CONSUMER_LAG.remove(self.component, self.group, topic, str(p))


def tune_gc_for_batches() -> None:
    """Move start-up objects out of the collector's view and collect less often.

    Consumer batches allocate thousands of short-lived dicts; with the default threshold
    (700) the collector runs every few records and costs 10-20% of a worker's throughput.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
