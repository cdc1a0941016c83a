"""What a purge leaves of a ledger entry, and how a tombstone names its subject.

A purged entry keeps its place in the hash chain (tenant, stream, seq, prev_hash, hash) and
the non-content fields every reader needs to skip it (id, type, times, Kafka coordinates);
its content (payload, agent, metadata, links) is gone and ``purged`` names the tombstone.
``verify`` checks the links around it and that a later ``memory.purge`` tombstone covers it:
that is how "purged" differs from "tampered". A tombstone carries the subject only as a
keyed digest and the purged entries only by id, so it holds no text of what it removes.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

PURGED = "purged"
# What stays of a purged entry: chain position and hash, and what readers need to skip it.
KEPT_FIELDS = frozenset(
    {
        "tenant",
        "stream",
        "seq",
        "prev_hash",
        "hash",
        "id",
        "type",
        "schema_version",
        "ingested_at",
        "kafka",
    }
)


def purged_form(entry: Mapping[str, Any], tombstone_id: str) -> dict[str, Any]:
    """``entry`` with its content removed, marked as purged by ``tombstone_id``."""
    kept = {k: v for k, v in entry.items() if k in KEPT_FIELDS}
    return {**kept, PURGED: {"by": tombstone_id}}


def is_purged(entry: Mapping[str, Any]) -> bool:
    """``entry`` had its content removed by a purge (see ``purged_form``)."""
    return PURGED in entry


def subject_digest(secret: bytes, tenant: str, subject_key: str) -> str:
    """How a tombstone names its subject: never the name itself, and keyed with the
    tenant's secret (kept outside the log), so that hashing a guessed name confirms
    nothing to whoever reads the ledger."""
    mac = hmac.new(secret, f"{tenant}|{subject_key}".encode(), hashlib.sha256)
    return "hmac-sha256:" + mac.hexdigest()
