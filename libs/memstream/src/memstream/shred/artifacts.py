"""Sealing latent artifacts (pure): what of a ``memory.latents`` record stays clear.

An artifact is text derived from events (its summary, the names and terms of its details,
its group key, which can be a subject's name, its centroid, its source refs), so every copy
on ``memory.latents`` is sealed under a data key of its own (kind ``"latent"``, one key per
artifact id: a stale re-send of an artifact seals under the same key). A purge destroys the
keys of every artifact built from a purged event, and a replay that re-reads the topic from
the start finds them unreadable.

Clear stay only ``artifact_id`` and ``tenant`` (the Kafka key is the tenant; readers find
the key by both and keep the last record of an id) and ``artifact_type`` (ids and a type
name, never content: an operator can count a dump's records by type without keys). Nothing
else is needed before opening: every reader opens a record before it looks at ``stale_at``
or anything else, so ``stale_at`` is sealed too. The associated data binds the ciphertext
to the three clear fields, so sealed content moved onto another record does not open.

``LatentDeletion`` records hold ids only (the artifact, the tombstone): they stay clear, and
every reader must see them even when the artifact's key is gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstream.shred.seal import SEALED, SealBroken, is_sealed, seal, unseal

CLEAR_FIELDS = frozenset({"artifact_id", "tenant", "artifact_type"})
# Only a deletion has this field (artifacts forbid unknown fields).
DELETION_FIELD = "deleted_by"


def artifact_aad(doc: Mapping[str, Any]) -> bytes:
    """What a sealed artifact's ciphertext is bound to (distinct from any event's)."""
    return "|".join(["latent", *(str(doc.get(f)) for f in sorted(CLEAR_FIELDS))]).encode()


def is_deletion(doc: Mapping[str, Any]) -> bool:
    return DELETION_FIELD in doc


def artifact_ref(doc: Mapping[str, Any]) -> tuple[str, str] | None:
    """(tenant, artifact id) of a sealed record, None when either is not a string (such a
    record cannot name its key: it does not open)."""
    tenant, aid = doc.get("tenant"), doc.get("artifact_id")
    return (tenant, aid) if isinstance(tenant, str) and isinstance(aid, str) else None


def seal_artifact(doc: Mapping[str, Any], key: bytes) -> dict[str, Any]:
    """The artifact (JSON mode) with its content sealed under ``key``; deletions and sealed
    records unchanged."""
    if is_sealed(doc) or is_deletion(doc):
        return dict(doc)
    clear = {k: v for k, v in doc.items() if k in CLEAR_FIELDS}
    content = {k: v for k, v in doc.items() if k not in CLEAR_FIELDS}
    return {**clear, SEALED: seal(key, artifact_aad(doc), content)}


def open_artifact(doc: Mapping[str, Any], key: bytes) -> dict[str, Any]:
    """The artifact with its content back in place (a clear record unchanged);
    :class:`SealBroken` when it does not open under ``key``."""
    if not is_sealed(doc):
        return dict(doc)
    extra = set(doc) - CLEAR_FIELDS - {SEALED}
    if extra:
        raise SealBroken(f"sealed artifact has clear fields {sorted(extra)}")
    sealed = doc[SEALED]
    if not isinstance(sealed, Mapping):
        raise SealBroken("sealed content is not an object")
    content = unseal(key, artifact_aad(doc), sealed)
    clash = CLEAR_FIELDS.intersection(content)
    if clash:
        raise SealBroken(f"sealed content repeats clear fields {sorted(clash)}")
    out = {k: v for k, v in doc.items() if k != SEALED}
    out.update(content)
    return out
