"""Running ``memstream up`` as a real child process for end-to-end tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from memstream.kafka.reading import read_to_end
from memstream.kafka.topics import LEDGER
from memstream.ledger.opening import EntryOpener
from memstream.proof import Prover, producer_secret
from memstream.settings import Settings
from memstream.shred.sqlite import SqliteDataKeys
from memstream.stack.net import free_port
from memstream_cli.main import app as cli_app
from typer.testing import CliRunner

BIN = Path(sys.executable).parent
LLM_ENV = ("ANTHROPIC_API_KEY", "MEMSTREAM_ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


# Commands that serve, start stacks or install signal handlers: always a process of their own.
OWN_PROCESS = frozenset({"up", "mcp", "bench"})


def memstream(*args: str, data_dir: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``memstream ARGS --data-dir DATA_DIR``, run in this process (the CLI's own code, its
    exit code and output; what a process would cost is the interpreter's start, ~1 s of CPU a
    call, which polls paid every 0.1 s), but for the commands of ``OWN_PROCESS``."""
    argv = [*args, "--data-dir", str(data_dir)]
    if args and args[0] in OWN_PROCESS:
        return memstream_process(*argv, check=check)
    result = CliRunner().invoke(cli_app, argv, catch_exceptions=False)
    done = subprocess.CompletedProcess(
        ["memstream", *argv], result.exit_code, result.stdout, result.stderr
    )
    if check:
        done.check_returncode()
    return done


def memstream_process(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``memstream ARGV`` as a process of its own."""
    return subprocess.run(
        [str(BIN / "memstream"), *argv], capture_output=True, text=True, check=check, timeout=120
    )


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``cond`` until true, at 50 ms first and backing off to 1 s between tries."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 1.5, 1.0)


def healthy_status(data_dir: Path, timeout: float = 120) -> dict[str, Any]:
    """``memstream status --json`` once it says healthy: ``memstream up`` returns when the
    API answers, and the workers (the niced ones last) may still be starting."""
    last: list[subprocess.CompletedProcess[str]] = []

    def healthy() -> bool:
        last[:] = [memstream("status", "--json", data_dir=data_dir, check=False)]
        return last[0].returncode == 0

    try:
        wait_until(healthy, timeout, "memstream status to say healthy")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {last[0].stdout[-3000:]} {last[0].stderr[-2000:]}") from exc
    doc: dict[str, Any] = json.loads(last[0].stdout)
    return doc


@dataclass
class RunningStack:
    data_dir: Path
    proc: subprocess.Popen[str]
    info: dict[str, Any]

    @property
    def bootstrap(self) -> str:
        return str(self.info["kafka_bootstrap"])

    @property
    def api_url(self) -> str:
        return str(self.info["api_url"])

    @property
    def dev_key(self) -> str:
        return Path(self.info["dev_key_file"]).read_text().strip()

    @property
    def prover(self) -> Prover:
        """The stack's own producer proof (its data dir's secret), as its tools write."""
        return Prover.internal(producer_secret(Settings(data_dir=self.data_dir)))

    def pid(self, component: str) -> int:
        info = json.loads((self.data_dir / "stack.json").read_text())
        return int(info["components"][component]["pid"])

    def child_pids(self) -> list[int]:
        return [int(c["pid"]) for c in self.info["components"].values()]

    def stop(self, sig: int = signal.SIGINT, timeout: float = 90) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return int(self.proc.returncode)

    def sealed_ledger(self) -> list[dict[str, Any]]:
        """The ledger topic's entries as written: content sealed under data keys."""
        return [orjson.loads(m.value() or b"{}") for m in read_to_end(self.bootstrap, LEDGER)]

    def ledger(self) -> list[dict[str, Any]]:
        """The ledger's entries opened with the stack's data keys, as its readers see them
        (an entry whose key was destroyed in its purged form)."""
        return self.open_entries(self.sealed_ledger())

    def open_entries(self, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Sealed events (ledger entries or raw envelopes) opened with the stack's keys."""
        keys = SqliteDataKeys(self.data_dir / "data-keys.sqlite")
        try:
            opener = EntryOpener(keys)
            return [opener(d) if isinstance(d, dict) and "tenant" in d else d for d in docs]
        finally:
            keys.close()


def start_stack(
    data_dir: Path,
    timeout: float = 180,
    extra: tuple[str, ...] = (),
    env: dict[str, str | None] | None = None,
) -> RunningStack:
    """``memstream up`` in ``data_dir``; ``env`` sets (a None value unsets) variables.

    ``timeout`` guards against a hang; it does not measure start time (the benches do). With
    two replicas `up` starts ~15 Python processes, ~19 s on an idle 2-core machine; beside a
    second suite that took over 90 s. A child that exits fails at once, whatever the timeout.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    log = open(data_dir.parent / f"{data_dir.name}-up.log", "a")  # noqa: SIM115
    child_env = dict(os.environ, MEMSTREAM_LOG_LEVEL="INFO")
    for name in LLM_ENV:  # a stack reaches an LLM only through a test's stand-in
        child_env.pop(name, None)
    for name, value in (env or {}).items():
        if value is None:
            child_env.pop(name, None)
        else:
            child_env[name] = value
    proc = subprocess.Popen(
        [
            str(BIN / "memstream"),
            "up",
            "--data-dir",
            str(data_dir),
            "--api-port",
            str(free_port()),
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env=child_env,
    )
    stack_json = data_dir / "stack.json"
    deadline = time.monotonic() + timeout
    while not stack_json.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            tail = (data_dir.parent / f"{data_dir.name}-up.log").read_text()[-3000:]
            raise AssertionError(f"memstream up did not start: {tail}")
        time.sleep(0.1)
    return RunningStack(data_dir, proc, json.loads(stack_json.read_text()))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
    return True


def owned_stack(
    tmp_path_factory: Any, name: str, env: dict[str, str | None] | None = None
) -> Iterator[RunningStack]:
    """A stack of one module's own, stopped after it (``yield from`` it in the module's
    ``stack`` fixture; ``tmp_path_factory`` is pytest's)."""
    s = start_stack(tmp_path_factory.mktemp(name) / "data", env=env)
    try:
        yield s
    finally:
        s.stop()
