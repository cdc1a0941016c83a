"""The alert rules parse and behave as their promtool unit tests say."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

PROM = Path(__file__).resolve().parent.parent / "deploy" / "prometheus"
METRIC_PREFIXES = ("memstream_", "up")


def promtool() -> str:
    path = shutil.which("promtool")
    assert path is not None, "promtool missing: `make test` installs Debian's prometheus"
    return path


def test_rules_are_valid_and_their_unit_tests_pass() -> None:
    rules = sorted(PROM.glob("*rules*.yml"))
    assert rules, "no rule files"
    check = subprocess.run(
        [promtool(), "check", "rules", *map(str, rules)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    tests = sorted((PROM / "tests").glob("*.test.yml"))
    assert tests
    run = subprocess.run(
        [promtool(), "test", "rules", *map(str, tests)],
        capture_output=True,
        text=True,
        cwd=PROM / "tests",
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_alert_has_a_unit_test_and_an_explanation() -> None:
    alerts = {
        rule["alert"]: rule
        for path in PROM.glob("*rules*.yml")
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    tested = set()
    for path in (PROM / "tests").glob("*.test.yml"):
        for case in yaml.safe_load(path.read_text())["tests"]:
            tested |= {t["alertname"] for t in case.get("alert_rule_test", [])}
    assert set(alerts) == tested
    for name, rule in alerts.items():
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
        assert rule["labels"]["severity"] in ("warning", "critical"), name
