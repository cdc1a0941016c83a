"""Walk a stream's entries and report the first broken link.

A purged entry (see :mod:`memstream.ledger.purge`) is checked for its place in the chain
(seq, ``prev_hash``, and the next entry's ``prev_hash`` against its kept ``hash``) but its
content hash cannot be recomputed: it is accepted only when a ``memory.purge`` tombstone of
its tenant lists its id. The tombstone comes later and may sit in another stream, so that
coverage is checked after the walk (:meth:`ChainWalker.finish`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from memstream.ledger.canonical import GENESIS_HASH, entry_hash
from memstream.ledger.purge import is_purged
from memstream.shred.seal import SEALED

UNCOVERED = "content removed without a purge tombstone"
SHREDDED_UNCOVERED = "data key destroyed without a purge tombstone"
# (tenant, event id) -> the entry's data key is gone (see memstream.shred)
KeyGone = Callable[[str, str], bool]


@dataclass(frozen=True)
class BrokenLink:
    tenant: str
    stream: str
    seq: int
    where: str
    reason: str

    def __str__(self) -> str:
        return f"{self.tenant}/{self.stream} seq {self.seq} ({self.where}): {self.reason}"


def tombstone_ids(entry: dict[str, Any]) -> list[str] | None:
    """The ids a ``memory.purge`` entry purges, or None when it is not an intact tombstone."""
    if entry.get("type") != "memory.purge" or is_purged(entry):
        return None
    payload = entry.get("payload")
    ids = payload.get("event_ids") if isinstance(payload, dict) else None
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else None


@dataclass
class ChainWalker:
    """Feeds entries of many streams in order; remembers each stream's head."""

    heads: dict[str, tuple[int, str]] = field(default_factory=dict)
    entries: int = 0
    # Purged entries waiting for a tombstone: (tenant, id) -> where it would break.
    uncovered: dict[tuple[str, str], BrokenLink] = field(default_factory=dict)
    covered: set[tuple[str, str]] = field(default_factory=set)
    purged: int = 0
    tombstones: set[tuple[str, str]] = field(default_factory=set)
    # With the key store: a sealed entry whose key is gone is purged (crypto-shredded); its
    # hash still holds, and a tombstone must cover it like any purged entry.
    key_gone: KeyGone | None = None

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
        if is_purged(entry):
            self.purged += 1
            eid = (tenant, str(entry.get("id")))
            if eid not in self.covered:
                self.uncovered[eid] = BrokenLink(tenant, stream, seq, where, UNCOVERED)
        elif entry_hash(entry) != entry.get("hash"):
            return BrokenLink(tenant, stream, seq, where, "hash does not match entry content")
        elif self._shredded(tenant, entry):
            self.purged += 1
            eid = (tenant, str(entry.get("id")))
            if eid not in self.covered:
                self.uncovered[eid] = BrokenLink(tenant, stream, seq, where, SHREDDED_UNCOVERED)
        else:
            self.note_tombstone(entry)
        self.heads[key] = (seq, str(entry.get("hash")))
        return None

    def _shredded(self, tenant: str, entry: dict[str, Any]) -> bool:
        if self.key_gone is None or SEALED not in entry:
            return False
        return self.key_gone(tenant, str(entry.get("id")))

    def note_tombstone(self, entry: dict[str, Any]) -> None:
        """Count what a tombstone covers; only an intact one (its hash holds) covers anything.

        Also called for tombstones of streams a filtered walk does not check.
        """
        ids = tombstone_ids(entry)
        if ids is None or entry_hash(entry) != entry.get("hash"):
            return
        tenant = str(entry.get("tenant"))
        self.tombstones.add((tenant, str(entry.get("id"))))
        for eid in ids:
            self.covered.add((tenant, eid))
            self.uncovered.pop((tenant, eid), None)

    def finish(self) -> BrokenLink | None:
        """After the walk: the first purged entry no tombstone covers, or None."""
        return next(iter(self.uncovered.values()), None)


def verify_entries(
    entries: Iterable[tuple[dict[str, Any], str]], key_gone: KeyGone | None = None
) -> BrokenLink | None:
    """Return the first broken link among ``(entry, location)`` pairs, or None."""
    walker = ChainWalker(key_gone=key_gone)
    for entry, where in entries:
        broken = walker.check(entry, where)
        if broken is not None:
            return broken
    return walker.finish()
