"""Checkout traces (``memory.checkouts``) sealed under a key per packet: one rule for the
API that writes them and every reader (the retrospective, a purge looking for them).

A sealed trace keeps clear only what routes it without opening: the tenant, the packet id
and the task id. The question, its family and the cited ids are sealed under the packet's
data key (kind ``"packet"``); a purge that destroys the key leaves the trace unreadable,
and a reader skips it as if it had never been written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from memstream.shred.port import DataKeys
from memstream.shred.seal import SEALED, SealBroken, is_sealed, seal, unseal

TRACE_CLEAR_FIELDS = frozenset({"tenant", "packet_id", "task_id"})


def trace_aad(doc: Mapping[str, Any]) -> bytes:
    """What a sealed trace's ciphertext is bound to (the kind keeps it apart from events)."""
    return "|".join(("trace", str(doc.get("tenant")), str(doc.get("packet_id")))).encode()


def seal_trace(doc: Mapping[str, Any], key: bytes) -> dict[str, Any]:
    """The trace with everything but its clear fields sealed under ``key``."""
    if is_sealed(doc):
        return dict(doc)
    clear = {k: v for k, v in doc.items() if k in TRACE_CLEAR_FIELDS}
    content = {k: v for k, v in doc.items() if k not in TRACE_CLEAR_FIELDS}
    return {**clear, SEALED: seal(key, trace_aad(doc), content)}


def open_trace(doc: Mapping[str, Any], key: bytes) -> dict[str, Any]:
    """The trace with its content back in place (a clear one unchanged); ``SealBroken``
    when it does not open."""
    if not is_sealed(doc):
        return dict(doc)
    content = unseal(key, trace_aad(doc), doc[SEALED])
    clash = TRACE_CLEAR_FIELDS.intersection(content)
    if clash:
        raise SealBroken(f"sealed trace repeats clear fields {sorted(clash)}")
    out = {k: v for k, v in doc.items() if k != SEALED}
    out.update(content)
    return out


class TraceSealer:
    """Encodes a trace for ``memory.checkouts``: sealed when a key store is given (the key is
    made before the trace is written), plain JSON without one (sealing off)."""

    def __init__(self, keys: DataKeys | None) -> None:
        self.keys = keys

    def encode(self, doc: Mapping[str, Any]) -> bytes | None:
        """The value to write; ``None`` when a purge destroyed the packet's key before its
        trace was written (the packet cited purged content: it is never written)."""
        if self.keys is None:
            return orjson.dumps(doc)
        tenant, packet = str(doc["tenant"]), str(doc["packet_id"])
        key = self.keys.create_or_get(tenant, "packet", [packet]).get(packet)
        return None if key is None else orjson.dumps(seal_trace(doc, key))


class TraceOpener:
    """Opens sealed traces through the key store: ``None`` when the packet's key is gone (a
    purge destroyed it: the trace is skipped, never dead-lettered). A clear trace is returned
    as it is. ``SealBroken`` (a ``ValueError``) when a sealed trace does not open: a problem
    of the record. No key is cached, so a trace purged meanwhile never opens again."""

    def __init__(self, keys: DataKeys) -> None:
        self.keys = keys

    def __call__(self, doc: Mapping[str, Any]) -> dict[str, Any] | None:
        if not is_sealed(doc):
            return dict(doc)
        tenant, packet = doc.get("tenant"), doc.get("packet_id")
        if not isinstance(tenant, str) or not isinstance(packet, str):
            raise SealBroken("sealed trace without a tenant and packet id")
        key = self.keys.get(tenant, "packet", [packet]).get(packet)
        return None if key is None else open_trace(doc, key)
