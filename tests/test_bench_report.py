"""README result tables are rendered from bench JSON and replace only their own block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memstream_cli.bench.report import blocks_from, learn_table, load_table, update_readme

MACHINE = {"cpus": 2, "date": "2031-01-02"}


def load_doc(events: int, p50: float) -> dict[str, object]:
    return {
        "events": events,
        "broker_produce_events_per_s": 100_000,
        "ingest_events_per_s": 2_500,
        "freshness_p50_ms": 300.0,
        "freshness_p95_ms": 700.0,
        "freshness_probes": 20,
        "steady_events_per_s": 500,
        "freshness_burst_p95_ms": 4_000.0,
        "checkout_p50_ms": p50,
        "checkout_p95_ms": p50 * 2,
        "peak_rss_mb": {"api": 512.0, "sequencer": 90.0},
        "machine": MACHINE,
    }


def test_load_rows_are_ordered_by_size_and_carry_the_figures() -> None:
    table = load_table([load_doc(100_000, 30.0), load_doc(10_000, 12.5)])
    rows = [r for r in table.splitlines() if r.startswith("| 1")]
    assert rows[0].startswith("| 10,000 |") and rows[1].startswith("| 100,000 |")
    assert "12.5 / 25.0 ms" in rows[0] and "300 / 700 ms (20 probes)" in rows[0]
    assert "_Measured 2031-01-02 on a 2-core machine._" in table


def test_update_replaces_only_the_marked_block() -> None:
    text = "intro\n<!-- bench:load -->\nold table\n<!-- /bench:load -->\noutro\n"
    out = update_readme(text, {"load": "new table"})
    assert out == "intro\n<!-- bench:load -->\nnew table\n<!-- /bench:load -->\noutro\n"
    assert update_readme(out, {"load": "new table"}) == out
    with pytest.raises(ValueError, match="bench:locomo"):
        update_readme(text, {"locomo": "x"})


def test_blocks_come_from_the_files_present(tmp_path: Path) -> None:
    assert blocks_from(tmp_path) == {}
    (tmp_path / "load-10000.json").write_text(json.dumps(load_doc(10_000, 9.0)))
    blocks = blocks_from(tmp_path)
    assert list(blocks) == ["load"] and "| 10,000 |" in blocks["load"]


def test_learn_table_shows_each_round_and_the_praise_burst() -> None:
    snap = {"right_on_top": 0.5, "praised_on_top": 0.0, "praised_shown_per_packet": 1.5}
    doc = {
        "families": 4,
        "memories_per_family": [2, 3, 2, 3],
        "chance": 0.417,
        "seed": 9,
        "outcomes_reported": 8,
        "per_round": [
            {"round": 1, "learning_off": 0.5, "learning_on": 0.5},
            {"round": 2, "learning_off": 0.5, "learning_on": 1.0},
        ],
        "adversarial_praise": {
            "events_per_arm": 1200,
            "targets": 6,
            "before": {"off": snap, "on": {**snap, "right_on_top": 1.0}},
            "after": {"off": {**snap, "praised_on_top": 0.25}, "on": {**snap, "right_on_top": 1.0}},
        },
    }
    table = learn_table(doc)
    assert "| 2 | 0.50 | 1.00 |" in table
    assert "| after 1,200 praise events | 0.50 | 1.00 |" in table
    assert "on top in 0.25 (off) and 0.00 (on)" in table and "2–3 competing" in table
