"""``memstream verify``: walk the archive's hash chains."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memstream.archive.segments import read_archive
from memstream.ledger.verify import BrokenLink, ChainWalker, KeyGone


@dataclass(frozen=True)
class VerifyReport:
    entries: int
    streams: int
    broken: BrokenLink | None
    purged: int = 0  # entries whose content a tombstone removed (their links still hold)
    tombstones: int = 0  # memory.purge tombstones walked


def verify_archive(
    archive: Path,
    tenant: str | None = None,
    stream: str | None = None,
    key_gone: KeyGone | None = None,
) -> VerifyReport:
    """Check seq continuity, prev_hash links, every entry hash, and that every purged entry
    (content removed, or with ``key_gone``: its data key destroyed) is covered by a
    tombstone; stop at the first break."""
    walker = ChainWalker(key_gone=key_gone)
    broken: BrokenLink | None = None
    for entry, where in read_archive(archive, tenant):
        if stream is not None and entry.get("stream") != stream:
            walker.note_tombstone(entry)  # it may cover a purged entry of the stream checked
            continue
        broken = walker.check(entry, where)
        if broken is not None:
            break
    if broken is None:
        broken = walker.finish()
    return VerifyReport(
        walker.entries,
        len(walker.heads),
        broken,
        walker.purged,
        len(walker.tombstones),
    )
