"""The retrospective pass (pure): bind task outcomes to checkout traces, assign credit or blame.

Typed records in (checkout traces from ``memory.checkouts``, ledger entries), typed results out
(``memory.feedback`` events, ``memory.invalidate`` proposals, what became of each outcome); no
I/O, the clock is passed in. The service shell produces what it is handed, through the
sequencer, into the ledger.

Binding: an outcome binds to the traces its ``checkout_ids`` name; else to
the traces of its (tenant, task_id); else to the traces of its (tenant, stream) since the
task's ``task.started`` (or within ``window`` before the outcome). An outcome naming a packet
not seen yet waits (so does one that finds no trace at all: the trace may still be in flight)
for ``grace``; then it binds with what exists. While it waits, the shell does not commit the
ledger past it (:meth:`Retrospective.floor`).

Credit and blame: success +1, failure -1, partial ``2·score−1`` (no score: ignored), abandoned
nothing. With ``used_ids`` those memories get the signal with certainty 1; without, it is
spread over each packet's answer support (or its first cited items) with certainty ``1/n``.
One feedback event per bound trace, ``caused_by`` = the outcome.

Why the state is rebuilt on every start, not kept in a local store: every piece of it is
derived from two logs we already keep. The trace table is ``memory.checkouts`` read from the
beginning; the tallies behind proposals are the retrospective feedback (and proposals) in the
ledger, the authority on what was assigned. A local store would be a second copy that can
disagree with the ledger after a crash, a restore from the archive or a purge. Re-processing
outcomes after a restart is harmless: event ids are uuid5 of the outcome, packet and purpose
and ``occurred_at`` is the outcome's, so the sequencer drops the repeats by id, and tallies
are sets keyed by task, so counting twice changes nothing.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import orjson
from pydantic import ValidationError

from memstream.events.envelope import (
    EventAdapter,
    MemoryFeedback,
    MemoryInvalidate,
    TaskOutcome,
    TaskStarted,
)
from memstream.events.payloads import (
    MemoryFeedbackPayload,
    MemoryInvalidatePayload,
)
from memstream.learning.trace import CheckoutTrace
from memstream.ledger.entry import CHAIN_FIELDS, Opener, validation_reason
from memstream.ledger.purge import is_purged
from memstream.shred.seal import is_sealed
from memstream.times import as_utc, to_datetime

# Opens a sealed trace (memstream.shred.traces.TraceOpener): None when its key is gone.
TraceOpen = Callable[[dict[str, Any]], dict[str, Any] | None]
STREAM = "retrospective"  # one stream per tenant holds everything the pass writes
AGENT = "retrospective"
_NAMESPACE = uuid.UUID("5b0c4c8e-6f0e-5a43-9d55-0c1a7e3f2b61")
# The types the pass reads; anything else is skipped without parsing (see ``read_entry``).
MAX_ID = 200  # the longest packet id a feedback event can carry
_MARKERS = (b'"type":"task.', b'"type":"memory.feedback"', b'"type":"memory.invalidate"')

Watched = TaskStarted | TaskOutcome | MemoryFeedback | MemoryInvalidate
_WATCHED_TYPES = ("task.started", "task.outcome", "memory.feedback", "memory.invalidate")
Binding = Literal["checkout_ids", "task", "stream", "none"]


@dataclass(frozen=True)
class RetroPolicy:
    """How long outcomes wait, how far back stream binding looks, when to propose."""

    grace: timedelta = timedelta(seconds=30)
    window: timedelta = timedelta(hours=1)  # stream binding without a task.started
    proposal_failures: int = 3  # distinct failed tasks before an invalidation proposal
    # Blame spread over more than two memories says too little about any one of them to
    # count toward a proposal (it still moves the prior, weighted by its certainty).
    record_certainty: float = 0.5
    fallback_cited: int = 3  # cited items credited when a packet had no answer
    max_traces: int = 100_000  # about 1 KB each
    max_tasks: int = 200_000
    max_caused_by: int = 20


@dataclass(frozen=True)
class LedgerRecord:
    """A ledger entry the pass reads, with where it sits in the ledger and when it got there."""

    event: Watched
    partition: int
    offset: int
    ingested_at: datetime


@dataclass(frozen=True)
class Settled:
    """What became of one outcome: bound (every named packet found), late (bound after the
    grace with what existed), unbound (no trace), or ignored (nothing to learn)."""

    outcome_id: str
    tenant: str
    result: Literal["bound", "late", "unbound", "ignored"]
    binding: Binding
    packets: tuple[str, ...]
    feedback: tuple[MemoryFeedback, ...]
    ingested_at: datetime
    reason: str = ""
    basis: Literal["used", "spread"] = "spread"  # used: the outcome named its used_ids


@dataclass(frozen=True)
class Proposal:
    """A ``memory.invalidate`` proposal for a memory that keeps failing tasks."""

    event: MemoryInvalidate


Result = Settled | Proposal


@dataclass
class _Pending:
    record: LedgerRecord
    since: datetime  # when the pass first saw it (processing clock)


@dataclass
class _Tally:
    """A memory's task record: failed task -> outcome id, succeeded tasks."""

    failed: dict[str, str] = field(default_factory=dict)
    succeeded: set[str] = field(default_factory=set)
    last_at: datetime | None = None
    proposed: bool = False


def event_id(tenant: str, *parts: str) -> str:
    """A deterministic event id: the same inputs always give the same id."""
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join((tenant, *parts))))


def watched(value: bytes | None) -> bool:
    """Whether a ledger record may be one the pass reads (a byte search, nothing parsed)."""
    return value is not None and any(marker in value for marker in _MARKERS)


def read_entry(
    value: bytes | None, partition: int, offset: int, opener: Opener | None = None
) -> LedgerRecord | str | None:
    """The record the pass reads, None for an entry of another type or a purged one, or why
    it is malformed.

    Entries of other types (and empty records) are skipped on a byte search, unparsed: the
    pass reads the whole ledger, and the projectors already dead-letter a malformed entry
    (twice would count it twice). Canonical JSON has no spaces, so a watched type's marker
    is exact.
    """
    if value is None or not watched(value):
        return None
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return f"undecodable: {exc}"
    if not isinstance(doc, dict):
        return f"not a JSON object but {type(doc).__name__}"
    # A purged entry has no content to read: it is skipped, never dead-lettered.
    if doc.get("type") not in _WATCHED_TYPES or is_purged(doc):
        return None
    if is_sealed(doc):
        if opener is None:
            raise RuntimeError("a sealed ledger entry read without a data key store")
        try:
            doc = opener(doc)
        except (LookupError, TypeError, ValueError) as exc:
            return f"sealed ledger entry does not open: {exc}"
        if is_purged(doc):  # its data key was destroyed
            return None
    try:
        event = EventAdapter.validate_python(
            {k: v for k, v in doc.items() if k not in CHAIN_FIELDS}
        )
    except ValidationError as exc:
        return "malformed ledger entry: " + validation_reason(exc)
    try:
        ingested = to_datetime(str(doc["ingested_at"]))
    except (KeyError, ValueError) as exc:
        return f"malformed ledger entry: ingested_at: {exc!r}"
    assert isinstance(event, Watched)  # the type was checked above
    return LedgerRecord(event, partition, offset, ingested)


def read_trace(value: bytes | None, opener: TraceOpen | None = None) -> CheckoutTrace | str | None:
    """A checkout trace, why the record is not one, or None: a sealed trace whose packet key
    a purge destroyed (skipped like a purged entry, never dead-lettered). A sealed trace read
    without ``opener`` raises: every reader of ``memory.checkouts`` must have the key store."""
    if value is None:
        return "empty record (no value)"
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return f"malformed checkout trace: undecodable: {exc}"
    if isinstance(doc, dict) and is_sealed(doc):
        if opener is None:
            raise RuntimeError("a sealed checkout trace read without a data key store")
        try:
            opened = opener(doc)
        except ValueError as exc:  # SealBroken: altered, or moved onto another packet
            return f"sealed checkout trace does not open: {exc}"
        if opened is None:
            return None
        doc = opened
    try:
        trace = CheckoutTrace.model_validate(doc)
    except ValidationError as exc:
        return "malformed checkout trace: " + validation_reason(exc)
    if not 0 < len(trace.packet_id) <= MAX_ID:  # it becomes a feedback event's packet_id
        return f"malformed checkout trace: packet_id of {len(trace.packet_id)} characters"
    # Binding compares it with ledger times, which are aware: naive is UTC, as everywhere.
    return (
        trace if trace.at.tzinfo is not None else trace.model_copy(update={"at": as_utc(trace.at)})
    )


def signal_of(outcome: TaskOutcome) -> float | None:
    """+1 success, -1 failure, ``2·score−1`` partial; None when there is nothing to learn."""
    p = outcome.payload
    if p.status == "success":
        return 1.0
    if p.status == "failure":
        return -1.0
    if p.status == "partial" and p.score is not None and p.score != 0.5:
        return round(2 * p.score - 1, 4)
    return None


def _nothing_to_learn(outcome: TaskOutcome) -> str:
    p = outcome.payload
    if p.status != "partial":
        return p.status
    return "partial without a score" if p.score is None else "partial at 0.5: neither way"


def _base(item_id: str) -> str:
    """The event an item rests on (a fact id is ``<event_id>#n``)."""
    return item_id.split("#", 1)[0]


def _cites(trace: CheckoutTrace, item_id: str) -> bool:
    shown = (*trace.answer_ids, *trace.cited_ids)
    return item_id in shown or _base(item_id) in {_base(i) for i in shown}


def _used_by_trace(
    used: list[str], traces: list[CheckoutTrace]
) -> list[tuple[CheckoutTrace | None, list[str]]]:
    """Each used item with the first bound packet that cited it. Items no packet cited (an id
    the agent got elsewhere, or an event id for a cited fact) go with the first packet, the
    best guess of where they came from; with no packet at all, they stand alone."""
    groups: dict[str, list[str]] = {}
    left: list[str] = []
    for item in used:
        trace = next((t for t in traces if _cites(t, item)), None)
        if trace is None:
            left.append(item)
        else:
            groups.setdefault(trace.packet_id, []).append(item)
    if left and traces:
        groups.setdefault(traces[0].packet_id, []).extend(left)
    out: list[tuple[CheckoutTrace | None, list[str]]] = [
        (t, groups[t.packet_id]) for t in traces if t.packet_id in groups
    ]
    if left and not traces:
        out.append((None, left))
    return out


_DID = {"success": "succeeded", "failure": "failed", "partial": "partly succeeded"}


def _feedback(
    outcome: TaskOutcome,
    trace: CheckoutTrace | None,
    targets: list[str],
    signal: float,
    certainty: float,
) -> MemoryFeedback:
    p = outcome.payload
    packet = trace.packet_id if trace is not None else None
    how = (
        "relied on (named in used_ids)"
        if certainty == 1.0 and p.used_ids
        else f"spread over {len(targets)} answer item(s) of the packet (certainty {certainty:g})"
    )
    score = f" (score {p.score:g})" if p.score is not None else ""
    return MemoryFeedback(
        id=event_id(outcome.tenant, outcome.id, packet or "", "feedback"),
        tenant=outcome.tenant,
        stream=STREAM,
        agent=AGENT,
        occurred_at=outcome.occurred_at,
        caused_by=[outcome.id],
        type="memory.feedback",
        payload=MemoryFeedbackPayload(
            target_ids=targets[:200],
            signal=signal,
            packet_id=packet,
            reason=f"task {p.task_id} {_DID.get(p.status, p.status)}{score}; {how}"[:2000],
            source="retrospective",
            task_id=p.task_id,
            outcome=p.status,
            certainty=certainty,
            family=trace.family if trace is not None else None,
        ),
    )


def feedback_events(
    outcome: TaskOutcome, traces: list[CheckoutTrace], signal: float, policy: RetroPolicy
) -> list[MemoryFeedback]:
    """One feedback event per bound trace that has something to credit or blame."""
    used = list(dict.fromkeys(outcome.payload.used_ids))
    if used:
        return [_feedback(outcome, t, ids, signal, 1.0) for t, ids in _used_by_trace(used, traces)]
    out: list[MemoryFeedback] = []
    credited: set[str] = set()  # a memory in two packets of one task is credited once
    for t in traces:
        support = list(dict.fromkeys(t.answer_ids or t.cited_ids[: policy.fallback_cited]))
        targets = [i for i in support if i not in credited]
        if not targets:
            continue
        credited.update(targets)
        out.append(_feedback(outcome, t, targets, signal, round(1 / len(support), 4)))
    return out


class TraceTable:
    """Checkout traces by packet, task and stream; bounded, the oldest leave first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.by_packet: OrderedDict[tuple[str, str], CheckoutTrace] = OrderedDict()
        self.by_task: dict[tuple[str, str], list[str]] = {}
        self.by_stream: dict[tuple[str, str], list[str]] = {}

    def __len__(self) -> int:
        return len(self.by_packet)

    def add(self, trace: CheckoutTrace) -> None:
        key = (trace.tenant, trace.packet_id)
        if key in self.by_packet:  # re-read after a restart
            return
        self.by_packet[key] = trace.model_copy(update={"query": ""})  # never read: not kept
        if trace.task_id:
            self.by_task.setdefault((trace.tenant, trace.task_id), []).append(trace.packet_id)
        if trace.stream:
            self.by_stream.setdefault((trace.tenant, trace.stream), []).append(trace.packet_id)
        while len(self.by_packet) > self.limit:
            self._evict()

    def _evict(self) -> None:
        (tenant, packet), trace = self.by_packet.popitem(last=False)
        for index, name in ((self.by_task, trace.task_id), (self.by_stream, trace.stream)):
            ids = index.get((tenant, name)) if name else None
            if ids is not None:
                ids.remove(packet)
                if not ids:
                    del index[(tenant, name or "")]

    def get(self, tenant: str, packet_id: str) -> CheckoutTrace | None:
        return self.by_packet.get((tenant, packet_id))

    def _all(self, tenant: str, ids: list[str]) -> list[CheckoutTrace]:
        return [self.by_packet[(tenant, i)] for i in ids]

    def of_task(self, tenant: str, task_id: str) -> list[CheckoutTrace]:
        return self._all(tenant, self.by_task.get((tenant, task_id), []))

    def of_stream(self, tenant: str, stream: str) -> list[CheckoutTrace]:
        return self._all(tenant, self.by_stream.get((tenant, stream), []))


@dataclass(frozen=True)
class _Found:
    binding: Binding
    traces: list[CheckoutTrace]
    missing: bool = False  # a named packet (or any trace at all) was not found


class Retrospective:
    """The pass's state (trace table, task starts, waiting outcomes, task records per memory)
    and the rules over it. Not thread-safe: one consumer loop drives it."""

    def __init__(self, policy: RetroPolicy | None = None) -> None:
        self.policy = policy or RetroPolicy()
        self.traces = TraceTable(self.policy.max_traces)
        self.started: OrderedDict[tuple[str, str], datetime] = OrderedDict()
        self.waiting: dict[tuple[str, str], _Pending] = {}
        self.tallies: dict[tuple[str, str], _Tally] = {}

    def add_trace(self, trace: CheckoutTrace) -> None:
        self.traces.add(trace)

    def rebuild(self, record: LedgerRecord) -> None:
        """Account for an entry whose effects are already in the ledger (no results)."""
        e = record.event
        if isinstance(e, TaskStarted):
            self.started[(e.tenant, e.payload.task_id)] = record.ingested_at
            while len(self.started) > self.policy.max_tasks:
                self.started.popitem(last=False)
        elif isinstance(e, MemoryFeedback):
            self._tally(e)
        elif isinstance(e, MemoryInvalidate) and e.payload.review_status == "proposed":
            for target in e.payload.target_ids:
                self.tallies.setdefault((e.tenant, target), _Tally()).proposed = True

    def observe(self, record: LedgerRecord, now: datetime) -> list[Result]:
        """A ledger entry as it arrives: an outcome binds (or waits); feedback may propose."""
        e = record.event
        if isinstance(e, TaskOutcome):
            return self._outcome(record, now)
        self.rebuild(record)
        if isinstance(e, MemoryFeedback):
            return self._proposals(e.tenant, e.payload.target_ids)
        return []

    def settle(self, now: datetime) -> list[Result]:
        """Waiting outcomes whose traces arrived, or whose grace ran out."""
        out: list[Result] = []
        for key, pending in list(self.waiting.items()):
            found = self._bind(pending.record, final=now - pending.since >= self.policy.grace)
            if found is not None:
                del self.waiting[key]
                out += self._assign(pending.record, found)
        return out

    def floor(self, partition: int) -> int | None:
        """The lowest ledger offset of ``partition`` still waiting: commit no further."""
        offsets = [
            p.record.offset for p in self.waiting.values() if p.record.partition == partition
        ]
        return min(offsets) if offsets else None

    def forget(self, partitions: list[int]) -> None:
        """Partitions this process no longer owns: their new owner re-reads those outcomes."""
        for key, pending in list(self.waiting.items()):
            if pending.record.partition in partitions:
                del self.waiting[key]

    def due_proposals(self) -> list[Result]:
        """Proposals the rebuilt records call for and the ledger does not hold yet."""
        out: list[Result] = []
        for (tenant, item), tally in self.tallies.items():
            out += self._propose(tenant, item, tally)
        return out

    def _outcome(self, record: LedgerRecord, now: datetime) -> list[Result]:
        o = record.event
        assert isinstance(o, TaskOutcome)
        if signal_of(o) is None:
            reason = _nothing_to_learn(o)
            return [Settled(o.id, o.tenant, "ignored", "none", (), (), record.ingested_at, reason)]
        found = self._bind(record, final=False)
        if found is None:
            self.waiting.setdefault((o.tenant, o.id), _Pending(record, now))
            return []
        return self._assign(record, found)

    def _bind(self, record: LedgerRecord, final: bool) -> _Found | None:
        """The traces an outcome binds to; None while it should wait."""
        o = record.event
        assert isinstance(o, TaskOutcome)
        named = list(dict.fromkeys(o.payload.checkout_ids))
        if named:
            traces = [t for pid in named if (t := self.traces.get(o.tenant, pid)) is not None]
            if len(traces) < len(named) and not final:
                return None
            return _Found("checkout_ids", traces, len(traces) < len(named))
        traces = self.traces.of_task(o.tenant, o.payload.task_id)
        if traces:
            return _Found("task", traces)
        traces = self._of_stream(record)
        if traces:
            return _Found("stream", traces)
        return _Found("none", [], True) if final else None

    def _of_stream(self, record: LedgerRecord) -> list[CheckoutTrace]:
        """Traces of the outcome's stream since its task started (else within ``window``),
        not later than the outcome, and not tied to another task."""
        o = record.event
        assert isinstance(o, TaskOutcome)
        task = o.payload.task_id
        start = self.started.get((o.tenant, task), record.ingested_at - self.policy.window)
        return [
            t
            for t in self.traces.of_stream(o.tenant, o.stream)
            if t.task_id in (None, task) and start <= t.at <= record.ingested_at
        ]

    def _assign(self, record: LedgerRecord, found: _Found) -> list[Result]:
        o = record.event
        assert isinstance(o, TaskOutcome)
        signal = signal_of(o)
        assert signal is not None  # ignored outcomes never bind
        events = feedback_events(o, found.traces, signal, self.policy)
        result: Literal["bound", "late", "unbound"] = (
            "unbound" if not found.traces else "late" if found.missing else "bound"
        )
        packets = tuple(t.packet_id for t in found.traces)
        basis: Literal["used", "spread"] = "used" if o.payload.used_ids else "spread"
        settled = Settled(
            o.id, o.tenant, result, found.binding, packets, tuple(events), record.ingested_at,
            basis=basis,
        )  # fmt: skip
        out: list[Result] = [settled]
        for e in events:
            self._tally(e)
            out += self._proposals(e.tenant, e.payload.target_ids)
        return out

    def _tally(self, e: MemoryFeedback) -> None:
        """Count a retrospective feedback event in its targets' task records (idempotent)."""
        p = e.payload
        if (
            p.source != "retrospective"
            or p.task_id is None
            or p.certainty < self.policy.record_certainty
        ):
            return
        if p.outcome not in ("success", "failure"):
            return
        outcome_id = e.caused_by[0] if e.caused_by else e.id
        for target in p.target_ids:
            tally = self.tallies.setdefault((e.tenant, target), _Tally())
            if p.outcome == "failure":
                tally.failed.setdefault(p.task_id, outcome_id)
            else:
                tally.succeeded.add(p.task_id)
            if tally.last_at is None or e.occurred_at > tally.last_at:
                tally.last_at = e.occurred_at

    def _proposals(self, tenant: str, targets: list[str]) -> list[Result]:
        out: list[Result] = []
        for target in dict.fromkeys(targets):
            tally = self.tallies.get((tenant, target))
            if tally is not None:
                out += self._propose(tenant, target, tally)
        return out

    def _propose(self, tenant: str, item: str, tally: _Tally) -> list[Result]:
        """One proposal per memory blamed by enough distinct failed tasks, failing more often
        than succeeding. It deletes and rewrites nothing: a reviewer decides."""
        failed = len(tally.failed)
        if (
            tally.proposed
            or failed < self.policy.proposal_failures
            or failed <= len(tally.succeeded)
        ):
            return []
        assert tally.last_at is not None  # set with the first failure
        tally.proposed = True
        tasks = sorted(tally.failed)
        shown = ", ".join(tasks[:5]) + (" …" if len(tasks) > 5 else "")
        reason = (
            f"relied on by {failed} failed tasks ({shown}) and {len(tally.succeeded)} that "
            "succeeded; proposed by the retrospective pass, changes nothing until accepted"
        )
        event = MemoryInvalidate(
            id=event_id(tenant, item, "invalidate-proposal"),
            tenant=tenant,
            stream=STREAM,
            agent=AGENT,
            occurred_at=tally.last_at,
            caused_by=sorted(set(tally.failed.values()))[: self.policy.max_caused_by],
            type="memory.invalidate",
            payload=MemoryInvalidatePayload(
                target_ids=[item], reason=reason[:2000], review_status="proposed"
            ),
        )
        return [Proposal(event)]
