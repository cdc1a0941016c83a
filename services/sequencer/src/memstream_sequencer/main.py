"""Sequencer: memory.events.raw -> memory.ledger (+ memory.dlq).

State (stream heads and seen ids) is rebuilt from the ledger partition that matches each
assigned raw partition, so a crash between producing and committing never duplicates or
loses an event: the replayed records are recognised by id.
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from datetime import UTC, datetime

from confluent_kafka import Message, Producer
from memstream.kafka.clients import make_consumer, make_producer
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.loop import BatchLoop, tune_gc_for_batches
from memstream.kafka.produce import (
    DeliveryFailed,
    DeliveryReports,
    flush_or_raise,
    produce_with_backpressure,
    refused_as_too_large,
)
from memstream.kafka.reading import headers_of, partition_count, read_to_end
from memstream.kafka.topics import DLQ, LEDGER, RAW, SEQUENCER_GROUP
from memstream.kafka.worker import start_worker
from memstream.ledger.sequencing import (
    DeadLetter,
    Duplicate,
    RawRecord,
    Sequenced,
    SequencerState,
    sequence,
)
from memstream.metrics import (
    EVENTS_DUPLICATE,
    EVENTS_LEDGERED,
    EVENTS_PRODUCED,
    RECORDS_TOO_LARGE,
    TenantLabels,
)
from memstream.times import iso_utc

COMPONENT = "sequencer"
log = logging.getLogger(COMPONENT)


class Sequencer:
    """The I/O shell around :func:`memstream.ledger.sequencing.sequence`."""

    def __init__(self, bootstrap: str, producer: Producer) -> None:
        self.bootstrap = bootstrap
        self.producer = producer
        self.states: dict[int, SequencerState] = {}
        # The producer reports failures only (see main): successes are counted per batch.
        self.reports = DeliveryReports()
        self.dead_letters = DeadLetterWriter(producer, COMPONENT, RAW)
        self._m_ledger = EVENTS_PRODUCED.labels(COMPONENT, LEDGER)
        self._m_dlq = EVENTS_PRODUCED.labels(COMPONENT, DLQ)
        RECORDS_TOO_LARGE.labels(COMPONENT, LEDGER)  # 0 from the start
        self._tenant_label = TenantLabels()

    def rebuild(self, partitions: list[int]) -> None:
        for p in partitions:
            state = SequencerState()
            n = 0
            for m in read_to_end(self.bootstrap, LEDGER, [p]):
                h = headers_of(m)
                key = m.key()
                if not isinstance(key, bytes) or not {"event_id", "seq", "hash"} <= h.keys():
                    continue
                state.observe(
                    key.decode(), h["event_id"].decode(), int(h["seq"]), h["hash"].decode()
                )
                n += 1
            self.states[p] = state
            log.info(
                "partition %d: rebuilt %d streams from %d ledger entries", p, len(state.heads), n
            )

    def forget(self, partitions: list[int]) -> None:
        self.producer.flush(30)
        for p in partitions:
            self.states.pop(p, None)

    def process(self, msgs: list[Message]) -> None:
        now = datetime.now(UTC)
        now_iso = iso_utc(now)
        ledgered: Counter[str] = Counter()  # per tenant
        dup = 0
        for m in msgs:
            p, off = m.partition() or 0, m.offset() or 0
            state = self.states.get(p)
            if state is None:  # assignment callback always runs first; be safe anyway
                self.rebuild([p])
                state = self.states[p]
            rec = RawRecord(m.value(), p, off, m.topic() or RAW)
            out = sequence(rec, state, now_iso)
            if isinstance(out, Sequenced):
                refused = self._produce(out, p)
                if refused is None:
                    ledgered[out.entry["tenant"]] += 1
                else:
                    _undo(state, out)
                    self.dead_letters.write(m, refused, now)
            elif isinstance(out, DeadLetter):
                self.dead_letters.write(m, out.reason, now)
            elif isinstance(out, Duplicate):
                dup += 1
        # Raising here leaves the batch uncommitted: it is re-read and the replay is deduplicated.
        flush_or_raise(self.producer, 30, self.reports, f"{LEDGER} entries")
        dead = self.dead_letters.flush()
        self._m_ledger.inc(ledgered.total())
        self._m_dlq.inc(dead)
        for tenant, n in ledgered.items():
            EVENTS_LEDGERED.labels(COMPONENT, self._tenant_label(tenant)).inc(n)
        EVENTS_DUPLICATE.labels(COMPONENT).inc(dup)

    def _produce(self, out: Sequenced, partition: int) -> str | None:
        """Queue the entry; why Kafka refuses it for its size (the raw record fitted, the
        chain fields made it too large), or None."""
        e = out.entry
        try:
            produce_with_backpressure(
                self.producer,
                LEDGER,
                out.value,
                key=out.key,
                partition=partition,
                headers=[
                    ("event_id", e["id"].encode()),
                    ("seq", str(e["seq"]).encode()),
                    ("hash", e["hash"].encode()),
                ],
                on_delivery=self.reports,
                record_id=e["id"],
            )
        except DeliveryFailed as exc:
            if not refused_as_too_large(exc):
                raise
            RECORDS_TOO_LARGE.labels(COMPONENT, LEDGER).inc()
            return f"ledger entry of {len(out.value)} bytes refused by Kafka: {exc.reason}"
        return None


def _undo(state: SequencerState, out: Sequenced) -> None:
    """Give the stream its head back: the entry was never written, the next one takes its
    seq and chains on the entry before it."""
    head = state.heads[out.key]
    head.seq, head.hash = out.entry["seq"] - 1, out.entry["prev_hash"]
    head.seen.discard(out.entry["id"])


def main() -> None:
    settings, bootstrap = start_worker(COMPONENT)
    raw_n, ledger_n = partition_count(bootstrap, RAW), partition_count(bootstrap, LEDGER)
    if raw_n != ledger_n:
        sys.exit(f"memstream-sequencer: {RAW} has {raw_n} partitions but {LEDGER} {ledger_n}")
    # A Python callback per delivered record costs more than producing it; flush() still
    # waits for every acknowledgement, and failures are reported.
    producer = make_producer(bootstrap, **{"delivery.report.only.error": True})
    seq = Sequencer(bootstrap, producer)
    loop = BatchLoop(
        consumer=make_consumer(bootstrap, SEQUENCER_GROUP, settings),
        topic=RAW,
        group=SEQUENCER_GROUP,
        component=COMPONENT,
        process=seq.process,
        on_assign=seq.rebuild,
        on_revoke=seq.forget,
        batch_size=settings.batch_size,
        wait_s=settings.batch_wait_s,
    )
    loop.install_signal_handlers()
    tune_gc_for_batches()
    loop.run()
    seq.producer.flush(30)


if __name__ == "__main__":
    main()
