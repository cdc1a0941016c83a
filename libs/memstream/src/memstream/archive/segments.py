"""Append-only segment files ``<archive>/<tenant>/<NNNNNNNN>.jsonl``.

Every line is one ledger entry as produced by the sequencer, so the per-stream hash chain
runs through the lines. A torn last line (crash mid-write) is ignored on read and truncated
by the next writer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

SEGMENT_BYTES = 64 * 1024 * 1024


def tenant_dirs(archive: Path) -> list[Path]:
    return sorted(p for p in archive.iterdir() if p.is_dir()) if archive.is_dir() else []


def segments(tenant_dir: Path) -> list[Path]:
    return sorted(tenant_dir.glob("*.jsonl"))


def read_tenant(tenant_dir: Path) -> Iterator[tuple[dict[str, Any], str]]:
    """Yield ``(entry, "file:line")`` in archive order; stop at a torn final line."""
    for seg in segments(tenant_dir):
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
    """Appends lines to the newest segment of one tenant, rolling at ``SEGMENT_BYTES``."""

    directory: Path
    fh: BinaryIO | None = None
    size: int = 0
    index: int = 0

    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        segs = segments(self.directory)
        self.index = int(segs[-1].stem) if segs else 1
        path = self.directory / f"{self.index:08d}.jsonl"
        self._truncate_torn_tail(path)
        self.fh = open(path, "ab")  # noqa: SIM115 - held open across batches
        self.size = self.fh.tell()

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
            self.fh = open(self.directory / f"{self.index:08d}.jsonl", "ab")  # noqa: SIM115
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
    heads: dict[str, int] = {}
    for entry, _where in read_archive(archive):
        seq = entry.get("seq")
        if isinstance(seq, int):
            key = f"{entry['tenant']}/{entry['stream']}"
            if seq > heads.get(key, 0):
                heads[key] = seq
    return heads
