"""Sequencer: memory.events.raw -> memory.ledger (+ memory.dlq).

State (stream heads and seen ids) is rebuilt from the ledger partition that matches each
assigned raw partition, so a crash between producing and committing never duplicates or
loses an event: the replayed records are recognised by id. The loop is tenant-fair
(``BatchLoop(fair=True)``): a tenant's records keep their raw order within a partition, so
each stream's chain does, and a restart re-reads from the committed low-water mark what was
sequenced above it, which the same ids drop.
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Message, Producer
from memstream.kafka.clients import make_producer
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.produce import (
    DeliveryFailed,
    DeliveryReports,
    flush_or_raise,
    produce_with_backpressure,
    refused_as_too_large,
)
from memstream.kafka.reading import headers_of, partition_count, read_to_end
from memstream.kafka.runner import run_loops, worker_loop
from memstream.kafka.topics import DLQ, LEDGER, RAW
from memstream.kafka.worker import start_worker
from memstream.keys import KeyStore
from memstream.ledger.opening import reading_keys
from memstream.ledger.sequencing import (
    DeadLetter,
    Duplicate,
    RawRecord,
    Sequenced,
    SequencerState,
    Shredded,
    key_ref,
    parse,
    sequence,
)
from memstream.metrics import (
    EVENTS_DUPLICATE,
    EVENTS_LEDGERED,
    EVENTS_PRODUCED,
    RECORDS_TOO_LARGE,
    TenantLabels,
)
from memstream.position import RAW_HEADER, raw_header
from memstream.proof import Proven, Unproven, authenticate, credentials, producer_secret, proof_of
from memstream.shred.port import DataKeys
from memstream.sinks import SEQUENCER, SEQUENCER_GROUPS
from memstream.stack.epoch import read_epoch
from memstream.times import iso_utc

COMPONENT = SEQUENCER
log = logging.getLogger(f"memstream.{COMPONENT}")


class Sequencer:
    """The I/O shell around :func:`memstream.ledger.sequencing.sequence`."""

    def __init__(
        self,
        bootstrap: str,
        producer: Producer,
        keys: DataKeys | None = None,
        seal: bool = True,
        epoch: str = "",
        *,
        api_keys: KeyStore,
        internal: bytes | None,
    ) -> None:
        self.bootstrap = bootstrap
        # Whose proofs open the ledger: the API keys, re-read when their file changes (a
        # revoked key is refused from the next batch), and the stack's producer secret.
        self.api_keys = api_keys
        self.internal = internal
        # The supervisor stops the sequencer before a broker restart and writes the new
        # epoch before starting it again: one read at start names the log it consumes.
        self.epoch = epoch
        self.producer = producer
        self.keys = keys
        self.seal = seal and keys is not None
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

    def data_keys(
        self, docs: list[Any], proven: list[Proven | Unproven]
    ) -> dict[tuple[str, str], bytes] | None:
        """The data keys of a batch's proven events, in one store round trip per tenant:
        created where missing when sealing, only looked up (to open what came sealed) when
        not. An unproven record makes no key."""
        if self.keys is None:
            return None
        wanted: dict[str, list[str]] = {}
        for doc, p in zip(docs, proven, strict=True):
            ref = key_ref(doc) if isinstance(p, Proven) else None
            if ref is not None:
                wanted.setdefault(ref[0], []).append(ref[1])
        found: dict[tuple[str, str], bytes] = {}
        for tenant, ids in wanted.items():
            get = self.keys.create_or_get if self.seal else self.keys.get
            found.update(((tenant, i), k) for i, k in get(tenant, "event", ids).items())
        return found

    def process(self, msgs: list[Message]) -> None:
        now = datetime.now(UTC)
        now_iso = iso_utc(now)
        ledgered: Counter[str] = Counter()  # per tenant
        dup = 0
        recs = [
            RawRecord(
                m.value(),
                m.partition() or 0,
                m.offset() or 0,
                m.topic() or RAW,
                proof_of(headers_of(m)),
            )
            for m in msgs
        ]
        docs = [parse(r) for r in recs]
        creds = credentials(self.api_keys, self.internal)
        proven = [
            authenticate(creds, r.proof, r.value or b"", _tenant(d))
            for r, d in zip(recs, docs, strict=True)
        ]
        keys = self.data_keys(docs, proven)
        for m, rec, doc, who in zip(msgs, recs, docs, proven, strict=True):
            p = rec.partition
            state = self.states.get(p)
            if state is None:  # assignment callback always runs first; be safe anyway
                self.rebuild([p])
                state = self.states[p]
            out = sequence(rec, state, now_iso, keys, doc, seal=self.seal, proven=who)
            if isinstance(out, Sequenced):
                refused = self._produce(out, rec)
                if refused is None:
                    ledgered[out.entry["tenant"]] += 1
                else:
                    _undo(state, out)
                    self.dead_letters.write(m, refused, now)
            elif isinstance(out, DeadLetter):
                self.dead_letters.write(m, out.reason, now)
            elif isinstance(out, Duplicate):
                dup += 1
            elif isinstance(out, Shredded):
                dup += 1  # nothing to ledger: a purge destroyed its key before it came
                log.warning("event %s of %s: its data key is gone (purged); skipped",
                            out.event_id, out.key)  # fmt: skip
        # Raising here leaves the batch uncommitted: it is re-read and the replay is deduplicated.
        flush_or_raise(self.producer, 30, self.reports, f"{LEDGER} entries")
        dead = self.dead_letters.flush()
        self._m_ledger.inc(ledgered.total())
        self._m_dlq.inc(dead)
        for tenant, n in ledgered.items():
            EVENTS_LEDGERED.labels(COMPONENT, self._tenant_label(tenant)).inc(n)
        EVENTS_DUPLICATE.labels(COMPONENT).inc(dup)

    def _produce(self, out: Sequenced, rec: RawRecord) -> str | None:
        """Queue the entry on the ledger partition of its raw record; why Kafka refuses it
        for its size (the raw record fitted, the chain fields made it too large), or None."""
        e = out.entry
        try:
            produce_with_backpressure(
                self.producer,
                LEDGER,
                out.value,
                key=out.key,
                partition=rec.partition,
                headers=[
                    ("event_id", e["id"].encode()),
                    ("seq", str(e["seq"]).encode()),
                    ("hash", e["hash"].encode()),
                    (RAW_HEADER, raw_header(self.epoch, rec.offset)),
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


def _tenant(doc: Any) -> object:
    """The tenant a parsed record says it belongs to (None when it says none)."""
    return doc.get("tenant") if isinstance(doc, dict) else None


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
    producer = make_producer(
        bootstrap,
        **{"delivery.report.only.error": True, "message.max.bytes": settings.max_record_bytes},
    )
    epoch = read_epoch(settings.data_dir)
    seq = Sequencer(
        bootstrap, producer, reading_keys(settings), seal=settings.seal, epoch=epoch,
        api_keys=KeyStore.from_settings(settings), internal=producer_secret(settings),
    )  # fmt: skip
    (reads,) = SEQUENCER_GROUPS
    loop = worker_loop(
        bootstrap, settings, reads.group, reads.topics, COMPONENT, seq.process,
        on_assign=seq.rebuild, on_revoke=seq.forget,
        fair=True,  # a tenant's event is not sequenced behind another tenant's burst
    )  # fmt: skip
    run_loops([loop])
    seq.producer.flush(30)


if __name__ == "__main__":
    main()
