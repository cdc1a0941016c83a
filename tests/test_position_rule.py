"""The read-your-writes rule (pure): when a projection has applied a write's position."""

from __future__ import annotations

from memstream.outbox.tracker import Offsets
from memstream.position import Position
from memstream.projection.progress import (
    Missing,
    Progress,
    SegmentView,
    TenantRaw,
    applied,
    ledger_marks,
)

EPOCH = "1764090000000000000"
PARTS = 4


def graph(tenant_raw: TenantRaw | None = None, low: Offsets | None = None) -> Progress:
    return Progress("graph", "v1", tenant_raw or {}, low or {})


def vectors(tenant_raw: TenantRaw | None = None, low: Offsets | None = None) -> Progress:
    return Progress("vectors", "v1", tenant_raw or {}, low or {})


def reasons(missing: list[Missing]) -> list[tuple[str, str, int | None, int | None]]:
    return [(m.projection, m.reason, m.partition, m.behind) for m in missing]


def test_tenant_offset_satisfies() -> None:
    pos = Position("acme", EPOCH, {2: 41})
    done = graph(tenant_raw={(EPOCH, "acme", 2): 41})
    past = vectors(tenant_raw={(EPOCH, "acme", 2): 9_000})
    # The common path: no Kafka offsets at all.
    assert applied(pos, [done, past], {}, {}, epoch=EPOCH, partitions=PARTS) == []
    short = graph(tenant_raw={(EPOCH, "acme", 2): 40})
    assert reasons(applied(pos, [short, past], {}, {}, epoch=EPOCH, partitions=PARTS)) == [
        ("graph", "unsequenced", 2, None)
    ]


def test_another_tenant_partition_or_epoch_does_not_satisfy() -> None:
    pos = Position("acme", EPOCH, {2: 41})
    for key in ((EPOCH, "globex", 2), (EPOCH, "acme", 1), ("17", "acme", 2), (EPOCH, "Acme", 2)):
        prog = graph(tenant_raw={key: 10**9}, low={2: 10**9})
        (miss,) = applied(pos, [prog], {}, {}, epoch=EPOCH, partitions=PARTS)
        assert miss.reason == "unsequenced" and not miss.final


def test_dropped_record_falls_back_to_low_mark() -> None:
    # Raw 41 on partition 2 never reached the ledger (a duplicate): tenant progress stays below.
    pos = Position("acme", EPOCH, {2: 41})
    prog = graph(tenant_raw={(EPOCH, "acme", 2): 12}, low={2: 480})
    # The sequencer has not yet committed past it: waiting, one raw record to go.
    marks = ledger_marks(pos, {2: 41}, {2: 470}, {})
    assert marks == {}
    assert reasons(applied(pos, [prog], {2: 41}, marks, epoch=EPOCH, partitions=PARTS)) == [
        ("graph", "unsequenced", 2, 1)
    ]
    # It has: the ledger end read then is the mark, and the projection is 20 entries short.
    marks = ledger_marks(pos, {2: 42}, {2: 500}, marks)
    assert marks == {2: 500}
    assert reasons(applied(pos, [prog], {2: 42}, marks, epoch=EPOCH, partitions=PARTS)) == [
        ("graph", "behind", 2, 20)
    ]
    # The bulk load goes on: the mark stays where it was taken, so the wait ends.
    marks = ledger_marks(pos, {2: 9_000}, {2: 9_500}, marks)
    assert marks == {2: 500}
    caught_up = graph(tenant_raw={(EPOCH, "acme", 2): 12}, low={2: 500})
    assert applied(pos, [caught_up], {2: 9_000}, marks, epoch=EPOCH, partitions=PARTS) == []


def test_pending_segment_waits_for_ledger_mark() -> None:
    # One record acknowledged (partition 0), the others not when the write was answered.
    pos = Position("acme", EPOCH, {0: 5}, segment=7, unacknowledged=True)
    prog = graph(tenant_raw={(EPOCH, "acme", 0): 5}, low={0: 9, 1: 3})

    def check(view: SegmentView | None) -> list[Missing]:
        return applied(pos, [prog], {}, {}, epoch=EPOCH, partitions=PARTS, segment=view)

    (waiting,) = check(SegmentView(held=True))
    assert waiting.reason == "undelivered" and not waiting.final
    assert reasons(check(SegmentView(True, {0: 10, 1: 3, 2: 0}))) == [("graph", "behind", 0, 1)]
    assert check(SegmentView(True, {0: 9, 1: 3, 2: 0})) == []
    # This process does not hold the segment (it restarted, or another one answered).
    for view in (SegmentView(held=False), None):
        (gone,) = check(view)
        assert gone.reason == "unknown_segment" and gone.final
    # Unacknowledged with no segment (an SDK whose flush gave up): nothing to follow.
    bare = Position("acme", EPOCH, {}, unacknowledged=True)
    (gone,) = applied(bare, [prog], {}, {}, epoch=EPOCH, partitions=PARTS, segment=None)
    assert gone.reason == "unknown_segment" and gone.final


def test_old_epoch_is_stale_at_once() -> None:
    pos = Position("acme", "1700000000000000000", {1: 3})  # the SDK, before a broker restart
    prog = [graph(low={1: 10**6}), vectors(low={1: 10**6})]
    # Offsets of the new log say nothing of the old one, however far they are.
    missing = applied(pos, prog, {1: 10**6}, {1: 0}, epoch=EPOCH, partitions=PARTS)
    assert [(m.projection, m.reason, m.final) for m in missing] == [
        ("graph", "epoch_lost", True),
        ("vectors", "epoch_lost", True),
    ]


def test_old_epoch_applied_before_the_restart_stays_applied() -> None:
    old = "1700000000000000000"
    pos = Position("acme", old, {1: 3})
    kept = graph(tenant_raw={(old, "acme", 1): 3})
    fresh = vectors()  # nothing of the old epoch
    missing = applied(pos, [kept, fresh], {}, {}, epoch=EPOCH, partitions=PARTS)
    assert [(m.projection, m.reason) for m in missing] == [("vectors", "epoch_lost")]


def test_old_epoch_through_the_outbox_waits_for_its_resend() -> None:
    pos = Position("acme", "1700000000000000000", {1: 3}, segment=4)
    prog = graph(low={1: 2})
    view = SegmentView(held=True)
    (miss,) = applied(pos, [prog], {}, {}, epoch=EPOCH, partitions=PARTS, segment=view)
    assert miss.reason == "undelivered" and not miss.final
    view = SegmentView(True, {1: 2})  # re-sent and ledgered below 2 in the new log
    assert applied(pos, [prog], {}, {}, epoch=EPOCH, partitions=PARTS, segment=view) == []
    (miss,) = applied(pos, [prog], {}, {}, epoch=EPOCH, partitions=PARTS, segment=None)
    assert miss.reason == "unknown_segment" and miss.final


def test_empty_position_is_applied_at_once() -> None:
    for epoch in (EPOCH, "", "1"):
        pos = Position("acme", epoch)
        assert applied(pos, [graph(), vectors()], {}, {}, epoch=EPOCH, partitions=PARTS) == []


def test_partitions_the_projection_never_saw() -> None:
    pos = Position("acme", EPOCH, {3: 0})
    # No progress, no commit anywhere; the sequencer committed nothing (-1001) then passed it.
    (miss,) = applied(pos, [graph()], {3: -1001}, {}, epoch=EPOCH, partitions=PARTS)
    assert (miss.reason, miss.behind) == ("unsequenced", 1)
    # The record was dropped and the ledger partition is empty: nothing to apply.
    marks = ledger_marks(pos, {3: 1}, {0: 7, 3: 0}, {})
    assert applied(pos, [graph()], {3: 1}, marks, epoch=EPOCH, partitions=PARTS) == []
    # Other tenants' entries are there: the projection must pass them all.
    marks = ledger_marks(pos, {3: 1}, {3: 5}, {})
    assert reasons(applied(pos, [graph()], {3: 1}, marks, epoch=EPOCH, partitions=PARTS)) == [
        ("graph", "behind", 3, 5)
    ]


def test_offset_zero() -> None:
    pos = Position("acme", EPOCH, {0: 0})
    assert (
        applied(pos, [graph(tenant_raw={(EPOCH, "acme", 0): 0})], {}, {}, epoch=EPOCH, partitions=1)
        == []
    )
    assert ledger_marks(pos, {0: 0}, {0: 3}, {}) == {}  # committed 0: nothing consumed yet
    assert ledger_marks(pos, {0: 1}, {0: 3}, {}) == {0: 3}


def test_a_partition_the_topic_does_not_have_is_final() -> None:
    pos = Position("acme", EPOCH, {1: 2, 4: 3, 7: 3})  # written to a topic with 8 partitions
    applied_all = {(EPOCH, "acme", p): 3 for p in (1, 4, 7)}
    missing = applied(pos, [graph(applied_all)], {}, {}, epoch=EPOCH, partitions=PARTS)
    assert [(m.reason, m.partition, m.final) for m in missing] == [
        ("unknown_partition", 4, True),
        ("unknown_partition", 7, True),
    ]


def test_only_the_lagging_projection_is_named() -> None:
    pos = Position("acme", EPOCH, {0: 10, 2: 4})
    done = vectors(tenant_raw={(EPOCH, "acme", 0): 11, (EPOCH, "acme", 2): 4})
    half = graph(tenant_raw={(EPOCH, "acme", 0): 10}, low={2: 30})
    marks = ledger_marks(pos, {0: 11, 2: 5}, {0: 100, 2: 40}, {})
    missing = applied(pos, [done, half], {0: 11, 2: 5}, marks, epoch=EPOCH, partitions=PARTS)
    assert reasons(missing) == [("graph", "behind", 2, 10)]
    assert missing[0].describe() == "graph (v1, partition 2: 10 ledger entries behind)"


def test_descriptions_name_projection_version_and_why() -> None:
    behind = Missing("graph", "v3", "behind", 2, 1840)
    assert behind.describe() == "graph (v3, partition 2: 1,840 ledger entries behind)"
    assert Missing("vectors", "v1", "unsequenced", 0).describe() == (
        "vectors (v1, partition 0: raw records not yet sequenced)"
    )
    lost = Missing("vectors", "v1", "epoch_lost").describe()
    assert lost.startswith("vectors (v1: ") and "restarted" in lost
    one = Missing("graph", "v1", "unsequenced", 1, 1).describe()
    assert one == "graph (v1, partition 1: 1 raw record not yet sequenced)"
    unknown = Missing("graph", "v1", "unknown_segment").describe()
    assert "not yet delivered to Kafka" in unknown
