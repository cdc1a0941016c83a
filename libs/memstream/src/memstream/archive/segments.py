"""Append-only segment files ``<archive>/<tenant>/p<PPP>-<NNNNNNNN>.jsonl``.

Every line is one ledger entry as produced by the sequencer, so the per-stream hash chain
runs through the lines. A torn last line (crash mid-write) is ignored on read and truncated
by the next writer.

Each ledger partition has its own segments (``PPP``): the archiver replica that holds the
partition is their one appender, and a stream, which lives in one partition, runs through
one file sequence. Several replicas share a tenant's directory, so whatever changes more
than one partition's files (a purge) or appends to them happens under the tenant's lock
(:func:`tenant_lock`). Segments named ``<NNNNNNNN>.jsonl`` come from an archive written by
one process before partitions had their own; they are read (first) and purged, never
appended to.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

SEGMENT_BYTES = 64 * 1024 * 1024
LOCK_FILE = ".lock"


def tenant_dirs(archive: Path) -> list[Path]:
    return sorted(p for p in archive.iterdir() if p.is_dir()) if archive.is_dir() else []


def segments(tenant_dir: Path, partition: int | None = None) -> list[Path]:
    """The tenant's segments in reading order (the unpartitioned ones first), or those of
    one ledger partition."""
    pattern = "*.jsonl" if partition is None else f"{_prefix(partition)}*.jsonl"
    return sorted(tenant_dir.glob(pattern))


def _prefix(partition: int) -> str:
    return f"p{partition:03d}-"


@contextlib.contextmanager
def tenant_lock(tenant_dir: Path) -> Iterator[None]:
    """Exclusive hold on one tenant's directory across processes (``flock``): appends and
    purges of several archiver replicas never interleave in its files."""
    tenant_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(tenant_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def read_tenant(tenant_dir: Path) -> Iterator[tuple[dict[str, Any], str]]:
    """Yield ``(entry, "file:line")`` in archive order; stop at a torn final line."""
    for seg in segments(tenant_dir):
        yield from _read_segment(tenant_dir, seg)


def _read_segment(tenant_dir: Path, seg: Path) -> Iterator[tuple[dict[str, Any], str]]:
    # A purge replaces segments by rename: an open reads the old file or the new, whole.
    with open(seg, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.endswith(b"\n"):
                break  # torn tail of a crashed write; the writer truncates it
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                entry = {"tenant": tenant_dir.name, "stream": "?", "seq": None}
            yield entry, f"{seg}:{lineno}"


def read_archive(archive: Path, tenant: str | None = None) -> Iterator[tuple[dict[str, Any], str]]:
    for tdir in tenant_dirs(archive):
        if tenant is None or tdir.name == tenant:
            yield from read_tenant(tdir)


@dataclass
class TenantWriter:
    """Appends lines to the newest segment of one tenant and ledger partition, rolling at
    ``SEGMENT_BYTES``."""

    directory: Path
    partition: int = 0
    fh: BinaryIO | None = None
    size: int = 0
    index: int = 0

    def _path(self) -> Path:
        return self.directory / f"{_prefix(self.partition)}{self.index:08d}.jsonl"

    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        segs = segments(self.directory, self.partition)
        self.index = int(segs[-1].stem.removeprefix(_prefix(self.partition))) if segs else 1
        path = self._path()
        self._truncate_torn_tail(path)
        self.fh = open(path, "ab")  # noqa: SIM115 - held open across batches
        self.size = self.fh.tell()

    def stale(self) -> bool:
        """The file held is no longer the segment on disk: a purge (maybe another
        replica's) replaced it, so the next append must reopen."""
        if self.fh is None:
            return False
        try:
            on_disk = os.stat(self._path()).st_ino
        except FileNotFoundError:
            return True
        return on_disk != os.fstat(self.fh.fileno()).st_ino

    @staticmethod
    def _truncate_torn_tail(path: Path) -> None:
        if not path.exists() or path.stat().st_size == 0:
            return
        with open(path, "rb+") as fh:
            data = fh.read()
            if data.endswith(b"\n"):
                return
            fh.truncate(data.rfind(b"\n") + 1)

    def append(self, line: bytes) -> None:
        if self.fh is None:
            self.open()
        assert self.fh is not None
        if self.size >= SEGMENT_BYTES:
            self.sync()
            self.fh.close()
            self.index += 1
            self.fh = open(self._path(), "ab")  # noqa: SIM115
            self.size = 0
        self.fh.write(line)
        self.size += len(line)

    def sync(self) -> None:
        if self.fh is not None:
            self.fh.flush()
            os.fsync(self.fh.fileno())

    def close(self) -> None:
        if self.fh is not None:
            self.sync()
            self.fh.close()
            self.fh = None


def archive_heads(archive: Path) -> dict[str, int]:
    """Last archived seq per ``tenant/stream`` (the archiver's dedupe state)."""
    return _heads(entry for entry, _where in read_archive(archive))


def partition_heads(archive: Path, partitions: Iterable[int]) -> dict[str, int]:
    """Last archived seq per ``tenant/stream`` in the segments of ``partitions``: what
    their previous holder appended, read again by the replica that takes them over."""
    wanted = set(partitions)
    return _heads(
        entry
        for tdir in tenant_dirs(archive)
        for p in sorted(wanted)
        for seg in segments(tdir, p)
        for entry, _where in _read_segment(tdir, seg)
    )


def _heads(entries: Iterable[dict[str, Any]]) -> dict[str, int]:
    heads: dict[str, int] = {}
    for entry in entries:
        seq = entry.get("seq")
        if isinstance(seq, int):
            key = f"{entry['tenant']}/{entry['stream']}"
            if seq > heads.get(key, 0):
                heads[key] = seq
    return heads
