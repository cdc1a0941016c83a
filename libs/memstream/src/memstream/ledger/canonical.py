"""Canonical JSON and the entry hash."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

GENESIS_HASH = "0" * 64
# Kafka coordinates change when the ledger is restored into a new broker; they are not hashed.
UNHASHED_FIELDS = frozenset({"hash", "kafka"})


def canonical_json(obj: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8: the same object always gives the same bytes."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_UTC_Z)


def entry_hash(entry: dict[str, Any]) -> str:
    """SHA-256 over the canonical JSON of an entry without its unhashed fields."""
    body = {k: v for k, v in entry.items() if k not in UNHASHED_FIELDS}
    return hashlib.sha256(canonical_json(body)).hexdigest()
