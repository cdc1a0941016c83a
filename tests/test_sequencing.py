"""The pure sequencing handler: gapless seq, dedupe, dead letters, redaction, chaining."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
from memstream.ledger.canonical import GENESIS_HASH, entry_hash
from memstream.ledger.redact import REDACTED
from memstream.ledger.sequencing import (
    DeadLetter,
    Duplicate,
    RawRecord,
    Sequenced,
    SequencerState,
    sequence,
)
from memstream.ledger.verify import verify_entries
from memstream.times import iso_utc

NOW = iso_utc(datetime(2026, 5, 1, 12, 0, tzinfo=UTC))


def event(i: int, stream: str = "s1", **extra: object) -> bytes:
    doc = {
        "id": f"e{i}",
        "tenant": "acme",
        "stream": stream,
        "agent": "bot",
        "type": "message.user",
        "occurred_at": "2026-05-01T10:00:00Z",
        "payload": {"text": f"message {i}"},
    }
    doc.update(extra)
    return orjson.dumps(doc)


def rec(value: bytes | None, offset: int = 0) -> RawRecord:
    return RawRecord(value, 0, offset, "memory.events.raw")


def test_streams_get_gapless_chained_seqs() -> None:
    state = SequencerState()
    outs = [sequence(rec(event(i, f"s{i % 2}")), state, NOW) for i in range(6)]
    entries = [o.entry for o in outs if isinstance(o, Sequenced)]
    assert [e["seq"] for e in entries if e["stream"] == "s0"] == [1, 2, 3]
    assert [e["seq"] for e in entries if e["stream"] == "s1"] == [1, 2, 3]
    first = entries[0]
    assert first["prev_hash"] == GENESIS_HASH
    assert entries[2]["prev_hash"] == first["hash"]
    assert verify_entries((e, "mem") for e in entries) is None
    written = [orjson.loads(o.value) for o in outs if isinstance(o, Sequenced)]
    assert written == entries  # the encoded form is the entry itself


def test_resent_id_is_a_duplicate_and_changes_nothing() -> None:
    state = SequencerState()
    first = sequence(rec(event(1)), state, NOW)
    head_before = (state.heads["acme/s1"].seq, state.heads["acme/s1"].hash)
    again = sequence(rec(event(1), offset=9), state, NOW)
    assert isinstance(first, Sequenced)
    assert again == Duplicate("acme/s1", "e1")
    assert (state.heads["acme/s1"].seq, state.heads["acme/s1"].hash) == head_before


def test_garbage_and_wrong_shapes_are_dead_letters_with_reasons() -> None:
    state = SequencerState()
    garbage = sequence(rec(b"\x00\xffnot json"), state, NOW)
    wrong = sequence(rec(orjson.dumps({"hello": "world"})), state, NOW)
    bad_type = sequence(rec(event(1, type="message.shout")), state, NOW)
    empty = sequence(rec(None), state, NOW)
    for out in (garbage, wrong, bad_type, empty):
        assert isinstance(out, DeadLetter)
    assert isinstance(wrong, DeadLetter) and "id" in wrong.reason
    assert isinstance(bad_type, DeadLetter) and "type" in bad_type.reason
    assert state.heads == {}


def test_redacted_paths_never_reach_the_hash_or_the_entry() -> None:
    secret = event(
        1,
        type="tool.call",
        payload={"tool": "login", "arguments": {"password": "hunter2"}},
        security={"sensitivity": "secret", "redacted_paths": ["payload.arguments.password"]},
    )
    out = sequence(rec(secret), SequencerState(), NOW)
    assert isinstance(out, Sequenced)
    assert out.entry["payload"]["arguments"]["password"] == REDACTED
    assert b"hunter2" not in orjson.dumps(out.entry)
    assert entry_hash(out.entry) == out.entry["hash"]


def test_state_rebuilt_from_ledger_continues_the_chain() -> None:
    live = SequencerState()
    entries = []
    for i in range(3):
        out = sequence(rec(event(i)), live, NOW)
        assert isinstance(out, Sequenced)
        entries.append(out.entry)
    rebuilt = SequencerState()
    for e in entries:
        rebuilt.observe("acme/s1", e["id"], e["seq"], e["hash"])
    assert isinstance(sequence(rec(event(1)), rebuilt, NOW), Duplicate)
    nxt = sequence(rec(event(3)), rebuilt, NOW)
    assert isinstance(nxt, Sequenced)
    assert nxt.entry["seq"] == 4 and nxt.entry["prev_hash"] == entries[-1]["hash"]
