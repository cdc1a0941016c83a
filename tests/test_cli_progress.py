"""Long commands: progress bars on a terminal only; pipes get plain lines, --json only JSON."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from memstream_bench import cli as bench_cmd
from memstream_cli.main import app
from memstream_cli.progress import Report, Stages, stage, stages
from rich.console import Console
from typer.testing import CliRunner


def _fake_load(_n: int, _tenants: int, progress: Report, *_a: Any, **_kw: Any) -> dict[str, Any]:
    progress("starting a throw-away embedded stack")
    step = stage(progress, "emitting 10 events", 10)
    for i in range(10):
        step.update(i + 1)
    doc: dict[str, Any] = dict.fromkeys(
        (
            "events", "tenants", "broker_produce_events_per_s", "emit_events_per_s",
            "ingest_events_per_s", "freshness_burst_probes", "freshness_burst_missed",
            "freshness_burst_p50_ms", "freshness_burst_p95_ms", "steady_events_per_s",
            "freshness_probes", "freshness_missed", "freshness_p50_ms", "freshness_p95_ms",
            "checkout_p50_ms", "checkout_p95_ms",
        ),
        1,
    )  # fmt: skip
    doc["peak_rss_mb"] = {"api": 1.0}
    return doc


@pytest.fixture
def fake_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_cmd, "run_load_bench", _fake_load)


def test_json_in_a_pipe_prints_the_document_and_nothing_else(fake_load: None) -> None:
    res = CliRunner().invoke(app, ["bench", "load", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["peak_rss_mb"] == {"api": 1.0}
    assert res.stderr == ""


def test_a_pipe_gets_plain_stage_lines_and_the_table(fake_load: None) -> None:
    res = CliRunner().invoke(app, ["bench", "load"])
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines() == ["starting a throw-away embedded stack", "emitting 10 events"]
    assert "peak RSS api (MB)" in res.stdout
    assert "\x1b" not in res.stdout + res.stderr  # no control codes, no bar


def test_off_the_terminal_stages_are_lines_or_nothing() -> None:
    assert stages(json_out=False).mode == "lines"
    assert stages(json_out=True).mode == "off"
    assert stages(json_out=False, lines=False).mode == "off"


def test_a_plain_callback_hears_every_stage() -> None:
    heard: list[str] = []
    stage(heard.append, "counting", 3).update(2)
    assert heard == ["counting"]


def test_on_a_terminal_each_stage_is_a_bar_with_the_count_it_reached() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, force_interactive=True, width=100)
    with Stages("bar", console) as progress:
        progress("starting")
        progress.stage("emitting", 10).update(4)
        graph = progress.stage("graph", 8)
        progress.stage("vectors", 8, keep=True).update(8)
        graph.update(3)
    text = buf.getvalue()
    assert "\x1b" in text
    for shown in ("starting", "emitting", "4/10", "graph", "3/8", "vectors", "8/8"):
        assert shown in text
    assert text.count("✓") >= 4  # every stage finished, counts short of their totals too
