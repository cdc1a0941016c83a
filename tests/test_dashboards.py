"""The committed Grafana dashboards are the generator's output, and every query is sound."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import memstream.checkout.metrics
import memstream.forget.metrics
import memstream.intake.producer
import memstream.latent.metrics
import memstream.learning.metrics
import memstream.metrics
import memstream.projection.metrics
import memstream.summarize.metrics
import memstream_api.read_after
import memstream_cli.stack.supervisor
import yaml
from memstream_dashboards import dashboards
from memstream_dashboards.__main__ import main
from memstream_dashboards.grafana import DATASOURCE, dashboard_json, render
from prometheus_client import REGISTRY

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "deploy" / "grafana" / "dashboards"
# Modules whose import registers every memstream_* family (kept referenced for the linter).
METRIC_MODULES = (
    memstream.metrics,
    memstream.checkout.metrics,
    memstream.forget.metrics,
    memstream.latent.metrics,
    memstream.learning.metrics,
    memstream.projection.metrics,
    memstream_cli.stack.supervisor,
    memstream.summarize.metrics,
    memstream.intake.producer,
    memstream_api.read_after,
)
SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def test_committed_json_is_the_generator_output() -> None:
    expected = {d.filename: render(d) for d in dashboards()}
    committed = {p.name: p.read_text(encoding="utf-8") for p in OUT.glob("*.json")}
    assert set(committed) == set(expected), "run `make dashboards`"
    for name, text in expected.items():
        assert committed[name] == text, f"{name} drifted from the generator: run `make dashboards`"


def test_main_writes_the_same_files(tmp_path: Path) -> None:
    main([str(tmp_path)])
    for d in dashboards():
        assert (tmp_path / d.filename).read_text() == (OUT / d.filename).read_text()


def test_the_five_dashboards() -> None:
    titles = [d.title for d in dashboards()]
    assert titles == [
        "memstream / Overview",
        "memstream / Ingestion & ledger",
        "memstream / Projections & freshness",
        "memstream / Checkout quality & latency",
        "memstream / Retrospective & latent builds",
    ]
    uids = [d.uid for d in dashboards()]
    assert len(set(uids)) == len(uids) and all(len(u) <= 40 for u in uids)


def test_every_panel_queries_the_provisioned_datasource() -> None:
    ds = yaml.safe_load(
        (ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    assert DATASOURCE["uid"] in {d["uid"] for d in ds["datasources"]}
    for path in sorted(OUT.glob("*.json")):
        doc = json.loads(path.read_text())
        ids = [p["id"] for p in doc["panels"]]
        assert len(set(ids)) == len(ids), path.name
        for panel in doc["panels"]:
            where = f"{path.name} / {panel['title']}"
            assert panel["datasource"]["uid"] == "prometheus", where
            assert panel["description"], where
            assert panel["targets"], where
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "prometheus", where
                assert target["expr"].strip(), where
                # Grafana-only variables would not run in the Prometheus integration test.
                assert "$" not in target["expr"], where


def test_panels_fit_the_grid_without_overlapping() -> None:
    for d in dashboards():
        cells: set[tuple[int, int]] = set()
        for panel in dashboard_json(d)["panels"]:
            g = panel["gridPos"]
            assert g["x"] >= 0 and g["x"] + g["w"] <= 24, (d.uid, panel["title"])
            area = {
                (x, y)
                for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])
            }
            assert not cells & area, (d.uid, panel["title"])
            cells |= area


def exprs() -> list[str]:
    return [q.expr for d in dashboards() for p in d.panels for q in p.queries]


def test_every_metric_in_a_query_is_defined_by_the_code() -> None:
    defined = {name for m in REGISTRY.collect() if (name := m.name).startswith("memstream_")}
    used = set()
    for expr in exprs():
        for name in re.findall(r"\bmemstream_[a-z_]+", expr):
            for suffix in SUFFIXES:
                if name.endswith(suffix) and name.removesuffix(suffix) in defined:
                    name = name.removesuffix(suffix)
                    break
            used.add(name)
    assert used and used <= defined, f"unknown metrics: {sorted(used - defined)}"


def test_every_query_parses(tmp_path: Path) -> None:
    """promtool checks PromQL syntax of recording rules: one rule per dashboard query."""
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool missing: `make test` installs Debian's prometheus"
    rules = [{"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs())]
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    check = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
