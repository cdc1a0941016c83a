"""Outbox segments on disk: append-only JSON lines, fsync'd before an event is acknowledged.

A segment is open while events are appended to it and closed once it is old or large
enough; a closed segment is deleted when every event in it is archived (see ``tracker``).
A crash can leave a torn last line in the open segment: it was never acknowledged, so it is
cut off when the spool is opened again.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

SEGMENT_SECONDS = 1.0  # a segment closes this long after its first event...
SEGMENT_BYTES = 8 << 20  # ...or at this size, whichever comes first


@dataclass
class Segment:
    """One segment file: its id (sortable), path, and how many events it holds."""

    seg_id: int
    path: Path
    events: int = 0
    size: int = 0
    opened: float = field(default_factory=time.monotonic)


class Spool:
    """The segment files of one outbox directory; ``append`` is thread-safe."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._open: Segment | None = None
        self._fh: BinaryIO | None = None
        self._next_id = max((s.seg_id for s in self.existing()), default=0) + 1

    def existing(self) -> list[Segment]:
        """Segments left on disk (by an earlier process), torn tails cut off, oldest first."""
        out = []
        for path in sorted(self.directory.glob("*.jsonl")):
            size = _truncate_torn_tail(path)
            if size == 0:
                path.unlink(missing_ok=True)
                continue
            events = sum(1 for _ in read_lines(path))
            out.append(Segment(int(path.stem), path, events, size))
        return out

    def append(self, lines: list[bytes]) -> tuple[int, Segment | None]:
        """Write ``lines`` durably (fsync) to the open segment.

        Returns the segment id written to, and the segment this append closed, if any.
        """
        data = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)
        with self._lock:
            closed = self._roll_if_due()
            seg, fh = self._current()
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            seg.events += len(lines)
            seg.size += len(data)
            return seg.seg_id, closed

    def roll_if_due(self) -> Segment | None:
        """Close the open segment if it is old or large enough; returns it when closed."""
        with self._lock:
            return self._roll_if_due()

    def _roll_if_due(self) -> Segment | None:
        seg = self._open
        if seg is None:
            return None
        if seg.size < SEGMENT_BYTES and time.monotonic() - seg.opened < SEGMENT_SECONDS:
            return None
        assert self._fh is not None
        self._fh.close()
        self._open, self._fh = None, None
        return seg

    def _current(self) -> tuple[Segment, BinaryIO]:
        if self._open is None or self._fh is None:
            seg = Segment(self._next_id, self.directory / f"{self._next_id:012d}.jsonl")
            self._next_id += 1
            self._fh = open(seg.path, "ab")  # noqa: SIM115 - held open while the segment is
            self._open = seg
        return self._open, self._fh

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
            self._open, self._fh = None, None

    def size_bytes(self) -> int:
        """Bytes on disk in every segment (what an outage has piled up)."""
        return sum(_size(p) for p in self.directory.glob("*.jsonl"))


def _size(path: Path) -> int:
    """A segment's size; 0 once gone: the tracker deletes archived segments while requests
    check the spool's size (an exists() before the stat() would still race it)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def read_lines(path: Path) -> Iterator[bytes]:
    """The complete lines of a segment file."""
    with open(path, "rb") as fh:
        for line in fh:
            if line.endswith(b"\n") and line.strip():
                yield line.rstrip(b"\n")


def delete(segments: Iterable[Segment]) -> None:
    for s in segments:
        s.path.unlink(missing_ok=True)


def _truncate_torn_tail(path: Path) -> int:
    with open(path, "rb+") as fh:
        data = fh.read()
        if data and not data.endswith(b"\n"):
            fh.truncate(data.rfind(b"\n") + 1)
            return data.rfind(b"\n") + 1
        return len(data)
