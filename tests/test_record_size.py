"""The edge's size rule: the bound an event's ledger record is held to is never below what
the sequencer really writes, sealed or clear, redacted or not, and it refuses what cannot fit.

Each case makes the ledger record the way the sequencer does (``sequence`` with the batch's
data keys) from the raw value the API or the SDK produces, and counts it as a broker does:
key, value and headers, plus framing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from memstream.events import Event, EventAdapter
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, key_ref, sequence
from memstream.ledger.size import (
    RECORD_FRAMING,
    ledger_record_bound,
    oversized,
    record_size,
    refusal,
)
from memstream.shred.sealer import EventSealer
from memstream.shred.sqlite import SqliteDataKeys

NOW = "2026-11-29T12:00:00.123456Z"


def event(i: int, **payload: Any) -> Event:
    doc: dict[str, Any] = {
        "id": f"evt-{i}",
        "tenant": "tenant-a",
        "stream": "s:1@x",
        "agent": "Zoë",
        "type": "tool.result",
        "occurred_at": datetime(2026, 11, 29, tzinfo=UTC),
        "payload": {"tool": "scraper", **payload},
    }
    return EventAdapter.validate_python(doc)


def redacting(i: int, n: int) -> Event:
    """A tool result whose every output field is redacted (one-byte values: the most growth)."""
    fields = {f"f{k}": 0 for k in range(n)}
    doc = event(i, output=fields).model_dump(mode="json")
    doc["security"] = {"redacted_paths": [f"payload.output.f{k}" for k in range(n)]}
    return EventAdapter.validate_python(doc)


def ledger_size(raw: bytes, keys: SqliteDataKeys | None) -> int:
    """What the sequencer's ledger record of ``raw`` counts (key, value, its four headers)."""
    doc = orjson.loads(raw)
    found = None
    if keys is not None and (ref := key_ref(doc)) is not None:
        found = {ref: keys.create_or_get(ref[0], "event", [ref[1]])[ref[1]]}
    out = sequence(RawRecord(raw, 3, 123_456_789, "memory.events.raw"), SequencerState(), NOW,
                   found, doc)  # fmt: skip
    assert isinstance(out, Sequenced), out
    e = out.entry
    headers = [
        ("event_id", e["id"].encode()),
        ("seq", str(e["seq"]).encode()),
        ("hash", e["hash"].encode()),
        ("raw", b"1795935423052000000:123456789"),
    ]
    header_bytes = sum(len(k) + len(v) for k, v in headers)
    return len(out.key.encode()) + len(out.value) + header_bytes


@pytest.fixture
def keys(tmp_path: Path) -> SqliteDataKeys:
    return SqliteDataKeys(tmp_path / "keys.sqlite")


CASES = [
    pytest.param(lambda: event(1, output="x"), id="tiny"),
    pytest.param(lambda: event(2, output="ü" * 50_000), id="accented"),
    pytest.param(lambda: event(3, output={"rows": [{"n": i} for i in range(5000)]}), id="rows"),
    pytest.param(lambda: event(4, output="\t\n\x1b" * 30_000), id="controls"),
    pytest.param(lambda: redacting(5, 400), id="redacted"),
]


# A producer seals only where the stack does: sealed raw, clear raw sealed by the
# sequencer (an SDK client without the key store), clear throughout (sealing off).
SEALING = [
    pytest.param(True, True, id="sealed"),
    pytest.param(False, True, id="sealed-by-the-sequencer"),
    pytest.param(False, False, id="clear"),
]


@pytest.mark.parametrize("make", CASES)
@pytest.mark.parametrize(("sealing", "stack_seals"), SEALING)
def test_the_bound_holds_whatever_the_sealing(
    make: Any, sealing: bool, stack_seals: bool, keys: SqliteDataKeys
) -> None:
    e = make()
    raw = EventSealer(keys if sealing else None).encode([e])[0]
    actual = ledger_size(raw, keys if stack_seals else None) + 40  # librdkafka's framing
    bound = ledger_record_bound(
        len(e.key.encode()), len(raw), sealed=sealing,
        redactions=len(e.security.redacted_paths),
    )  # fmt: skip
    assert actual <= bound
    # An upper bound, not a guess twice as large: the sealed form is close, the clear one
    # pays for a sealing the stack may add (base64: a third more).
    assert bound <= (actual + 1200 if sealing or stack_seals else actual * 4 // 3 + 1200)


def test_a_batch_names_each_event_that_cannot_fit_and_the_limit(keys: SqliteDataKeys) -> None:
    small, big, huge = event(1, output="a"), event(2, output="b" * 70_000), event(3, output="c")
    values = EventSealer(keys).encode([small, big, huge])
    values[2] = values[2] + b" " * 200_000  # as a larger event would be
    found = oversized([small, big, huge], values, 65_536, sealed=True)
    assert [(o.index, o.event_id) for o in found] == [(1, "evt-2"), (2, "evt-3")]
    assert all(o.bound > 65_536 for o in found)
    detail = refusal(found, 65_536, batch=True)
    assert detail.startswith("events[1] (id evt-2) would make a ledger record of up to ")
    assert "over the broker's record limit of 65536 bytes (and 1 more such event(s))" in detail
    assert oversized([small], values[:1], 65_536, sealed=True) == []


def test_record_size_counts_key_value_headers_and_framing() -> None:
    assert record_size(10, 100, 7) == RECORD_FRAMING + 117
