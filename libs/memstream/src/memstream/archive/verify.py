"""``memstream verify``: walk the archive's hash chains."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memstream.archive.segments import read_archive
from memstream.ledger.verify import BrokenLink, ChainWalker


@dataclass(frozen=True)
class VerifyReport:
    entries: int
    streams: int
    broken: BrokenLink | None


def verify_archive(
    archive: Path, tenant: str | None = None, stream: str | None = None
) -> VerifyReport:
    """Check seq continuity, prev_hash links and every entry hash; stop at the first break."""
    walker = ChainWalker()
    for entry, where in read_archive(archive, tenant):
        if stream is not None and entry.get("stream") != stream:
            continue
        broken = walker.check(entry, where)
        if broken is not None:
            return VerifyReport(walker.entries, len(walker.heads), broken)
    return VerifyReport(walker.entries, len(walker.heads), None)
