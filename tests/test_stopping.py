"""SIGTERM/SIGINT stop a process however many arrive and whatever its main thread holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

# The main thread waits on the stop event the way workers and the supervisor do, in short
# waits (so it often holds the event's lock when a signal comes), and keeps waiting while the
# signals go on coming, until it is told on stdin to report.
CHILD = """
import sys, threading
from memstream.stopping import install_stop
stop, done = threading.Event(), threading.Event()
install_stop(stop)
threading.Thread(target=lambda: (sys.stdin.readline(), done.set()), daemon=True).start()
print("ready", flush=True)
while not done.is_set():
    stop.wait(0.0005)
print("stopped" if stop.is_set() else "not stopped", flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_storm_of_stop_signals_stops_the_process_cleanly(sig: signal.Signals) -> None:
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        until = time.monotonic() + 1.0
        while time.monotonic() < until:  # the child lives until told on stdin
            os.kill(child.pid, sig)
        try:
            out, err = child.communicate("exit\n", timeout=20)
        finally:
            child.kill()
        assert child.returncode == 0, err
        assert out == "stopped\n" and err == "", (out, err)
