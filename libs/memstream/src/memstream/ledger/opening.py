"""Opening sealed ledger entries for a reader, and the key store a process uses."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memstream.ledger.purge import purged_form
from memstream.settings import Settings
from memstream.shred.artifacts import artifact_ref
from memstream.shred.factory import open_data_keys
from memstream.shred.port import DataKeys
from memstream.shred.seal import is_sealed, open_event

# What a purged entry names as its purger when only its destroyed key tells it was purged.
SHREDDED = "data key destroyed"


class EntryOpener:
    """Opens sealed entries through the key store; an entry whose key is gone reads as
    purged (:func:`memstream.ledger.purge.is_purged`), so readers skip it like any purged
    entry. No key is cached: a replay that starts after a purge must not open what it purged.
    A sealed entry that does not open raises :class:`memstream.shred.seal.SealBroken` (a
    ``ValueError``: a problem of the record, see ``decode_entry``)."""

    def __init__(self, keys: DataKeys | None) -> None:
        self.keys = keys

    def __call__(self, entry: dict[str, Any]) -> dict[str, Any]:
        return self._open(entry, None)

    def for_batch(self, docs: Iterable[Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """An opener of ``docs`` (parsed records of one batch) that reads their keys in one
        key store round trip per tenant instead of one per entry; it opens exactly as this
        opener does, and holds the keys only as long as the caller holds it (one batch)."""
        wanted: dict[str, list[str]] = {}
        for doc in docs:
            if isinstance(doc, dict) and is_sealed(doc):
                tenant, eid = doc.get("tenant"), doc.get("id")
                if isinstance(tenant, str) and isinstance(eid, str):
                    wanted.setdefault(tenant, []).append(eid)
        if not wanted or self.keys is None:
            return self
        found = {
            (tenant, eid): key
            for tenant, ids in wanted.items()
            for eid, key in self.keys.get(tenant, "event", ids).items()
        }
        return lambda entry: self._open(entry, found)

    def _open(
        self, entry: dict[str, Any], found: Mapping[tuple[str, str], bytes] | None
    ) -> dict[str, Any]:
        """``found``: the keys read beforehand of the batch's well-formed sealed entries."""
        if not is_sealed(entry):
            return entry
        tenant, eid = entry["tenant"], entry["id"]
        if self.keys is None:
            raise ValueError("sealed entry, and this process has no data key store")
        if found is not None and isinstance(tenant, str) and isinstance(eid, str):
            key = found.get((tenant, eid))
        else:
            key = self.keys.get(tenant, "event", [eid]).get(eid)
        if key is None:
            return purged_form(entry, SHREDDED)
        return open_event(entry, key)

    def artifact_keys(self, docs: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], bytes]:
        """The keys of the sealed ``memory.latents`` records among ``docs`` (one key store
        round trip per tenant), by (tenant, artifact id); a destroyed key is absent, and the
        record reads as deleted (see :mod:`memstream.shred.artifacts`)."""
        wanted: dict[str, list[str]] = {}
        for doc in docs:
            ref = artifact_ref(doc) if is_sealed(doc) else None
            if ref is not None:
                wanted.setdefault(ref[0], []).append(ref[1])
        if not wanted:
            return {}
        if self.keys is None:
            raise ValueError("sealed artifact, and this process has no data key store")
        return {
            (tenant, aid): key
            for tenant, ids in wanted.items()
            for aid, key in self.keys.get(tenant, "latent", ids).items()
        }


def data_keys(settings: Settings) -> DataKeys | None:
    """The key store of this deployment; None when sealing is off (``MEMSTREAM_SEAL=false``,
    the same build without it, for cost comparisons; entries sealed before still open)."""
    if not settings.seal:
        return None
    return open_data_keys(settings)


def reading_keys(settings: Settings) -> DataKeys:
    """The key store a reader opens entries with: even with sealing off, entries sealed
    earlier must open (or read as purged)."""
    return open_data_keys(settings)
