"""A setting that does not parse or validate ends a command with one line that names it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from stackproc import BIN


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        (
            "MEMSTREAM_REPLICAS",
            "99",
            "MEMSTREAM_REPLICAS: Input should be less than or equal to 16",
        ),
        ("MEMSTREAM_WORKER_REPLICAS", "{not json", 'field "worker_replicas"'),
        ("MEMSTREAM_API_REPLICA", "../b", "MEMSTREAM_API_REPLICA: String should match pattern"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(
    tmp_path: Path, variable: str, value: str, says: str
) -> None:
    env = dict(os.environ, **{variable: value})
    res = subprocess.run(
        [str(BIN / "memstream"), "status", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert res.returncode == 1
    assert res.stderr.startswith("error: settings:") and says in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
