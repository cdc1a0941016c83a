"""The outbox spool (files, torn tails) and the tracker's rule for deleting and re-sending."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from memstream.outbox import spool as spool_mod
from memstream.outbox.spool import Spool, read_lines
from memstream.outbox.tracker import Observation, Tracker, covers


def obs(seq: dict[int, int], ledger: dict[int, int], arch: dict[int, int]) -> Observation:
    return Observation(sequenced=seq, ledger_ends=ledger, archived=arch)


def test_appends_are_lines_on_disk_and_a_torn_tail_is_cut(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    seg_id, closed = spool.append([b'{"id":"a"}', b'{"id":"b"}'])
    assert closed is None
    spool.close()
    path = tmp_path / f"{seg_id:012d}.jsonl"
    with open(path, "ab") as fh:
        fh.write(b'{"id":"tor')  # a crash in the middle of a write
    (seg,) = Spool(tmp_path).existing()
    assert seg.events == 2 and list(read_lines(path)) == [b'{"id":"a"}', b'{"id":"b"}']


def test_a_segment_closes_when_old_and_the_next_append_opens_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_mod, "SEGMENT_SECONDS", 0.01)
    spool = Spool(tmp_path)
    first, _ = spool.append([b"1"])
    time.sleep(0.02)
    second, closed = spool.append([b"2"])
    assert closed is not None and closed.seg_id == first and second == first + 1


def test_covers_needs_every_partition_past_the_mark() -> None:
    assert covers({0: 5, 1: 3}, {0: 5, 1: 3})
    assert not covers({0: 5}, {0: 5, 1: 3})
    assert covers({}, {0: 0})  # nothing was written there


def test_a_segment_goes_only_once_sequenced_and_archived() -> None:
    t = Tracker()
    t.sent(1, 2)
    t.close(1)
    assert t.step(obs({}, {}, {}), t.settled()).delete == []  # reports not in yet
    t.delivered(1, 0, 10)
    t.delivered(1, 1, 4)
    settled = t.settled()
    assert t.step(obs({0: 11, 1: 4}, {0: 7}, {}), settled).delete == []  # partition 1 not yet
    assert t.step(obs({0: 11, 1: 5}, {0: 7}, {}), settled).delete == []  # ledger mark taken
    assert t.step(obs({0: 11, 1: 5}, {0: 9}, {0: 6}), settled).delete == []  # not archived
    assert t.step(obs({0: 11, 1: 5}, {0: 9}, {0: 7}), settled).delete == [1]
    assert t.segments == {}


def test_a_failed_delivery_sends_the_segment_again() -> None:
    t = Tracker()
    t.sent(3, 1)
    t.close(3)
    t.delivered(3, None, None)
    assert t.step(obs({}, {}, {}), t.settled()).resend == []  # marked first
    assert t.step(obs({}, {}, {}), t.settled()).resend == [3]
    t.sent(3, 1)
    t.delivered(3, 2, 0)
    assert t.step(obs({2: 1}, {0: 1}, {}), t.settled()).resend == []


def test_a_broker_that_lost_its_memory_gets_everything_again() -> None:
    t = Tracker()
    for seg in (1, 2):
        t.sent(seg, 1)
        t.delivered(seg, 0, seg)
    t.close(1)  # segment 2 is still open
    t.step(obs({0: 5}, {0: 9}, {}), t.settled())  # segment 1: ledger mark {0: 9}
    # the ledger now ends below the mark: a new broker, restored from the archive
    actions = t.step(obs({0: 5}, {0: 4}, {}), t.settled())
    assert actions.resend == [1] and actions.delete == []
    t.close(2)
    assert t.step(obs({}, {0: 4}, {}), t.settled()).resend == [2]


def test_segments_left_by_an_earlier_process_go_again() -> None:
    t = Tracker()
    t.recovered(7)
    assert t.step(obs({}, {}, {}), t.settled()).resend == [7]


def test_the_size_holds_while_the_tracker_deletes_a_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment listed, then deleted (archived) before its size is read, counts 0: the
    request that asked (POST /v1/events checks the spool's size) must not fail for it."""
    spool = Spool(tmp_path)
    spool.append([b'{"id":"a"}'])
    listed = list(tmp_path.glob("*.jsonl"))
    ghost = tmp_path / "000000000099.jsonl"  # listed by glob, gone by the time of stat()
    real_glob = Path.glob

    def glob(self: Path, pattern: str) -> list[Path]:
        found = list(real_glob(self, pattern))
        return [*found, ghost] if self == tmp_path else found

    real_exists = Path.exists
    monkeypatch.setattr(Path, "glob", glob)
    # It still existed when checked: the tracker deletes it between the check and the stat.
    monkeypatch.setattr(Path, "exists", lambda self: self == ghost or real_exists(self))
    assert spool.size_bytes() == sum(p.stat().st_size for p in listed) > 0
    spool.close()


def test_a_record_refused_for_good_waits_for_the_dlq_not_its_neighbours() -> None:
    t = Tracker()
    t.sent(1, 3)
    t.close(1)
    t.delivered(1, 0, 10)
    t.refused(1, "big", "Broker: Message size too large")
    t.delivered(1, 0, 11)
    assert t.undeliverable() == 1 and t.poisoned() == {1: {"big": "Broker: Message size too large"}}
    assert t.settled() == set()  # held until the DLQ has it: status is unhealthy meanwhile
    actions = t.step(obs({0: 12}, {0: 2}, {0: 2}), t.settled())
    assert actions.resend == [] and actions.delete == []  # never re-sent for it
    t.dead_lettered(1, "big")
    assert t.undeliverable() == 0 and t.skipped(1) == {"big"}
    settled = t.settled()
    assert t.step(obs({0: 12}, {0: 2}, {0: 1}), settled).delete == []  # ledger mark taken
    assert t.step(obs({0: 12}, {0: 2}, {0: 2}), settled).delete == [1]


def test_a_broker_restart_sends_a_dead_lettered_record_again_to_the_new_dlq() -> None:
    t = Tracker()
    t.sent(1, 2)
    t.close(1)
    t.delivered(1, 0, 3)
    t.refused(1, "big", "too large")
    t.dead_lettered(1, "big")
    t.broker_restarted()  # the old broker's DLQ died with it
    assert t.skipped(1) == set()
    assert t.step(obs({}, {}, {}), t.settled()).resend == [1]


def test_a_transient_failure_resends_the_segment() -> None:
    t = Tracker()
    t.sent(1, 2)
    t.close(1)
    t.delivered(1, 0, 3)
    t.delivered(1, None, None)  # a timeout: no fault of the record
    assert t.undeliverable() == 0
    t.step(obs({}, {}, {}), t.settled())
    assert t.step(obs({}, {}, {}), t.settled()).resend == [1]
