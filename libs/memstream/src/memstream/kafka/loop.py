"""The thin consumer shell: consume a batch -> process (handlers + writes) -> commit.

Offsets are committed only after ``process`` returned, i.e. after its writes succeeded; an
exception in ``process`` is an infrastructure failure and ends the loop (the supervisor
restarts the process, which rebuilds its state from the durable logs). Bad *data* never
raises: handlers turn it into dead letters.
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


@dataclass
class BatchLoop:
    consumer: Consumer
    topic: str
    group: str
    component: str
    process: Callable[[list[Message]], None]
    on_assign: AssignHook | None = None
    on_revoke: AssignHook | None = None
    batch_size: int = 2000
    wait_s: float = 0.05
    stop_event: threading.Event = field(default_factory=threading.Event)
    assigned: list[int] = field(default_factory=list)

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT finish the current batch, commit, and leave the group."""

        def _stop(_sig: int, _frame: object) -> None:
            self.stop_event.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        parts = sorted(tp.partition for tp in partitions)
        log.info("%s assigned %s partitions %s", self.component, self.topic, parts)
        if self.on_assign is not None:
            self.on_assign(parts)
        self.assigned = parts

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        parts = sorted(tp.partition for tp in partitions)
        if self.on_revoke is not None:
            self.on_revoke(parts)
        self.assigned = [p for p in self.assigned if p not in parts]
        for p in parts:  # the new owner reports it; a stale copy here would count it twice
            CONSUMER_LAG.remove(self.component, self.group, self.topic, str(p))

    def _update_lag(self, last: dict[int, int]) -> None:
        for p, off in last.items():
            try:
                _low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(self.topic, p), timeout=1.0, cached=True
                )
            except Exception:  # lag is informative; never stop the loop for it
                continue
            if high >= 0:
                CONSUMER_LAG.labels(self.component, self.group, self.topic, str(p)).set(
                    max(0, high - off - 1)
                )

    def run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
        UP.labels(self.component).set(1)
        try:
            while not self.stop_event.is_set():
                msgs = self.consumer.consume(self.batch_size, timeout=self.wait_s)
                if not msgs:
                    continue
                good: list[Message] = []
                for m in msgs:
                    err = m.error()
                    if err is None:
                        good.append(m)
                    elif err.code() != KafkaError._PARTITION_EOF:
                        log.warning("%s consume error: %s", self.component, err)
                if not good:
                    continue
                started = time.perf_counter()
                self.process(good)
                last: dict[int, int] = {}
                for m in good:
                    p, off = m.partition(), m.offset()
                    if p is not None and off is not None:
                        last[p] = max(last.get(p, -1), off)
                self.consumer.commit(
                    offsets=[TopicPartition(self.topic, p, o + 1) for p, o in last.items()],
                    asynchronous=False,
                )
                BATCH_SECONDS.labels(self.component).observe(time.perf_counter() - started)
                BATCH_SIZE.labels(self.component).observe(len(good))
                self._update_lag(last)
        finally:
            UP.labels(self.component).set(0)
            self.consumer.close()
            for p in self.assigned:  # e.g. a dropped projection version: no stale lag
                CONSUMER_LAG.remove(self.component, self.group, self.topic, str(p))


def tune_gc_for_batches() -> None:
    """Move start-up objects out of the collector's view and collect less often.

    Consumer batches allocate thousands of short-lived dicts; with the default threshold
    (700) the collector runs every few records and costs 10-20% of a worker's throughput.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
