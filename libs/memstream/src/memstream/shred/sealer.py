"""Events as their producers write them: content sealed under each event's data key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from memstream.events import Event
from memstream.records.latent import LatentRecord
from memstream.shred.artifacts import is_deletion, seal_artifact
from memstream.shred.port import DataKeys
from memstream.shred.seal import needs_key, seal_event


class EventSealer:
    """Encodes events for ``memory.events.raw`` (and the API's outbox), sealed when a key
    store is given: the key is made before the first copy is written, so no copy of the
    content is ever written in the clear. Without one, plain JSON (sealing off)."""

    def __init__(self, keys: DataKeys | None) -> None:
        self.keys = keys

    def encode(self, events: Sequence[Event]) -> list[bytes]:
        """One value per event, in order; one key store round trip per tenant."""
        if self.keys is None:
            return [e.model_dump_json().encode() for e in events]
        docs: list[dict[str, Any]] = [e.model_dump(mode="json") for e in events]
        wanted: dict[str, list[str]] = {}
        for d in docs:
            if needs_key(d):
                wanted.setdefault(d["tenant"], []).append(d["id"])
        keys = {
            (tenant, i): k
            for tenant, ids in wanted.items()
            for i, k in self.keys.create_or_get(tenant, "event", ids).items()
        }
        out = []
        for d in docs:
            key = keys.get((d["tenant"], d["id"]))
            out.append(orjson.dumps(seal_event(d, key) if key is not None else d))
        return out


class ArtifactSealer:
    """Encodes latent artifacts and deletions for ``memory.latents``: artifacts sealed under
    their own data keys when a key store is given (deletions, ids only, stay clear)."""

    def __init__(self, keys: DataKeys | None) -> None:
        self.keys = keys

    def encode(self, records: Sequence[LatentRecord]) -> list[bytes]:
        """One value per record, in order; one key store round trip per tenant."""
        docs: list[dict[str, Any]] = [r.model_dump(mode="json") for r in records]
        if self.keys is None:
            return [orjson.dumps(d) for d in docs]
        wanted: dict[str, list[str]] = {}
        for d in docs:
            if not is_deletion(d):
                wanted.setdefault(d["tenant"], []).append(d["artifact_id"])
        keys = {
            (tenant, i): k
            for tenant, ids in wanted.items()
            for i, k in self.keys.create_or_get(tenant, "latent", ids).items()
        }
        # create_or_get returns every id asked: a missing key is our bug, never a clear copy
        return [
            orjson.dumps(d if is_deletion(d) else seal_artifact(d, keys[_ref(d)])) for d in docs
        ]


def _ref(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["tenant"], doc["artifact_id"]
