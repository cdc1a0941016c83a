"""Child processes that die with their parent (no orphans, even on SIGKILL of the parent).

Every child creates its files for its user alone: folders 0700, files 0600 (umask 077).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

_PR_SET_PDEATHSIG = 1
PRIVATE_UMASK = 0o077  # what a child creates is its user's alone


def _die_with_parent(nice: int = 0) -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass
    # A Ctrl-C in the terminal reaches the whole foreground group; the parent decides the order.
    os.setpgrp()
    os.umask(PRIVATE_UMASK)
    if nice:
        os.nice(nice)


def spawn(
    argv: list[str],
    log: Path,
    env: Mapping[str, str] | None = None,
    *,
    stdin: bytes | None = None,
    pass_fds: tuple[int, ...] = (),
    nice: int = 0,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` with stdout/stderr appended to ``log`` (0600). ``stdin`` is written to
    the child's standard input, then closed (a secret that must not be on the command line);
    ``pass_fds`` stay open in the child (an inherited listening socket); ``nice`` is added to
    the child's niceness (heavy background work yields the CPU to the latency-bound path)."""
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            pass_fds=pass_fds,
            preexec_fn=functools.partial(_die_with_parent, nice),
        )
    if proc.stdin is not None:
        # a child that died at once closed its end: its exit code tells the caller
        with proc.stdin, contextlib.suppress(BrokenPipeError):
            proc.stdin.write(stdin or b"")
    return proc


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """SIGTERM, wait, then SIGKILL if it would not go."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def stop_all(procs: list[subprocess.Popen[bytes]], timeout: float = 5.0) -> None:
    """SIGTERM to all at once, one shared wait, then SIGKILL to whatever is left."""
    live = [p for p in procs if p.poll() is None]
    for p in live:
        p.terminate()
    deadline = time.monotonic() + timeout
    for p in live:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
