"""Chain verification names the first broken link and tells purged from tampered."""

from __future__ import annotations

import orjson
from memstream.ledger.purge import is_purged, purged_form
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.ledger.verify import SHREDDED_UNCOVERED, UNCOVERED, ChainWalker, verify_entries


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


def tombstone(ids: list[str], stream: str = "purges") -> dict[str, object]:
    """A ``memory.purge`` entry of tenant t, sequenced in its own stream."""
    value = orjson.dumps(
        {
            "id": "purge-1",
            "tenant": "t",
            "stream": stream,
            "agent": "api",
            "type": "memory.purge",
            "occurred_at": "2026-01-03T00:00:00Z",
            "payload": {"subject": "sha256:" + "ab" * 32, "event_ids": ids},
        }
    )
    o = sequence(RawRecord(value, 1, 0, "raw"), SequencerState(), "2026-01-03T00:00:00Z")
    assert isinstance(o, Sequenced)
    return o.entry


def purged_chain(covered: bool) -> list[dict[str, object]]:
    """Five entries, the second and third purged; a later tombstone of another stream."""
    entries = chain(5)
    entries[1] = purged_form(entries[1], "purge-1")
    entries[2] = purged_form(entries[2], "purge-1")
    return [*entries, tombstone(["e1", "e2"] if covered else ["e9"])]


def test_purged_entries_covered_by_a_later_tombstone_verify() -> None:
    entries = purged_chain(covered=True)
    assert "payload" not in entries[1] and is_purged(entries[1])
    walker = ChainWalker()
    assert all(walker.check(e, "x") is None for e in entries)
    assert walker.finish() is None
    assert (walker.purged, len(walker.tombstones), walker.entries) == (2, 1, 6)


def test_purged_entry_without_a_tombstone_is_broken() -> None:
    broken = verify_entries((e, f"line {i}") for i, e in enumerate(purged_chain(covered=False)))
    assert broken is not None
    assert (broken.seq, broken.where, broken.reason) == (2, "line 1", UNCOVERED)


def test_purged_entry_with_an_altered_hash_breaks_the_next_link() -> None:
    entries = purged_chain(covered=True)
    entries[2]["hash"] = "f" * 64
    broken = verify_entries((e, "x") for e in entries)
    assert broken is not None and broken.seq == 4 and "prev_hash" in broken.reason


def test_purged_form_does_not_hide_tampering_of_a_kept_entry() -> None:
    entries = purged_chain(covered=True)
    entries[3]["payload"] = {"text": "rewritten history"}
    broken = verify_entries((e, "x") for e in entries)
    assert broken is not None and broken.seq == 4 and "content" in broken.reason


def test_an_altered_tombstone_covers_nothing() -> None:
    entries = purged_chain(covered=True)
    walker = ChainWalker()
    for e in entries[:-1]:
        assert walker.check(e, "x") is None
    forged = dict(entries[-1], payload={"subject": "sha256:x", "event_ids": ["e1", "e2", "e3"]})
    walker.note_tombstone(forged)  # as a walk filtered to another stream would see it
    broken = walker.finish()
    assert broken is not None and broken.reason == UNCOVERED and broken.seq == 2


def sealed_chain(n: int, keys: dict[tuple[str, str], bytes]) -> list[dict[str, object]]:
    """``n`` observations of tenant t, sealed by the sequencer under ``keys``."""
    state, out = SequencerState(), []
    for i in range(n):
        keys[("t", f"e{i}")] = bytes([i + 1]) * 32
        value = orjson.dumps(
            {
                "id": f"e{i}",
                "tenant": "t",
                "stream": "s",
                "agent": "a",
                "type": "observation",
                "occurred_at": "2026-01-01T00:00:00Z",
                "payload": {"text": f"Zoë Ångström-Nakamura said {i}"},
            }
        )
        o = sequence(RawRecord(value, 0, i, "raw"), state, "2026-01-02T00:00:00Z", keys)
        assert isinstance(o, Sequenced)
        assert "payload" not in o.entry and b"Nakamura" not in o.value
        out.append(o.entry)
    return out


def test_a_sealed_chain_verifies_without_any_key() -> None:
    entries = sealed_chain(4, {})
    assert verify_entries((e, "x") for e in entries) is None


def test_a_shredded_entry_needs_a_tombstone() -> None:
    keys: dict[tuple[str, str], bytes] = {}
    entries = sealed_chain(3, keys)
    del keys[("t", "e1")]

    def gone(tenant: str, event_id: str) -> bool:
        return (tenant, event_id) not in keys

    broken = verify_entries(((e, "x") for e in entries), key_gone=gone)
    assert broken is not None and broken.seq == 2 and broken.reason == SHREDDED_UNCOVERED
    walker = ChainWalker(key_gone=gone)
    for e in [*entries, tombstone(["e1"])]:
        assert walker.check(e, "x") is None
    assert walker.finish() is None and walker.purged == 1


def test_a_sealed_entry_altered_is_tampered_not_purged() -> None:
    keys: dict[tuple[str, str], bytes] = {}
    entries = sealed_chain(3, keys)
    sealed = dict(entries[1]["sealed"])  # type: ignore[call-overload]
    sealed["c"] = sealed["c"][:-4] + "AAAA"
    entries[1]["sealed"] = sealed
    broken = verify_entries(((e, "x") for e in entries), key_gone=lambda t, i: False)
    assert broken is not None and broken.seq == 2 and "hash" in broken.reason
