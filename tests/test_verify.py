"""Chain verification names the first broken link."""

from __future__ import annotations

import orjson
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.ledger.verify import verify_entries


def chain(n: int) -> list[dict[str, object]]:
    state, out = SequencerState(), []
    for i in range(n):
        value = orjson.dumps(
            {
                "id": f"e{i}",
                "tenant": "t",
                "stream": "s",
                "agent": "a",
                "type": "observation",
                "occurred_at": "2026-01-01T00:00:00Z",
                "payload": {"text": f"obs {i}"},
            }
        )
        o = sequence(RawRecord(value, 0, i, "raw"), state, "2026-01-02T00:00:00Z")
        assert isinstance(o, Sequenced)
        out.append(o.entry)
    return out


def test_intact_chain_verifies() -> None:
    assert verify_entries((e, f"line {i}") for i, e in enumerate(chain(5))) is None


def test_tampered_content_is_named() -> None:
    entries = chain(5)
    entries[2]["payload"] = {"text": "rewritten history"}
    broken = verify_entries((e, f"line {i}") for i, e in enumerate(entries))
    assert broken is not None
    assert (broken.seq, broken.where) == (3, "line 2")
    assert "hash" in broken.reason


def test_removed_entry_is_a_gap() -> None:
    entries = chain(4)
    del entries[1]
    broken = verify_entries((e, "x") for e in entries)
    assert broken is not None and broken.seq == 3 and "gap" in broken.reason


def test_relinked_entry_breaks_prev_hash() -> None:
    entries = chain(3)
    entries[2]["prev_hash"] = "f" * 64
    broken = verify_entries((e, "x") for e in entries)
    assert broken is not None and broken.seq == 3 and "prev_hash" in broken.reason
