"""The outbox answers reads given after= a position naming one of its segments: the ledger
mark while it holds the segment, the mark it had when archived afterwards, and nothing once
the broker restarted (those marks name the old broker's ledger)."""

from __future__ import annotations

from pathlib import Path

from memstream.intake.outbox import Outbox
from memstream.intake.producer import BatchProducer


def test_segment_marks_survive_archiving_not_a_broker_restart(broker: str, tmp_path: Path) -> None:
    producer = BatchProducer(broker)
    try:
        outbox = Outbox(tmp_path / "outbox", broker, producer, 1 << 20)
        outbox.tracker.state(3)  # spooled, not yet ledgered
        assert outbox.segment_mark(3) == (True, None)
        outbox.tracker.state(3).ledger_mark = {0: 12, 2: 40}
        assert outbox.segment_mark(3) == (True, {0: 12, 2: 40})
        del outbox.tracker.segments[3]
        outbox._archived(3, {0: 12, 2: 40})  # what tick() keeps of a segment it deletes
        assert outbox.segment_mark(3) == (True, {0: 12, 2: 40})
        assert outbox.segment_mark(4) == (False, None)  # never spooled here
        outbox.broker_restarted()
        assert outbox.segment_mark(3) == (False, None)
        outbox.spool.close()
    finally:
        producer.close()
