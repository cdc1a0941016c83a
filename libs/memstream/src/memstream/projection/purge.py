"""How projectors read purges (pure): tombstones to obey, purged entries to skip.

A ``memory.purge`` tombstone is sequenced after the events it purges, so a projector that
writes a batch and then applies the batch's tombstones ends without the purged data, in a
live run and in a replay from the start alike. A purged entry (content removed, read after a
restore from the archive) is neither projected nor dead-lettered: there is nothing left of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memstream.events.payloads import MemoryPurgePayload
from memstream.ledger.purge import is_purged
from memstream.projection.extract import extract
from memstream.projection.progress import RawKey
from memstream.records.projected import Extraction

PURGE_TYPE = "memory.purge"


@dataclass(frozen=True)
class PurgeOrder:
    """One tombstone: the tenant's ledger events whose data every store drops."""

    tenant: str
    tombstone_id: str
    event_ids: tuple[str, ...]
    subject: str = ""  # the subject's keyed digest (``ledger.purge.subject_digest``)


class PurgeListeners:
    """What else a process forgets when its projection obeys a tombstone: an API's recent
    packets and cached summaries, which another API replica's purge cannot reach. Listeners
    are added once their holders exist (after the projection started)."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[PurgeOrder], object]] = []

    def add(self, listener: Callable[[PurgeOrder], object]) -> None:
        self._listeners.append(listener)

    def __call__(self, order: PurgeOrder) -> None:
        for listener in list(self._listeners):
            listener(order)


@dataclass
class Read:
    """What a ledger entry gives a projector: its extraction and/or a purge (neither when it
    was purged), and the tenant it belongs to (kept by a purged entry too)."""

    extraction: Extraction | None = None
    purge: PurgeOrder | None = None
    tenant: str | None = None  # None: the entry names none (``progress.applied_in`` checks it)


@dataclass
class Decoded:
    """A batch's ledger records: extractions to write, then purges to apply, in order."""

    extractions: list[Extraction] = field(default_factory=list)
    purges: list[PurgeOrder] = field(default_factory=list)
    skipped: int = 0  # purged entries
    # (epoch, tenant, raw partition) -> the highest raw offset among the entries read
    applied: dict[RawKey, int] = field(default_factory=dict)


def read_entry(entry: dict[str, Any], light: bool) -> Read:
    """The entry as a projector sees it (raises like ``extract`` on a malformed one)."""
    tenant = t if isinstance(t := entry.get("tenant"), str) else None
    if is_purged(entry):
        return Read(tenant=tenant)
    x = extract(entry, light=light)
    if entry["type"] != PURGE_TYPE:
        return Read(x, tenant=tenant)
    p = MemoryPurgePayload.model_validate(entry.get("payload") or {})
    ids = tuple(dict.fromkeys(p.event_ids))
    order = PurgeOrder(entry["tenant"], entry["id"], ids, p.subject)
    return Read(x, order, tenant)
