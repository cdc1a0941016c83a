"""``memstream bench read-after`` on a real throw-away stack, at a small size: the row's shape,
and that a checkout given the write's position cites tenant B's marker in its first answer
while tenant A's bulk is in the pipeline."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from memstream_bench import cli as bench_cmd
from memstream_bench.report import blocks_from
from memstream_cli.main import app
from memstream_cli.progress import Report
from stackproc import BIN, LLM_ENV
from typer.testing import CliRunner

BOUND_S = 60  # generous for a loaded machine; the bench reports the bound it ran with


def test_read_after_row_cites_the_marker_with_after(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env |= {"TMPDIR": str(tmp_path), "MEMSTREAM_READ_AFTER_MAX_WAIT_S": str(BOUND_S)}
    res = subprocess.run(
        [str(BIN / "memstream"), "bench", "read-after", "--bulk", "500", "--probes", "2", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["bulk_events"] == 500 and doc["probes"] == 2
    assert doc["read_after_max_wait_s"] == BOUND_S
    assert doc["bulk_emit_events_per_s"] > 0 and doc["bulk_ingest_events_per_s"] > 0
    assert doc["bulk_visible_s"] > 0
    arm_keys = {
        "probes", "cited_first_answer", "stale", "missed_silently", "during_backlog",
        "waited_ms_median", "waited_ms_max", "checkout_ms_median",
    }  # fmt: skip
    after, baseline = doc["after"], doc["baseline"]
    assert set(after) == arm_keys and set(baseline) == arm_keys
    assert after["probes"] == baseline["probes"] == 2
    assert after["cited_first_answer"] == 2, after
    assert after["stale"] == after["missed_silently"] == 0, after
    # without after, a probe not cited is a silent miss: no read waited, none was warned
    assert baseline["missed_silently"] == 2 - baseline["cited_first_answer"], baseline
    assert 0 <= after["waited_ms_median"] <= after["waited_ms_max"] < BOUND_S * 1000
    assert baseline["waited_ms_max"] == 0  # without `after` no read waits
    assert doc["machine"]["cpus"] >= 1

    results = tmp_path / "results"
    results.mkdir()
    (results / "read-after.json").write_text(res.stdout)
    table = blocks_from(results)["read-after"]
    assert "| `after` = the write's position | 2/2 |" in table
    assert f"read-after bound {BOUND_S:g} s" in table


def _arm(cited: int, stale: int, waited: tuple[int, int]) -> dict[str, Any]:
    return {
        "probes": 5, "cited_first_answer": cited, "stale": stale, "during_backlog": 4,
        "missed_silently": 5 - cited - stale,
        "waited_ms_median": waited[0], "waited_ms_max": waited[1], "checkout_ms_median": 9.5,
    }  # fmt: skip


def _fake(bulk: int, probes: int, progress: Report) -> dict[str, Any]:
    progress("starting a throw-away embedded stack")
    return {
        "bulk_events": bulk, "bulk_emit_events_per_s": 20_000, "bulk_visible_s": 12.5,
        "bulk_ingest_events_per_s": 1_600, "probes": probes, "read_after_max_wait_s": 5.0,
        "after": _arm(3, 2, (342, 5022)), "baseline": _arm(0, 0, (0, 0)),
        "machine": {"cpus": 2, "date": "2031-01-02", "load_1m_at_start": 5.5},
    }  # fmt: skip


def test_the_command_prints_both_arms_and_the_bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_cmd, "run_read_after_bench", _fake)
    res = CliRunner().invoke(app, ["bench", "read-after", "--bulk", "300", "--probes", "5"])
    assert res.exit_code == 0, res.output
    assert "3/5" in res.stdout and "0/5" in res.stdout and "342 / 5022 ms" in res.stdout
    assert "bulk: 300 events" in res.stdout and "read-after bound 5 s" in res.stdout
    as_json = CliRunner().invoke(app, ["bench", "read-after", "--json"])
    assert json.loads(as_json.stdout)["bulk_events"] == 20_000


def test_the_readme_row_shows_the_stale_answers_and_the_machine_load(tmp_path: Path) -> None:
    (tmp_path / "read-after.json").write_text(json.dumps(_fake(20_000, 5, print)))
    table = blocks_from(tmp_path)["read-after"]
    assert "| `after` = the write's position | 3/5 | 342 / 5,022 ms | 2 | 0 | 4/5 |" in table
    assert "| without `after` (baseline) | 0/5 | – | – | 5 | 4/5 |" in table
    assert table.endswith(
        "_Measured 2031-01-02 on a 2-core machine, 1-minute load average 5.5 at the start._"
    )
