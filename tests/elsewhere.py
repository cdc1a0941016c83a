"""Computing a value in a fresh interpreter, for determinism checks that mean it.

Comparing a value with itself in one process cannot catch what varies between processes:
Python's ``hash()`` of a string is salted per process (``PYTHONHASHSEED``), so set order and
``hash``-based choices agree with themselves here and differ in the next worker. A value
computed again in interpreters with other hash seeds can.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

TESTS = Path(__file__).parent


def elsewhere(code: str, seed: int) -> Any:
    """The JSON value ``code`` prints (``print(json.dumps(...))``), run with
    ``PYTHONHASHSEED=seed`` and the tests folder importable."""
    env = dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=str(TESTS))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
        check=True,
    )  # fmt: skip
    return json.loads(out.stdout)
