"""Archive planning (idempotent by seq) and segment files (torn tails, rolling)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from memstream.archive import segments
from memstream.archive.plan import Append, Poison, Skip, plan_record
from memstream.archive.segments import TenantWriter, archive_heads, read_archive


def entry(stream: str, seq: int) -> bytes:
    return orjson.dumps({"tenant": "t1", "stream": stream, "seq": seq, "id": f"{stream}-{seq}"})


def test_plan_appends_new_and_skips_known_seqs() -> None:
    heads: dict[str, int] = {"t1/a": 2}
    assert isinstance(plan_record(entry("a", 2), heads), Skip)
    out = plan_record(entry("a", 3), heads)
    assert isinstance(out, Append) and out.line.endswith(b"\n") and heads["t1/a"] == 3
    assert isinstance(plan_record(entry("a", 3), heads), Skip)
    assert isinstance(plan_record(entry("b", 1), heads), Append)


def test_plan_from_key_and_seq_header_matches_parsing() -> None:
    by_header: dict[str, int] = {}
    by_body: dict[str, int] = {}
    for seq in (1, 2, 2, 3):
        a = plan_record(entry("a", seq), by_header, "t1/a", seq)
        b = plan_record(entry("a", seq), by_body)
        assert type(a) is type(b)
    assert by_header == by_body == {"t1/a": 3}


def test_plan_poison() -> None:
    assert isinstance(plan_record(b"{nope", {}), Poison)
    assert isinstance(plan_record(orjson.dumps({"tenant": "t"}), {}), Poison)
    assert isinstance(plan_record(None, {}), Poison)


def test_writer_truncates_torn_tail_and_heads_are_read_back(tmp_path: Path) -> None:
    w = TenantWriter(tmp_path / "t1")
    w.open()
    for s in (1, 2):
        w.append(entry("a", s) + b"\n")
    w.close()
    seg = next((tmp_path / "t1").glob("*.jsonl"))
    with open(seg, "ab") as fh:
        fh.write(b'{"tenant": "t1", "stream": "a", "se')  # crash mid-line
    assert archive_heads(tmp_path) == {"t1/a": 2}
    w2 = TenantWriter(tmp_path / "t1")
    w2.open()
    w2.append(entry("a", 3) + b"\n")
    w2.close()
    assert [e["seq"] for e, _ in read_archive(tmp_path)] == [1, 2, 3]


def test_segments_roll(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segments, "SEGMENT_BYTES", 100)
    w = TenantWriter(tmp_path / "t1")
    w.open()
    for s in range(1, 11):
        w.append(entry("a", s) + b"\n")
    w.close()
    assert len(list((tmp_path / "t1").glob("*.jsonl"))) > 1
    assert [e["seq"] for e, _ in read_archive(tmp_path)] == list(range(1, 11))
