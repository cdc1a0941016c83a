"""Has a projection applied a write? The rule (pure: the shell brings progress and offsets).

A projection publishes two facts (:class:`Progress`):
- per (epoch, tenant, raw partition), the highest raw offset among the tenant's ledger
  entries it has applied (the sequencer writes ledger partition p from raw partition p, each
  tenant's records in raw order, and a projection applies each tenant's entries of a ledger
  partition in ledger order: the tenant-fair loops interleave tenants, never reorder one, so
  a tenant's entries reach a projection in the order of their raw offsets);
- per ledger partition, its committed offset, the loop's low-water mark: everything below it
  is applied (entries above it may be applied too).

A write's position (``memstream.position``) is applied by a projection when, for each raw
partition p and offset o it names:
1. the projection applied an entry of that tenant from p at or past o; or else
2. the record never reached the ledger (a duplicate, a dead letter, shredded, too large) or
   the tenant's later entries are not there yet: once the sequencer has committed past o
   (it commits only after its ledger writes), the ledger's end offset of p read then is a
   mark below which the record's entry is, if it has one; the projection's committed offset
   at or past that mark proves it applied.
3. Records unacknowledged when the write was answered have no offsets: the outbox segment
   they were spooled to gives the mark once they are ledgered (the outbox tracker's
   ``ledger_mark``). Without that segment in this process there is nothing to wait for.
4. A position from another broker epoch names offsets of a log that is gone. What a
   projection applied before the restart stays applied (rule 1 under the old epoch); the
   rest survives only through the outbox (re-sent whole), whose mark then stands for it;
   without an outbox it may be lost, and waiting cannot tell.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from memstream.events.envelope import TENANT_PATTERN
from memstream.outbox.tracker import Offsets, covers
from memstream.position import Position, read_raw_header

RawKey = tuple[str, str, int]  # (epoch, tenant, raw partition)
TenantRaw = Mapping[RawKey, int]  # -> the highest raw offset applied
_TENANT_RE = re.compile(TENANT_PATTERN.strip("^$"))

Reason = Literal[
    "unsequenced",  # the sequencer has not yet committed past the record
    "behind",  # the projection has not yet committed past the ledger mark
    "undelivered",  # the outbox has not yet seen the records ledgered
    "unknown_segment",  # unacknowledged when answered, and this process holds no segment
    "epoch_lost",  # written to a broker that restarted since, and not kept in an outbox
    "unknown_partition",  # a partition the raw topic does not have
]
# Reasons waiting cannot cure: the read answers at once with a stale warning.
FINAL: frozenset[Reason] = frozenset({"unknown_segment", "epoch_lost", "unknown_partition"})


@dataclass(frozen=True)
class Progress:
    """What one projection (one version of it) has applied."""

    projection: str  # "graph", "vectors"
    version: str
    tenant_raw: TenantRaw = field(default_factory=dict)
    low: Offsets = field(default_factory=dict)  # ledger partition -> committed offset


@dataclass(frozen=True)
class SegmentView:
    """What this process's outbox knows of a position's segment (filled by the shell).

    ``held``: the outbox holds the segment, or held it and saw it archived. False after a
    restart, or when another process answered the write. ``ledger_mark``: ledger end offsets
    below which every record of the segment is, once known. In the same epoch: the tracker's
    ``ledger_mark`` of the segment, or the ledger's end read once the segment was archived.
    After a broker restart (rule 4): the ledger's end read once the outbox held no segment up
    to the position's (all re-sent, sequenced and archived).
    """

    held: bool
    ledger_mark: Offsets | None = None


@dataclass(frozen=True)
class Missing:
    """Why a projection has not (or cannot have) applied part of a position.

    ``behind``: raw records still to sequence ("unsequenced") or ledger entries still to apply
    ("behind") on ``partition``; None when not known."""

    projection: str
    version: str
    reason: Reason
    partition: int | None = None
    behind: int | None = None

    @property
    def final(self) -> bool:
        """Waiting cannot cure it."""
        return self.reason in FINAL

    def describe(self) -> str:
        """One clause of a stale warning, e.g. ``graph (v1, partition 2: 1,840 ledger
        entries behind)``."""
        where = (
            self.version
            if self.partition is None
            else f"{self.version}, partition {self.partition}"
        )
        return f"{self.projection} ({where}: {_why(self.reason, self.behind)})"


def _why(reason: Reason, n: int | None) -> str:
    if reason == "unsequenced":
        return _count(n, "raw record", "raw records") + " not yet sequenced"
    if reason == "behind":
        return _count(n, "ledger entry", "ledger entries") + " behind"
    return {
        "undelivered": "not yet delivered to the ledger",
        "unknown_segment": "the write was not yet delivered to Kafka when it was answered",
        "epoch_lost": "written to a broker that restarted since; the write may be lost",
        "unknown_partition": "the position names a partition the topic does not have",
    }[reason]


def _count(n: int | None, one: str, many: str) -> str:
    return many if n is None else f"{n:,} {one if n == 1 else many}"


def applied_in(entries: Iterable[tuple[object, bytes | None, int]]) -> dict[RawKey, int]:
    """What a batch applied: per (epoch, tenant, raw partition), the highest raw offset among
    ``entries`` = ``(tenant, raw header, partition)`` of the ledger entries a projection wrote
    (the sequencer writes ledger partition p from raw partition p).

    An entry without a ``raw`` header (restored from the archive: it names no offset of this
    log), with a header that is not one (a NUL, anything else) or with a tenant that is not a
    tenant id advances nothing: a ledger record is data, reading it never raises.
    """
    out: dict[RawKey, int] = {}
    for tenant, header, partition in entries:
        raw = read_raw_header(header)
        if raw is None or not isinstance(tenant, str) or not _TENANT_RE.fullmatch(tenant):
            continue
        key = (raw[0], tenant, partition)
        if raw[1] > out.get(key, -1):
            out[key] = raw[1]
    return out


def ledger_marks(
    position: Position, sequencer_committed: Offsets, ledger_end: Offsets, held: Offsets
) -> dict[int, int]:
    """Rule 2's marks: per partition of ``position``, the ledger end offset the first time the
    sequencer had committed past the position's offset there, then kept (``held``) while the
    ledger grows under the reader. ``ledger_end`` must be read after
    ``sequencer_committed``, so that it counts every entry written before that commit."""
    marks = dict(held)
    for p, o in position.raw.items():
        if p not in marks and p in ledger_end and covers(sequencer_committed, {p: o + 1}):
            marks[p] = ledger_end[p]
    return marks


def applied(
    position: Position,
    progress: Sequence[Progress],
    sequencer_committed: Offsets,
    ledger_end: Offsets,
    *,
    epoch: str,
    partitions: int,
    segment: SegmentView | None = None,
) -> list[Missing]:
    """What of ``position`` the projections in ``progress`` have not applied: [] when all did.

    ``ledger_end`` are the marks of :func:`ledger_marks`; ``epoch`` is the current broker
    epoch; ``partitions`` the raw topic's partition count; ``segment`` what this process's
    outbox knows of ``position.segment`` (None: no outbox, or none named).
    """
    if position.epoch != epoch:
        return _old_epoch_missing(position, progress, segment)
    missing = [
        m
        for prog in progress
        for p, o in sorted(position.raw.items())
        if (m := _raw_missing(prog, position, p, o, sequencer_committed, ledger_end, partitions))
    ]
    if position.unacknowledged:  # rule 3
        missing += _outbox_missing(progress, segment if position.segment is not None else None)
    return missing


def _old_epoch_missing(
    position: Position, progress: Sequence[Progress], segment: SegmentView | None
) -> list[Missing]:
    """Rule 4. A projection that applied the records before the broker restarted keeps them
    (its store outlives the broker): rule 1 still holds under the position's epoch. Other
    records survive only through the outbox."""
    lagging = [
        prog
        for prog in progress
        if position.unacknowledged
        or not all(_tenant_applied(prog, position, p, o) for p, o in position.raw.items())
    ]
    if not lagging:
        return []
    if position.segment is None:
        return [Missing(p.projection, p.version, "epoch_lost") for p in lagging]
    return _outbox_missing(lagging, segment)


def _tenant_applied(prog: Progress, position: Position, p: int, o: int) -> bool:
    """Rule 1: the projection applied an entry of the tenant from raw partition ``p`` at or
    past ``o`` (entries of one tenant reach it in raw order within a partition)."""
    return prog.tenant_raw.get((position.epoch, position.tenant, p), -1) >= o


def _raw_missing(
    prog: Progress,
    position: Position,
    p: int,
    o: int,
    sequenced: Offsets,
    marks: Offsets,
    partitions: int,
) -> Missing | None:
    """Rules 1 and 2 for one projection and one partition."""
    if p >= partitions:
        return Missing(prog.projection, prog.version, "unknown_partition", p)
    if _tenant_applied(prog, position, p, o):
        return None
    if not covers(sequenced, {p: o + 1}):
        done = sequenced.get(p)
        behind = o + 1 - max(done, 0) if done is not None else None
        return Missing(prog.projection, prog.version, "unsequenced", p, behind)
    mark = marks.get(p)
    if mark is not None and covers(prog.low, {p: mark}):
        return None
    behind = mark - max(prog.low.get(p, 0), 0) if mark is not None else None
    return Missing(prog.projection, prog.version, "behind", p, behind)


def _outbox_missing(progress: Sequence[Progress], segment: SegmentView | None) -> list[Missing]:
    """Rules 3 and 4: records known only by their outbox segment."""
    if segment is None or not segment.held:
        return [Missing(p.projection, p.version, "unknown_segment") for p in progress]
    if segment.ledger_mark is None:
        return [Missing(p.projection, p.version, "undelivered") for p in progress]
    mark = segment.ledger_mark
    return [
        Missing(prog.projection, prog.version, "behind", p, end - max(prog.low.get(p, 0), 0))
        for prog in progress
        for p, end in sorted(mark.items())
        if not covers(prog.low, {p: end})
    ]
