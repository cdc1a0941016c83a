"""The ledger's ``raw`` header: each entry names its raw record's offset in the broker epoch,
which is how a projection tells how far into a write's position it has applied."""

from __future__ import annotations

import uuid

import orjson
import pytest
from memstream.kafka.clients import make_producer
from memstream.kafka.reading import headers_of
from memstream.kafka.topics import DLQ, LEDGER, ensure_topics
from memstream.position import RAW_HEADER, raw_header, read_raw_header
from memstream.settings import Settings
from proving import sequencer
from scratchtopics import raw_event, scratch_topic
from topicread import read_topic

EPOCH = "1764090000000000000"


def test_raw_header_round_trip() -> None:
    for epoch, offset in ((EPOCH, 0), ("", 7), (EPOCH, 2**63 - 1), ("0", 10**12)):
        value = raw_header(epoch, offset)
        assert value == f"{epoch}:{offset}".encode()
        assert read_raw_header(value) == (epoch, offset)


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"",
        b":",
        b"17",
        b"17:",
        b"x:1",
        b"17:-1",
        b"17:01",
        b"17:1\n",
        b"17:1\x00",
        b"1\x007:1",
        b"17:1:2",
        b"17:" + str(2**63).encode(),
        b"1" * 21 + b":1",
        "17:1".encode("utf-16"),
        b"\xff:1",
    ],
)
def test_a_header_that_is_not_one_reads_as_none(value: bytes | None) -> None:
    assert read_raw_header(value) is None


@pytest.mark.parametrize(("epoch", "offset"), [("x", 1), ("1:2", 1), ("1\n", 1), ("1", -1)])
def test_no_header_for_an_impossible_epoch_or_offset(epoch: str, offset: int) -> None:
    with pytest.raises(ValueError):
        raw_header(epoch, offset)


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


def ledgered(bootstrap: str, tenant: str) -> list[tuple[str, bytes | None]]:
    """(event id, raw header) of the tenant's ledger entries, in ledger order."""
    return [
        (headers_of(m)["event_id"].decode(), headers_of(m).get(RAW_HEADER))
        for m in sorted(read_topic(bootstrap, LEDGER), key=lambda m: m.offset() or 0)
        if (m.key() or b"").startswith(f"{tenant}/".encode())
    ]


@pytest.mark.parametrize("epoch", [EPOCH, ""])
def test_sequenced_entries_carry_their_raw_offset_and_epoch(topics: str, epoch: str) -> None:
    tenant = f"raw{uuid.uuid4().hex[:6]}"
    values = [
        raw_event(tenant, 0),
        raw_event(tenant, 0),  # a re-sent duplicate: no entry, so no header
        b'{"id": "\x00 not an event',  # a dead letter
        raw_event(tenant, 1),
    ]
    _, msgs = scratch_topic(topics, values)
    seq = sequencer(
        topics, make_producer(topics, **{"delivery.report.only.error": True}), epoch=epoch
    )
    seq.process(msgs)
    entries = ledgered(topics, tenant)
    assert entries == [
        (f"{tenant}-0", f"{epoch}:0".encode()),
        (f"{tenant}-1", f"{epoch}:3".encode()),
    ]
    assert [read_raw_header(h) for _, h in entries] == [(epoch, 0), (epoch, 3)]
    # The dead letter names its raw offset in its own record, not through the ledger.
    dead = [orjson.loads(m.value() or b"{}") for m in read_topic(topics, DLQ)]
    assert [d["source"]["offset"] for d in dead if d["source"]["topic"] == msgs[0].topic()] == [2]
