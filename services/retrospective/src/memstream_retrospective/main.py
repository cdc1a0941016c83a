"""Retrospective pass: memory.ledger + memory.checkouts -> memory.feedback (+ proposals).

The I/O shell around :class:`memstream.learning.retrospective.Retrospective`, in two loops:

- **route** (group ``memstream-learning-route``, over memory.ledger): copies the entries the
  pass reads (task records, feedback, proposals) as they are, sealed, to memory.learning keyed
  by tenant alone. The ledger is keyed by tenant and stream, so a tenant's outcomes spread
  over its partitions; re-keyed, they land on the partition of the tenant's checkout traces
  (memory.checkouts is keyed by tenant, and both topics have the same partition count).
- **pass** (group ``memstream-retrospective``, over memory.learning and memory.checkouts):
  the range assignor gives each member the same partition numbers of both topics, so every
  replica holds whole tenants: their traces, outcomes and task records meet in it. On each
  assignment the member rebuilds those partitions' state from the beginning of both topics
  (see the pass module for why the state is derived, not stored).

What the pass emits goes to memory.events.raw, through the sequencer, into the ledger;
offsets are committed only after it was flushed, and never past an outcome that still waits
for its trace. A copy routed twice (a crash between producing and committing) changes
nothing: what the pass emits has ids derived from the outcome, and its tallies are sets.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from confluent_kafka import Message, Producer
from memstream.events.envelope import MemoryFeedback, MemoryInvalidate
from memstream.kafka.clients import make_producer
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.loop import Positions
from memstream.kafka.produce import DeliveryReports, flush_or_raise, produce_with_backpressure
from memstream.kafka.reading import read_to_end
from memstream.kafka.route import not_co_partitioned, route_loop, tenant_router
from memstream.kafka.runner import run_loops, worker_loop
from memstream.kafka.topics import (
    CHECKOUTS,
    LEARNING,
    RAW,
)
from memstream.kafka.worker import start_worker
from memstream.learning.metrics import (
    ASSIGNMENTS,
    FEEDBACK_EVENTS,
    LAG,
    OUTCOMES,
    OUTCOMES_SEEN,
    PROPOSALS,
    TRACES,
    WAITING,
    init_retrospective,
)
from memstream.learning.retrospective import (
    LedgerRecord,
    Proposal,
    Result,
    RetroPolicy,
    Retrospective,
    Settled,
    TraceOpen,
    read_entry,
    read_trace,
    watched,
)
from memstream.ledger.entry import Opener
from memstream.ledger.opening import EntryOpener, reading_keys
from memstream.metrics import EVENTS_PRODUCED
from memstream.proof import Prover, producer_secret
from memstream.settings import Settings
from memstream.shred.sealer import EventSealer
from memstream.shred.traces import TraceOpener
from memstream.sinks import sink

LEARNS = sink("learning")
COMPONENT = LEARNS.component
log = logging.getLogger(f"memstream.{COMPONENT}")


class RetrospectiveWorker:
    """Feeds the pass, produces what it emits, and says how far the loop may commit."""

    def __init__(
        self,
        bootstrap: str,
        producer: Producer,
        policy: RetroPolicy,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        opener: Opener | None = None,
        traces: TraceOpen | None = None,
        sealer: EventSealer | None = None,
        prover: Prover | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.prover = prover  # the stack's proof on what it writes to the raw topic
        self.opener = opener
        self.traces = traces
        self.sealer = sealer or EventSealer(None)
        self.producer = producer
        self.pass_ = Retrospective(policy)
        self.clock = clock
        self.reports = DeliveryReports()
        self.dead_ledger = DeadLetterWriter(producer, COMPONENT, LEARNING)
        self.dead_traces = DeadLetterWriter(producer, COMPONENT, CHECKOUTS)
        self.consumed: dict[tuple[str, int], int] = {}
        init_retrospective(COMPONENT)
        EVENTS_PRODUCED.labels(COMPONENT, RAW)

    def rebuild(self, partitions: list[int]) -> None:
        """The state of the tenants on ``partitions``, from the beginning of their traces and
        learning records; then any proposal those records call for that the ledger does not
        hold (a crash before producing it). Runs on every assignment."""
        traces = entries = 0
        for m in read_to_end(self.bootstrap, CHECKOUTS, partitions):
            trace = read_trace(m.value(), self.traces)
            # A bad one is dead-lettered when the loop reads it; a shredded one is skipped.
            if trace is not None and not isinstance(trace, str):
                self.pass_.add_trace(trace)
                traces += 1
        for m in read_to_end(self.bootstrap, LEARNING, partitions):
            record = read_entry(m.value(), m.partition() or 0, m.offset() or 0, self.opener)
            if isinstance(record, LedgerRecord):
                self.pass_.rebuild(record)
                entries += 1
        log.info("partitions %s: %d traces and %d task records", partitions, traces, entries)
        self._emit(self.pass_.due_proposals(), self.clock())

    def forget(self, partitions: list[int]) -> None:
        self.pass_.forget(partitions)
        for p in partitions:
            self.consumed.pop((LEARNING, p), None)
            self.consumed.pop((CHECKOUTS, p), None)

    def process(self, msgs: list[Message]) -> Positions:
        """Traces first (an outcome in the same batch finds them), then ledger entries."""
        now = self.clock()
        ledger: list[Message] = []
        for m in msgs:
            topic, p, off = m.topic() or LEARNING, m.partition() or 0, m.offset() or 0
            self.consumed[(topic, p)] = off
            if topic == CHECKOUTS:
                self._trace(m, now)
            else:
                ledger.append(m)
        results: list[Result] = []
        for m in ledger:
            record = read_entry(m.value(), m.partition() or 0, m.offset() or 0, self.opener)
            if isinstance(record, str):
                self.dead_ledger.write(m, f"{COMPONENT}: {record}"[:500], now)
            elif record is not None:
                if record.event.type == "task.outcome":
                    OUTCOMES_SEEN.labels(COMPONENT).inc()
                results += self.pass_.observe(record, now)
        self._emit(results + self.pass_.settle(now), now)
        return self.positions()

    def idle(self) -> Positions:
        """Time passes without records: outcomes whose grace ran out bind now."""
        now = self.clock()
        self._emit(self.pass_.settle(now), now)
        return self.positions()

    def positions(self) -> Positions:
        """Past every record consumed, except not past a ledger outcome that still waits."""
        out: Positions = {}
        for (topic, p), off in self.consumed.items():
            floor = self.pass_.floor(p) if topic == LEARNING else None
            out[(topic, p)] = off + 1 if floor is None else min(off + 1, floor)
        return out

    def _trace(self, m: Message, now: datetime) -> None:
        trace = read_trace(m.value(), self.traces)
        if isinstance(trace, str):
            self.dead_traces.write(m, f"{COMPONENT}: {trace}"[:500], now)
        elif trace is not None:  # None: its packet key was destroyed by a purge
            self.pass_.add_trace(trace)

    def _emit(self, results: list[Result], now: datetime) -> None:
        """Produce the events, wait for Kafka (raises: nothing is committed), then count."""
        events: list[MemoryFeedback | MemoryInvalidate] = []
        for r in results:
            events += r.feedback if isinstance(r, Settled) else (r.event,)
        # Sealed like the API's events: no copy of their content is written in the clear.
        # One a purge shredded (derived again on a replay) is not written again.
        live = self.sealer.encode_live(events)
        for e, value in live:
            produce_with_backpressure(
                self.producer,
                RAW,
                value,
                key=e.key,
                headers=self.prover.headers(value) if self.prover is not None else None,
                on_delivery=self.reports,
                record_id=e.id,
            )
        if live:
            flush_or_raise(self.producer, 30, self.reports, f"{COMPONENT} events to {RAW}")
        self.dead_ledger.flush()
        self.dead_traces.flush()
        self._count(results, len(live), now)

    def _count(self, results: list[Result], produced: int, now: datetime) -> None:
        EVENTS_PRODUCED.labels(COMPONENT, RAW).inc(produced)
        for r in results:
            if isinstance(r, Proposal):
                PROPOSALS.labels(COMPONENT).inc()
                continue
            OUTCOMES.labels(COMPONENT, r.result).inc()
            LAG.labels(COMPONENT).observe(max(0.0, (now - r.ingested_at).total_seconds()))
            for e in r.feedback:
                kind = "credit" if e.payload.signal > 0 else "blame"
                ASSIGNMENTS.labels(COMPONENT, kind, r.basis).inc(len(e.payload.target_ids))
                FEEDBACK_EVENTS.labels(COMPONENT, "retrospective").inc()
        WAITING.labels(COMPONENT).set(len(self.pass_.waiting))
        TRACES.labels(COMPONENT).set(len(self.pass_.traces))


def policy_of(settings: Settings) -> RetroPolicy:
    return RetroPolicy(grace=timedelta(seconds=settings.retrospective_grace_s))


def main() -> None:
    settings, bootstrap = start_worker(COMPONENT)
    problem = not_co_partitioned(bootstrap, LEARNING, CHECKOUTS)
    if problem is not None:
        sys.exit(f"memstream-retrospective: {problem}")
    # Failures only: flush() still waits for every acknowledgement (see the sequencer).
    producer = make_producer(bootstrap, **{"delivery.report.only.error": True})
    keys = reading_keys(settings)
    worker = RetrospectiveWorker(
        bootstrap,
        producer,
        policy_of(settings),
        opener=EntryOpener(keys),
        traces=TraceOpener(keys),
        sealer=EventSealer(keys if settings.seal else None),
        prover=Prover.internal(producer_secret(settings)),
    )
    router = tenant_router(bootstrap, settings, COMPONENT, LEARNING, wanted=watched)
    stop = threading.Event()
    routes, learns = LEARNS.groups
    route = route_loop(bootstrap, settings, routes.group, router, stop)
    learn = worker_loop(
        bootstrap, settings, learns.group, learns.topics, COMPONENT, worker.process,
        idle=worker.idle, on_assign=worker.rebuild, on_revoke=worker.forget, stop_event=stop,
    )  # fmt: skip
    try:
        run_loops([route, learn])
    finally:
        producer.flush(30)
        router.producer.flush(30)


if __name__ == "__main__":
    main()
