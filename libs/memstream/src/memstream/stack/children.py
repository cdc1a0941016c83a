"""Child processes that die with their parent (no orphans, even on SIGKILL of the parent).

Every child creates its files for its user alone: folders 0700, files 0600 (umask 077).

A parent's death sends its children SIGTERM (``PR_SET_PDEATHSIG``), and a child may take long
to stop gracefully: the API, flushing to a broker that is down, took 35-40 s. So a supervised
child also watches its parent (:func:`exit_with_parent`) and, once it is gone, exits at
``ORPHAN_GRACE_S`` whatever it was doing. What it accepted is already durable: an event is
answered 202 only once fsync'd in the outbox, and consumers commit only after their writes.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

_PR_SET_PDEATHSIG = 1
PRIVATE_UMASK = 0o077  # what a child creates is its user's alone
PARENT_ENV = "MEMSTREAM_PARENT_PID"  # set by spawn: the process a child must not outlive
ORPHAN_GRACE_S = 3.0
_WATCH_EVERY_S = 0.5


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
    child_env = dict(env if env is not None else os.environ)
    child_env[PARENT_ENV] = str(os.getpid())
    with os.fdopen(fd, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            env=child_env,
            pass_fds=pass_fds,
            preexec_fn=functools.partial(_die_with_parent, nice),
        )
    if proc.stdin is not None:
        # a child that died at once closed its end: its exit code tells the caller
        with proc.stdin, contextlib.suppress(BrokenPipeError):
            proc.stdin.write(stdin or b"")
    return proc


def exit_with_parent(grace_s: float = ORPHAN_GRACE_S) -> None:
    """In a child started by :func:`spawn`: once its parent is gone, exit ``grace_s`` later,
    graceful stop finished or not (see the module docstring). Outside a spawned child (no
    ``MEMSTREAM_PARENT_PID``) it does nothing."""
    expected = os.environ.get(PARENT_ENV, "")
    if not expected.isdigit():
        return

    def watch() -> None:
        while os.getppid() == int(expected):
            time.sleep(_WATCH_EVERY_S)
        time.sleep(grace_s)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


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
