"""``bench cli``: how long a ``memstream`` command takes from exec to exit.

Each command runs as a new process, as a script or an agent shelling out runs it, against a
throw-away stack, several times; the same run times the bare interpreter (``python -c
pass``) as its baseline. The light commands (help, keys, the ones that talk to a running
stack) are held to START_BAR_S; ``up``, ``mcp`` and the benches load what they serve and are
not timed here.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstream.settings import Settings
from memstream_cli.progress import Report, stage

from memstream_bench.stack import throwaway_stack

START_BAR_S = 1.0
TENANT = "bench-cli"


@dataclass(frozen=True)
class Timed:
    """One command line and its wall times (seconds)."""

    name: str
    argv: list[str]
    light: bool
    seconds: list[float]

    def row(self) -> dict[str, Any]:
        return {
            "command": self.name,
            "light": self.light,
            "runs": len(self.seconds),
            "median_s": round(statistics.median(self.seconds), 3),
            "max_s": round(max(self.seconds), 3),
        }


def _memstream() -> list[str]:
    """The installed ``memstream`` script beside this interpreter (else the module)."""
    script = Path(sys.executable).with_name("memstream")
    if script.exists():
        return [str(script)]
    found = shutil.which("memstream")
    return [found] if found else [sys.executable, "-m", "memstream_cli.main"]


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[1:])} failed ({done.returncode}): {done.stderr}")
    return took, done.stdout


def _commands(key: str, event_id: str) -> list[tuple[str, list[str], bool]]:
    as_tenant = ["--tenant", TENANT, "--key", key]
    return [
        ("python -c pass (baseline)", [sys.executable, "-c", "pass"], False),
        ("--help", ["--help"], True),
        ("keys create", ["keys", "create", "--tenant", TENANT, "--json"], True),
        ("keys list", ["keys", "list", "--tenant", TENANT, "--json"], True),
        ("status", ["status", "--json"], True),
        ("ledger stats", ["ledger", "stats", "--json"], True),
        (
            "emit",
            [
                "emit",
                "--tenant",
                TENANT,
                "--stream",
                "s",
                "--type",
                "observation",
                "--text",
                "the bench's own event",
            ],
            True,
        ),
        ("checkout", ["checkout", "what did the bench write?", *as_tenant], True),
        ("lineage", ["lineage", event_id, *as_tenant], True),
        ("search", ["search", "bench", *as_tenant, "--json"], True),
    ]


def run_cli_bench(runs: int, progress: Report) -> dict[str, Any]:
    """Every command ``runs`` times against one throw-away stack."""
    with throwaway_stack(progress) as (_stack, settings):
        env = _env(settings)
        exe = _memstream()
        key = json.loads(_run([*exe, "keys", "create", "--tenant", TENANT, "--json"], env)[1])
        written = _run(
            [*exe, "emit", "--tenant", TENANT, "--stream", "s", "--type", "observation",
             "--text", "the bench wrote this", "--json"], env,
        )[1]  # fmt: skip
        event_id = json.loads(written)["id"]
        _until_projected(exe, env, key["key"], event_id, progress)
        commands = _commands(key["key"], event_id)
        step = stage(progress, f"{len(commands)} commands x {runs} runs", len(commands) * runs)
        timed = []
        for i, (name, argv, light) in enumerate(commands):
            line = argv if not light else [*exe, *argv]
            seconds = []
            for r in range(runs):
                seconds.append(_run(line, env)[0])
                step.update(i * runs + r + 1)
            timed.append(Timed(name, argv, light, seconds))
    rows = [t.row() for t in timed]
    lights = [r for r in rows if r["light"]]
    return {
        "runs": runs,
        "cpus": os.cpu_count(),
        "bar_s": START_BAR_S,
        "commands": rows,
        "baseline_interpreter_s": rows[0]["median_s"],
        "slowest_light": max(lights, key=lambda r: r["median_s"])["command"],
        "light_all_under_bar": all(r["median_s"] < START_BAR_S for r in lights),
    }


def _until_projected(
    exe: list[str], env: dict[str, str], key: str, event_id: str, progress: Report
) -> None:
    """Lineage answers once the event is projected: the commands are timed after that."""
    progress("waiting for the bench's event to be projected")
    deadline = time.monotonic() + 120
    while True:
        try:
            _run([*exe, "lineage", event_id, "--tenant", TENANT, "--key", key], env)
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    env["MEMSTREAM_DATA_DIR"] = str(settings.data_dir)
    env["COLUMNS"] = "120"
    return env
