"""Sealing (pure): what of a record stays clear, and AES-256-GCM over the rest.

A sealed event keeps clear only what routing, ordering and the hash chain need (id, tenant,
stream, type, occurred_at, schema_version; the sequencer adds seq, prev_hash, hash,
ingested_at, kafka); everything that can hold content (payload, agent, metadata, links,
security) is in ``sealed``. The associated data binds the ciphertext to the clear fields, so
sealed content moved onto another entry does not open. Tombstones stay clear: they hold a
keyed digest and ids, no content, and every reader must see them.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SEALED = "sealed"
FORMAT = 1
NONCE_BYTES = 12
# Fields of an event that stay clear when it is sealed (chain fields are added after).
CLEAR_FIELDS = frozenset({"id", "tenant", "stream", "type", "occurred_at", "schema_version"})
CLEAR_TYPES = frozenset({"memory.purge"})


class SealBroken(ValueError):
    """Sealed content that does not open under its key: altered, or moved to another record."""


def seal(key: bytes, aad: bytes, clear: Mapping[str, Any]) -> dict[str, Any]:
    """``clear`` as a sealed document ``{"v", "n", "c"}`` (nonce and ciphertext in base64)."""
    nonce = os.urandom(NONCE_BYTES)
    ct = AESGCM(key).encrypt(nonce, orjson.dumps(clear), aad)
    return {"v": FORMAT, "n": base64.b64encode(nonce).decode(), "c": base64.b64encode(ct).decode()}


def unseal(key: bytes, aad: bytes, sealed: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`seal` sealed; :class:`SealBroken` when it does not open."""
    try:
        if sealed.get("v") != FORMAT:
            raise SealBroken(f"unknown sealed format {sealed.get('v')!r}")
        nonce = base64.b64decode(sealed["n"], validate=True)
        ct = base64.b64decode(sealed["c"], validate=True)
        doc = orjson.loads(AESGCM(key).decrypt(nonce, ct, aad))
    except (InvalidTag, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, SealBroken):
            raise
        raise SealBroken(f"sealed content does not open ({type(exc).__name__})") from exc
    if not isinstance(doc, dict):
        raise SealBroken("sealed content is not an object")
    return doc


def event_aad(doc: Mapping[str, Any]) -> bytes:
    """What a sealed event's ciphertext is bound to."""
    return "|".join(str(doc.get(f)) for f in ("tenant", "stream", "id", "type")).encode()


def is_sealed(doc: Mapping[str, Any]) -> bool:
    return SEALED in doc


def needs_key(doc: Mapping[str, Any]) -> bool:
    """An event (as sent or as ledgered) whose content is sealed, or must be."""
    return doc.get("type") not in CLEAR_TYPES


def seal_event(doc: Mapping[str, Any], key: bytes) -> dict[str, Any]:
    """The event with its content sealed under ``key`` (an already sealed one unchanged)."""
    if is_sealed(doc) or not needs_key(doc):
        return dict(doc)
    clear = {k: v for k, v in doc.items() if k in CLEAR_FIELDS}
    content = {k: v for k, v in doc.items() if k not in CLEAR_FIELDS}
    return {**clear, SEALED: seal(key, event_aad(doc), content)}


def open_event(doc: Mapping[str, Any], key: bytes) -> dict[str, Any]:
    """The event with its content back in place (a clear one unchanged)."""
    if not is_sealed(doc):
        return dict(doc)
    content = unseal(key, event_aad(doc), doc[SEALED])
    clash = CLEAR_FIELDS.intersection(content)
    if clash:
        raise SealBroken(f"sealed content repeats clear fields {sorted(clash)}")
    out = {k: v for k, v in doc.items() if k != SEALED}
    out.update(content)
    return out
