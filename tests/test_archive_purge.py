"""A purge tombstone in the archive: segments rewritten (crash-safe, idempotent), no text left,
the chain still verifiable, and a restore into a fresh broker that does not bring it back."""

from __future__ import annotations

import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from memstream.archive import segments
from memstream.archive.purge import (
    PURGED_IDS,
    apply_purges,
    load_purged,
    read_tombstone,
    rewrite_segment,
    save_purged,
)
from memstream.archive.segments import LOCK_FILE, read_archive
from memstream.archive.verify import verify_archive
from memstream.kafka.clients import make_producer
from memstream.kafka.topics import LEDGER, ensure_topics
from memstream.ledger.purge import is_purged, purged_form
from memstream.ledger.sequencing import Duplicate, RawRecord, Sequenced, SequencerState, sequence
from memstream.ledger.stats import count_entries
from memstream.ledger.verify import verify_entries
from memstream.settings import Settings
from memstream.stack.net import free_port
from memstream.stack.servers import start_tansu
from memstream_archiver.main import Archiver
from memstream_cli.stack.restore import restore_ledger
from prometheus_client import REGISTRY
from proving import sequencer
from topicread import read_topic

NOW = "2026-03-01T00:00:00Z"
SECRET = "Zorblax Quintavelle"  # the purged subject's text
KEPT = "Wendeline keeps her memory"  # another subject's text


def raw(eid: str, stream: str, text: str) -> bytes:
    return orjson.dumps(
        {
            "id": eid,
            "tenant": "t1",
            "stream": stream,
            "agent": "bot",
            "type": "message.user",
            "occurred_at": "2026-03-01T00:00:00Z",
            "payload": {"text": text},
        }
    )


def purge_raw(ids: list[str]) -> bytes:
    return orjson.dumps(
        {
            "id": "purge-1",
            "tenant": "t1",
            "stream": "purges",
            "agent": "api",
            "type": "memory.purge",
            "occurred_at": "2026-03-02T00:00:00Z",
            "payload": {"subject": "sha256:" + "cd" * 32, "event_ids": ids},
        }
    )


def ledger() -> list[Sequenced]:
    """Stream a: two events of the subject around one of another; then the tombstone."""
    state, out = SequencerState(), []
    docs = [
        raw("a1", "a", f"{SECRET} lives at 4 Elm"),
        raw("a2", "a", KEPT),
        raw("a3", "a", f"{SECRET} likes tea"),
        raw("b1", "b", f"{KEPT} too"),
        purge_raw(["a1", "a3"]),
    ]
    for i, value in enumerate(docs):
        o = sequence(RawRecord(value, 0, i, "memory.events.raw"), state, NOW)
        assert isinstance(o, Sequenced)
        out.append(o)
    return out


@pytest.fixture
def records(broker: str) -> list[Message]:
    """The ledger records as the archiver reads them: events on partition 0, tombstone on 1."""
    topic = f"ledger-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": broker})
    for o in ledger():
        e = o.entry
        headers = [("event_id", e["id"]), ("seq", str(e["seq"])), ("hash", e["hash"])]
        part = 1 if e["type"] == "memory.purge" else 0
        producer.produce(topic, o.value, key=o.key, partition=part, headers=headers)
    assert producer.flush(10) == 0
    msgs = sorted(read_topic(broker, topic), key=lambda m: (m.partition() or 0, m.offset() or 0))
    assert len(msgs) == 5
    return msgs


@pytest.fixture
def archiver(broker: str, tmp_path: Path) -> Iterator[Archiver]:
    a = Archiver(tmp_path / "archive", make_producer(broker))
    try:
        yield a
    finally:
        a.close()


def grep(text: str, root: Path) -> list[str]:
    """Files under ``root`` holding ``text``, as grep finds them."""
    done = subprocess.run(["grep", "-rl", text, str(root)], capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.split()


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def metric(name: str, **labels: str) -> float:
    return (
        REGISTRY.get_sample_value(name, {"component": "archiver", "store": "archive", **labels})
        or 0.0
    )


def test_tombstone_rewrites_the_segments_and_leaves_no_text(
    archiver: Archiver, records: list[Message], tmp_path: Path
) -> None:
    lines0 = metric("memstream_purge_items_removed_total", kind="lines")
    purges0 = metric("memstream_purges_applied_total")
    archiver.process(records)
    archive = tmp_path / "archive"
    assert grep(SECRET, tmp_path) == []
    assert grep(KEPT, tmp_path) != []  # the other subject's memory is intact
    by_id = {e["id"]: e for e, _ in read_archive(archive)}
    assert [i for i, e in by_id.items() if is_purged(e)] == ["a1", "a3"]
    assert by_id["a2"]["payload"] == {"text": KEPT}
    report = verify_archive(archive)
    assert report.broken is None and (report.purged, report.tombstones) == (2, 1)
    assert load_purged(archive / "t1") == {"a1": "purge-1", "a3": "purge-1"}
    assert metric("memstream_purge_items_removed_total", kind="lines") - lines0 == 2
    assert metric("memstream_purges_applied_total") - purges0 == 1
    assert metric("memstream_purge_applied_timestamp_seconds") > 0


def test_the_same_tombstone_again_or_after_a_restart_changes_nothing(
    archiver: Archiver, records: list[Message], broker: str, tmp_path: Path
) -> None:
    archiver.process(records)
    archiver.close()
    before = files(tmp_path)
    again = Archiver(tmp_path / "archive", make_producer(broker))
    again.process(records)  # a redelivery: every record is at or below the archived head
    again.process(records[-1:])
    again.close()
    assert files(tmp_path) == before


def test_an_entry_archived_after_its_tombstone_is_appended_purged(
    archiver: Archiver, records: list[Message], tmp_path: Path
) -> None:
    # The tombstone's partition (1) is archived ahead of partition 0, which holds the events.
    archiver.process([m for m in records if m.partition() == 1])
    archiver.process([m for m in records if m.partition() == 0])
    archiver.close()
    assert grep(SECRET, tmp_path) == []
    report = verify_archive(tmp_path / "archive")
    assert report.broken is None and report.purged == 2


def test_a_crash_between_recording_a_purge_and_the_rewrite_is_finished_on_start(
    archiver: Archiver, records: list[Message], broker: str, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    archiver.process(records[:-1])  # the events only
    archiver.close()
    save_purged(archive / "t1", {"a1": "purge-1", "a3": "purge-1"})
    seg = segments.segments(archive / "t1")[0]
    # A temp file of a rewrite that died before its rename, and a torn append.
    (archive / "t1" / f".{seg.name}.tmp").write_text(SECRET)
    with open(seg, "ab") as fh:
        fh.write(b'{"id":"a9","payload":{"text":"' + SECRET.encode())
    Archiver(archive, make_producer(broker)).close()
    assert grep(SECRET, tmp_path) == []
    left = sorted(p.name for p in (archive / "t1").iterdir())
    assert left == sorted([LOCK_FILE, PURGED_IDS, seg.name])


def test_rewrite_leaves_an_untouched_segment_alone(tmp_path: Path) -> None:
    seg = tmp_path / "00000001.jsonl"
    seg.write_bytes(b"".join(o.value + b"\n" for o in ledger()))
    inode = seg.stat().st_ino
    assert rewrite_segment(seg, {"zz": "purge-1"}) == 0
    assert seg.stat().st_ino == inode
    assert apply_purges(tmp_path, {"a1": "purge-1"}) == 1
    assert apply_purges(tmp_path, {"a1": "purge-1"}) == 0


def test_only_a_top_level_purge_type_is_a_tombstone() -> None:
    *events, tomb = ledger()
    found = read_tombstone(tomb.value)
    assert found is not None and (found.tenant, found.id, found.event_ids) == (
        "t1",
        "purge-1",
        ("a1", "a3"),
    )
    assert read_tombstone(events[0].value) is None
    lookalike: dict[str, Any] = {**orjson.loads(events[0].value)}
    lookalike["metadata"] = {"type": "memory.purge"}
    assert read_tombstone(orjson.dumps(lookalike)) is None


def test_a_restart_restores_the_purged_ledger_and_the_chain_continues(
    archiver: Archiver, records: list[Message], tmp_path: Path
) -> None:
    """The archive after a purge, restored into a fresh broker as ``memstream up`` does."""
    archiver.process(records)
    archiver.close()
    server = start_tansu(free_port(), tmp_path / "tansu")
    bootstrap = f"127.0.0.1:{server.port}"
    try:
        ensure_topics(bootstrap, Settings())
        assert restore_ledger(bootstrap, tmp_path / "archive") == 5
        restored = [orjson.loads(m.value()) for m in read_topic(bootstrap, LEDGER)]
        assert SECRET.encode() not in b"".join(m.value() for m in read_topic(bootstrap, LEDGER))
        by_stream = sorted(restored, key=lambda e: (e["stream"], e["seq"]))
        assert verify_entries((e, "restored") for e in by_stream) is None
        assert sum(is_purged(e) for e in restored) == 2
        seq = sequencer(bootstrap, make_producer(bootstrap))
        seq.rebuild(list(range(Settings().topic_partitions)))
        state = next(s for s in seq.states.values() if "t1/a" in s.heads)
        # A purged event re-sent (an outbox after a restart) stays out of the ledger ...
        assert isinstance(
            sequence(RawRecord(raw("a3", "a", SECRET), 0, 9, "r"), state, NOW), Duplicate
        )
        # ... and the stream continues after the purged entry, still verifiable.
        nxt = sequence(RawRecord(raw("a4", "a", "later"), 0, 10, "r"), state, NOW)
        assert isinstance(nxt, Sequenced) and nxt.entry["seq"] == 4
        assert nxt.entry["prev_hash"] == next(e["hash"] for e in restored if e["id"] == "a3")
        assert verify_entries((e, "x") for e in [*by_stream, nxt.entry]) is None
    finally:
        server.stop()


def test_ledger_stats_count_purged_entries_as_chain_positions() -> None:
    records = [(o.key.encode(), o.value) for o in ledger()]
    a3 = orjson.dumps(purged_form(orjson.loads(records[2][1]), "purge-1"))
    records[2] = (records[2][0], a3)
    chatter = orjson.dumps({"payload": {"text": '"purged":{"by":"x"}'}})
    counted = count_entries([*records, (b"t2/s", chatter), (None, b"{}")])
    assert counted == {
        "t1": {"events": 5, "streams": 3, "purged": 1},
        "t2": {"events": 1, "streams": 1, "purged": 0},
    }


def test_two_replicas_share_a_tenant_and_each_obeys_the_others_purge(
    records: list[Message], broker: str, tmp_path: Path
) -> None:
    """Replica A holds partition 0 (the events), B partition 1 (the tombstone). B's purge
    rewrites A's segment; A's next appends go to the new file, in purged form."""
    archive = tmp_path / "archive"
    a = Archiver(archive, make_producer(broker))
    b = Archiver(archive, make_producer(broker))
    events = [m for m in records if m.partition() == 0]
    a.process(events[:2])  # a1 (the secret) and a2
    b.process([m for m in records if m.partition() == 1])
    a.process(events[2:])  # a3 (named by the tombstone B saw) and b1
    a.close()
    b.close()
    assert grep(SECRET, tmp_path) == []
    entries = [e for e, _ in read_archive(archive)]
    assert sorted(e["id"] for e in entries) == ["a1", "a2", "a3", "b1", "purge-1"]
    report = verify_archive(archive)
    assert report.broken is None and (report.entries, report.purged) == (5, 2)
    names = sorted(p.name for p in (archive / "t1").glob("*.jsonl"))
    assert names == ["p000-00000001.jsonl", "p001-00000001.jsonl"]


def test_a_replica_taking_a_partition_over_skips_what_its_last_holder_archived(
    records: list[Message], broker: str, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    events = [m for m in records if m.partition() == 0]
    later = Archiver(archive, make_producer(broker))  # started while the archive was empty
    first = Archiver(archive, make_producer(broker))
    first.process(events)  # archived, then killed before its offsets were committed
    first.close()
    later.assigned([0])
    later.process(events)  # the partition's records delivered again to their new holder
    later.close()
    ids = [e["id"] for e, _ in read_archive(archive)]
    assert sorted(ids) == ["a1", "a2", "a3", "b1"]


def test_the_tenant_lock_keeps_a_second_holder_out_until_the_first_lets_go(
    tmp_path: Path,
) -> None:
    got = threading.Event()

    def second() -> None:
        with segments.tenant_lock(tmp_path / "t1"):
            got.set()

    with segments.tenant_lock(tmp_path / "t1"):
        thread = threading.Thread(target=second)
        thread.start()
        assert not got.wait(0.5)
    assert got.wait(10)
    thread.join(10)


def test_an_archive_from_before_partitions_is_read_first_and_continued_beside(
    records: list[Message], broker: str, tmp_path: Path
) -> None:
    """Segments named without a partition (one process wrote them all) keep their lines;
    what follows goes to the partition's own segments, never twice."""
    archive = tmp_path / "archive"
    events = [m for m in records if m.partition() == 0]
    (archive / "t1").mkdir(parents=True)
    (archive / "t1" / "00000001.jsonl").write_bytes(
        b"".join((m.value() or b"") + b"\n" for m in events[:2])
    )
    a = Archiver(archive, make_producer(broker))
    a.process(records)  # all of it again: the first two are skipped by their heads
    a.close()
    assert [e["id"] for e, _ in read_archive(archive)] == ["a1", "a2", "a3", "b1", "purge-1"]
    assert grep(SECRET, tmp_path) == []  # the purge rewrote the old segment too
    report = verify_archive(archive)
    assert report.broken is None and report.purged == 2
