"""SIGTERM and SIGINT as a ``threading.Event`` every long-running process waits on."""

from __future__ import annotations

import contextlib
import os
import signal
import threading


def install_stop(stop: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stop``.

    The handler takes no lock: it runs in the main thread between two bytecodes, possibly
    while that thread holds ``stop``'s own lock (inside ``stop.wait``) or while an earlier
    signal's handler does, and ``Event.set`` called there waited forever on a lock its own
    thread held (a projector sent SIGTERM twice hung so). It writes a byte to a pipe; a
    thread waiting on the pipe sets the event.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)

    def _watch() -> None:
        os.read(read_fd, 1)
        stop.set()

    threading.Thread(target=_watch, name="stop-signal", daemon=True).start()

    def _stop(_sig: int, _frame: object) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe: the watcher is woken
            os.write(write_fd, b"\0")

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
