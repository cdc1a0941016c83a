"""Heavy background workers start nicer than the latency-bound path: the embedded stack
spawns the latent builder, the retrospective pass and the archiver with the niceness
MEMSTREAM_HEAVY_NICE adds (restarts included), and the sequencer, the graph projector and
the API with their parent's."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from memstream.stack.children import spawn, stop_process
from stackproc import RunningStack, pid_alive, start_stack, wait_until

HEAVY_NICE = 7  # not the default (10): the setting is what decides
HEAVY = ("latent-builder", "retrospective", "archiver")
FAST = ("sequencer", "graph-projector", "api")


def base() -> int:
    """The niceness every child inherits from this process."""
    return os.getpriority(os.PRIO_PROCESS, 0)


def niceness(pid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    env = {"MEMSTREAM_HEAVY_NICE": str(HEAVY_NICE)}
    s = start_stack(tmp_path_factory.mktemp("heavy-nice") / "data", env=env)
    try:
        yield s
    finally:
        s.stop()


def test_spawn_adds_the_niceness_it_is_given(tmp_path: Path) -> None:
    plain = spawn(["sleep", "60"], tmp_path / "plain.log")
    nicer = spawn(["sleep", "60"], tmp_path / "nicer.log", nice=5)
    try:
        assert niceness(plain.pid) == base()
        assert niceness(nicer.pid) == min(19, base() + 5)
    finally:
        stop_process(plain)
        stop_process(nicer)


def test_heavy_workers_run_nicer_and_the_fast_path_does_not(stack: RunningStack) -> None:
    for name in HEAVY:
        assert niceness(stack.pid(name)) == min(19, base() + HEAVY_NICE), name
    for name in FAST:
        assert niceness(stack.pid(name)) == base(), name


def test_a_restarted_heavy_worker_is_nicer_again(stack: RunningStack) -> None:
    old = stack.pid("latent-builder")
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: not pid_alive(old), 30, "the latent builder to die")

    def restarted() -> bool:
        pid = stack.pid("latent-builder")
        return pid != old and pid_alive(pid)

    wait_until(restarted, 120, "the supervisor to restart the latent builder")
    assert niceness(stack.pid("latent-builder")) == min(19, base() + HEAVY_NICE)
