"""Events as their producers write them: content sealed under each event's data key."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from memstream.events import Event
from memstream.records.latent import LatentRecord
from memstream.shred.artifacts import is_deletion, seal_artifact
from memstream.shred.port import DataKeys, KeyKind, SealingKeys
from memstream.shred.seal import needs_key, seal_event


class KeyDestroyed(ValueError):
    """Events whose ids a purge shredded: their content can never be written again (the
    ledger keeps the sealed first copy, and no new key is made for a destroyed id)."""

    def __init__(self, refs: Sequence[tuple[str, str]]) -> None:
        self.refs = list(refs)
        shown = ", ".join(i for _, i in self.refs[:5])
        more = f" and {len(self.refs) - 5} more" if len(self.refs) > 5 else ""
        super().__init__(
            f"event id(s) {shown}{more} were purged: their data keys are destroyed, and an "
            "event is never written again under a purged id; send new content with a new id"
        )


class EventSealer:
    """Encodes events for ``memory.events.raw`` (and the API's outbox), sealed when a key
    store is given: the key is made before the first copy is written, so no copy of the
    content is ever written in the clear. Without one, plain JSON (sealing off)."""

    def __init__(self, keys: SealingKeys | None) -> None:
        self.keys = keys

    def encode(self, events: Sequence[Event]) -> list[bytes]:
        """One value per event, in order; one key store round trip per tenant.
        :class:`KeyDestroyed` (nothing encoded) when a purge destroyed the key of any."""
        values = self._encode(events)
        purged = [(e.tenant, e.id) for e, v in zip(events, values, strict=True) if v is None]
        if purged:
            raise KeyDestroyed(purged)
        return [v for v in values if v is not None]

    def encode_live(self, events: Sequence[Event]) -> list[tuple[Event, bytes]]:
        """The events that may still be written, with their values: a purged id is left out
        (a derived event built again from what a purge reached is not written again)."""
        values = self._encode(events)
        return [(e, v) for e, v in zip(events, values, strict=True) if v is not None]

    def _encode(self, events: Sequence[Event]) -> list[bytes | None]:
        if self.keys is None:
            return [e.model_dump_json().encode() for e in events]
        docs: list[dict[str, Any]] = [e.model_dump(mode="json") for e in events]
        return _sealed(self.keys, "event", docs, _event_id, seal_event)


class ArtifactSealer:
    """Encodes latent artifacts and deletions for ``memory.latents``: artifacts sealed under
    their own data keys when a key store is given (deletions, ids only, stay clear)."""

    def __init__(self, keys: DataKeys | None) -> None:
        self.keys = keys

    def encode(self, records: Sequence[LatentRecord]) -> list[bytes | None]:
        """One value per record, in order; one key store round trip per tenant. ``None``
        for an artifact whose key a purge destroyed: it was built from purged events (its
        builder had not yet seen the purge) and is never written again."""
        docs: list[dict[str, Any]] = [r.model_dump(mode="json") for r in records]
        if self.keys is None:
            return [orjson.dumps(d) for d in docs]
        return _sealed(self.keys, "latent", docs, _artifact_id, seal_artifact)


def _event_id(doc: dict[str, Any]) -> str | None:
    return str(doc["id"]) if needs_key(doc) else None  # a tombstone stays clear


def _artifact_id(doc: dict[str, Any]) -> str | None:
    return None if is_deletion(doc) else str(doc["artifact_id"])  # a deletion stays clear


def _sealed(
    store: SealingKeys,
    kind: KeyKind,
    docs: Sequence[dict[str, Any]],
    key_id: Callable[[dict[str, Any]], str | None],
    seal: Callable[[dict[str, Any], bytes], dict[str, Any]],
) -> list[bytes | None]:
    """Each doc as written: sealed under the key of ``key_id(doc)`` (one key store round
    trip per tenant), clear where that is None, and None where a purge destroyed the key."""
    ids = [key_id(d) for d in docs]
    wanted: dict[str, list[str]] = {}
    for d, i in zip(docs, ids, strict=True):
        if i is not None:
            wanted.setdefault(d["tenant"], []).append(i)
    keys = {
        (tenant, i): k
        for tenant, asked in wanted.items()
        for i, k in store.create_or_get(tenant, kind, asked).items()
    }
    out: list[bytes | None] = []
    for d, i in zip(docs, ids, strict=True):
        if i is None:
            out.append(orjson.dumps(d))
            continue
        key = keys.get((d["tenant"], i))
        out.append(None if key is None else orjson.dumps(seal(d, key)))
    return out
