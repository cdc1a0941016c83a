"""Purges in the archive: segment lines rewritten to their purged form, crash-safe.

Each tenant directory keeps ``purged.ids``: the ids a tombstone purged, with the tombstone's
id (ids only, no text). It is written before the segments are rewritten, so it is the intent
log of a purge: a crash mid-way is finished by applying it again (see :func:`apply_purges`),
and an entry archived after its tombstone (another partition lagging behind) is purged as it
is appended. Applying the same purges twice gives the same files.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from memstream.archive.segments import segments
from memstream.ledger.purge import is_purged, purged_form

PURGED_IDS = "purged.ids"
TMP_SUFFIX = ".tmp"
# Ledger entries are compact JSON (canonical from the sequencer, orjson from a restore), so a
# tombstone's top-level type reads exactly so; the parse below confirms it.
_TOMBSTONE_MARKER = b'"type":"memory.purge"'


@dataclass(frozen=True)
class Tombstone:
    tenant: str
    id: str
    event_ids: tuple[str, ...]


def read_tombstone(value: bytes) -> Tombstone | None:
    """The purge order a ledger record carries, or None when it is not a tombstone."""
    if _TOMBSTONE_MARKER not in value:
        return None
    try:
        doc: Any = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or doc.get("type") != "memory.purge" or is_purged(doc):
        return None
    payload, tenant, tid = doc.get("payload"), doc.get("tenant"), doc.get("id")
    ids = payload.get("event_ids") if isinstance(payload, dict) else None
    if not (isinstance(ids, list) and isinstance(tenant, str) and isinstance(tid, str)):
        return None
    return Tombstone(tenant, tid, tuple(i for i in ids if isinstance(i, str)))


def add_tombstone(purged: dict[str, str], tomb: Tombstone) -> bool:
    """Record ``tomb``'s ids in ``purged`` (id -> tombstone id); True if any was new.

    The first tombstone of an id stays its purger, so the order of arrival changes nothing.
    """
    new = False
    for eid in tomb.event_ids:
        if eid not in purged:
            purged[eid] = tomb.id
            new = True
    return new


def purge_line(line: bytes, purged: Mapping[str, str]) -> bytes | None:
    """The purged form of one archived line if ``purged`` names its entry, else None."""
    try:
        entry: Any = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(entry, dict) or is_purged(entry):
        return None
    eid = entry.get("id")
    by = purged.get(eid) if isinstance(eid, str) else None
    if by is None:
        return None
    return orjson.dumps(purged_form(entry, by)) + b"\n"


def replace_durably(path: Path, data: bytes) -> None:
    """Write ``path`` so that a crash leaves either the old or the new file, never a mix:
    a temp file in the same directory, fsync'd, renamed over, and the directory fsync'd."""
    tmp = path.with_name(f".{path.name}{TMP_SUFFIX}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load_purged(tenant_dir: Path) -> dict[str, str]:
    """The tenant's purged ids (id -> tombstone id); empty when nothing was purged."""
    path = tenant_dir / PURGED_IDS
    if not path.exists():
        return {}
    purged: dict[str, str] = {}
    for line in path.read_bytes().splitlines():
        eid, by = orjson.loads(line)
        purged[str(eid)] = str(by)
    return purged


def save_purged(tenant_dir: Path, purged: Mapping[str, str]) -> None:
    tenant_dir.mkdir(parents=True, exist_ok=True)
    lines = b"".join(orjson.dumps([eid, by]) + b"\n" for eid, by in sorted(purged.items()))
    replace_durably(tenant_dir / PURGED_IDS, lines)


def rewrite_segment(seg: Path, purged: Mapping[str, str]) -> int:
    """Replace the lines of ``seg`` that ``purged`` names by their purged form; how many.

    A torn last line (a crashed append) is dropped, as the segment writer would on open, so
    it cannot keep a purged entry's text. The file is left alone when nothing changes.
    """
    data = seg.read_bytes()
    lines = data.splitlines(keepends=True)
    torn = bool(lines) and not lines[-1].endswith(b"\n")
    if torn:
        lines.pop()
    changed = 0
    for i, line in enumerate(lines):
        new = purge_line(line, purged)
        if new is not None:
            lines[i] = new
            changed += 1
    if changed or torn:
        replace_durably(seg, b"".join(lines))
    return changed


def apply_purges(tenant_dir: Path, purged: Mapping[str, str]) -> int:
    """Bring every segment of one tenant in line with ``purged``; lines rewritten.

    Idempotent: lines already purged are left as they are. Temp files a crash left behind
    are removed (the segment they would have replaced is rewritten again).
    """
    for stale in tenant_dir.glob(f".*{TMP_SUFFIX}"):
        stale.unlink()
    if not purged:
        return 0
    return sum(rewrite_segment(seg, purged) for seg in segments(tenant_dir))
