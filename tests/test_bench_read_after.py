"""``memstream bench read-after`` on a real throw-away stack, at a small size: the row's shape,
and that a checkout given the write's position cites tenant B's marker in its first answer
while tenant A's bulk is in the pipeline."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from memstream_cli.bench.report import blocks_from
from stackproc import BIN, LLM_ENV

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
        "probes", "cited_first_answer", "stale", "during_backlog", "waited_ms_median",
        "waited_ms_max", "checkout_ms_median",
    }  # fmt: skip
    after, baseline = doc["after"], doc["baseline"]
    assert set(after) == arm_keys and set(baseline) == arm_keys
    assert after["probes"] == baseline["probes"] == 2
    assert after["cited_first_answer"] == 2, after
    assert after["stale"] == 0, after
    assert 0 <= after["waited_ms_median"] <= after["waited_ms_max"] < BOUND_S * 1000
    assert 0 <= baseline["cited_first_answer"] <= 2 and baseline["waited_ms_max"] == 0
    assert doc["machine"]["cpus"] >= 1

    results = tmp_path / "results"
    results.mkdir()
    (results / "read-after.json").write_text(res.stdout)
    table = blocks_from(results)["read-after"]
    assert "| `after` = the write's position | 2/2 |" in table
    assert f"read-after bound {BOUND_S:g} s" in table
