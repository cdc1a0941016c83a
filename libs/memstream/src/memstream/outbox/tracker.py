"""When an outbox segment may go: the pure rule (no I/O; the shell brings the offsets).

A closed segment is deleted only when every event in it is archived, proved by offsets:

1. every event of the segment was acknowledged by the broker; the delivery reports give
   each one's offset, so ``raw_mark`` is exact (one past the highest per partition);
2. the sequencer group has committed past ``raw_mark``: it commits only after the ledger
   write, so the events are ledgered (or dropped as duplicates); the ledger's end offsets
   read afterwards are ``ledger_mark``;
3. the archiver group has committed past ``ledger_mark``: it commits only after fsync.

A broker that lost its memory (restarted, or ledger end offsets below a recorded mark) voids
every mark: each segment is re-sent whole. Re-sending is safe because the sequencer drops event
ids it has ledgered already.

A record the broker refuses for good (its own fault: too large, say) is poison: it leaves its
segment for the dead-letter queue, and the segment goes on without it once the dead letter is
acknowledged. Its neighbours are never held or re-sent for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Offsets = Mapping[int, int]  # partition -> offset


@dataclass(frozen=True)
class Observation:
    """The sequencer's and archiver's committed offsets and the ledger's end offsets."""

    sequenced: Offsets
    ledger_ends: Offsets
    archived: Offsets


@dataclass
class SegmentState:
    seg_id: int
    closed: bool = False
    outstanding: int = 0  # produced, delivery report not yet in
    failed: bool = False  # a delivery report said no
    resend: bool = False
    raw_mark: dict[int, int] = field(default_factory=dict)  # one past each acked offset
    ledger_mark: Offsets | None = None
    poison: dict[str, str] = field(default_factory=dict)  # event id -> reason, not in the DLQ yet
    dead: set[str] = field(default_factory=set)  # event ids the DLQ acknowledged


@dataclass(frozen=True)
class Actions:
    """What the shell must do after a step."""

    resend: list[int] = field(default_factory=list)
    delete: list[int] = field(default_factory=list)


def covers(committed: Offsets, mark: Offsets) -> bool:
    """Has a group consumed everything below ``mark`` (committed = next offset to read)?"""
    return all(end <= 0 or committed.get(p, -1) >= end for p, end in mark.items())


def lost_memory(obs: Observation, states: list[SegmentState]) -> bool:
    """Ledger end offsets below a recorded mark: the broker restarted (or was restored)."""
    for s in states:
        mark = s.ledger_mark
        if mark is not None and any(obs.ledger_ends.get(p, 0) < end for p, end in mark.items()):
            return True
    return False


@dataclass
class Tracker:
    """Delivery and archive progress of every outbox segment."""

    segments: dict[int, SegmentState] = field(default_factory=dict)

    def state(self, seg_id: int) -> SegmentState:
        return self.segments.setdefault(seg_id, SegmentState(seg_id))

    def sent(self, seg_id: int, n: int) -> None:
        self.state(seg_id).outstanding += n

    def delivered(self, seg_id: int, partition: int | None, offset: int | None) -> None:
        """A delivery report: ``offset`` None means the broker did not take the event."""
        s = self.state(seg_id)
        s.outstanding -= 1
        if partition is None or offset is None or offset < 0:
            s.failed = True
        else:
            s.raw_mark[partition] = max(s.raw_mark.get(partition, 0), offset + 1)

    def refused(self, seg_id: int, event_id: str, reason: str) -> None:
        """A delivery report of a record refused for good: it waits for the DLQ."""
        s = self.state(seg_id)
        s.outstanding -= 1
        s.poison[event_id] = reason

    def dead_lettered(self, seg_id: int, event_id: str) -> None:
        """The DLQ acknowledged the dead letter of a poison record."""
        s = self.segments.get(seg_id)
        if s is not None and s.poison.pop(event_id, None) is not None:
            s.dead.add(event_id)

    def poisoned(self) -> dict[int, dict[str, str]]:
        """Per segment, the records refused for good whose dead letter is not acknowledged."""
        return {i: dict(s.poison) for i, s in self.segments.items() if s.poison}

    def undeliverable(self) -> int:
        """Accepted events refused for good and not yet in the DLQ."""
        return sum(len(s.poison) for s in self.segments.values())

    def skipped(self, seg_id: int) -> set[str]:
        """The ids a re-send of the segment leaves out: they go (or went) to the DLQ."""
        s = self.segments.get(seg_id)
        return set() if s is None else s.dead | set(s.poison)

    def close(self, seg_id: int) -> None:
        self.state(seg_id).closed = True

    def recovered(self, seg_id: int) -> None:
        """A segment found on disk at start: nothing is known of it, so it goes again."""
        s = self.state(seg_id)
        s.closed, s.resend = True, True

    def broker_restarted(self) -> None:
        """Every segment goes again, the open one too (once closed): what the old broker
        acknowledged may never have reached the sequencer."""
        for s in self.segments.values():
            s.resend = True
            s.raw_mark, s.ledger_mark = {}, None
            s.dead.clear()  # the DLQ of the old broker is gone too: they go to the new one

    def settled(self) -> set[int]:
        """Closed segments with every delivery report in: the ones a step may mark."""
        return {
            i for i, s in self.segments.items() if s.closed and s.outstanding == 0 and not s.poison
        }

    def step(self, obs: Observation, settled: set[int]) -> Actions:
        """Advance each segment one stage. ``settled`` = :meth:`settled` read *before*
        ``obs`` was fetched, so a ledger mark is never older than what it must cover."""
        if lost_memory(obs, list(self.segments.values())):
            self.broker_restarted()
        resend: list[int] = []
        delete: list[int] = []
        for s in sorted(self.segments.values(), key=lambda s: s.seg_id):
            if s.resend and s.closed and s.outstanding == 0:
                s.resend, s.failed, s.raw_mark, s.ledger_mark = False, False, {}, None
                resend.append(s.seg_id)
            elif s.seg_id not in settled or s.outstanding or s.resend or s.poison:
                continue
            elif s.failed:
                s.resend = True
            elif s.ledger_mark is None:
                if covers(obs.sequenced, s.raw_mark):
                    s.ledger_mark = dict(obs.ledger_ends)
            elif covers(obs.archived, s.ledger_mark):
                delete.append(s.seg_id)
        for i in delete:
            del self.segments[i]
        return Actions(resend, delete)
