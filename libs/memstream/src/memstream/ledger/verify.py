"""Walk a stream's entries and report the first broken link."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memstream.ledger.canonical import GENESIS_HASH, entry_hash


@dataclass(frozen=True)
class BrokenLink:
    tenant: str
    stream: str
    seq: int
    where: str
    reason: str

    def __str__(self) -> str:
        return f"{self.tenant}/{self.stream} seq {self.seq} ({self.where}): {self.reason}"


@dataclass
class ChainWalker:
    """Feeds entries of many streams in order; remembers each stream's head."""

    heads: dict[str, tuple[int, str]]

    def __init__(self) -> None:
        self.heads = {}
        self.entries = 0

    def check(self, entry: dict[str, Any], where: str) -> BrokenLink | None:
        tenant, stream = str(entry.get("tenant")), str(entry.get("stream"))
        seq = entry.get("seq")
        key = f"{tenant}/{stream}"
        last_seq, last_hash = self.heads.get(key, (0, GENESIS_HASH))
        self.entries += 1
        if not isinstance(seq, int):
            return BrokenLink(tenant, stream, -1, where, "entry has no integer seq")
        if seq != last_seq + 1:
            return BrokenLink(tenant, stream, seq, where, f"seq gap: expected {last_seq + 1}")
        if entry.get("prev_hash") != last_hash:
            return BrokenLink(tenant, stream, seq, where, "prev_hash does not match previous hash")
        if entry_hash(entry) != entry.get("hash"):
            return BrokenLink(tenant, stream, seq, where, "hash does not match entry content")
        self.heads[key] = (seq, str(entry["hash"]))
        return None


def verify_entries(entries: Iterable[tuple[dict[str, Any], str]]) -> BrokenLink | None:
    """Return the first broken link among ``(entry, location)`` pairs, or None."""
    walker = ChainWalker()
    for entry, where in entries:
        broken = walker.check(entry, where)
        if broken is not None:
            return broken
    return None
