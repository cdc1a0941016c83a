"""Ledger entries: the envelope plus seq, prev_hash, hash, ingested_at and Kafka coordinates."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict

from memstream.ledger.canonical import entry_hash

LEDGER_FIELDS = ("seq", "prev_hash", "hash", "ingested_at", "kafka")


class LedgerRef(BaseModel):
    """A citation of one ledger entry."""

    model_config = ConfigDict(frozen=True)
    tenant: str
    stream: str
    seq: int
    hash: str
    event_id: str


def build_entry(
    event: dict[str, Any],
    seq: int,
    prev_hash: str,
    ingested_at: datetime,
    kafka: dict[str, Any],
) -> dict[str, Any]:
    """Chain one (already redacted, JSON-mode) event after ``prev_hash``."""
    entry = dict(event)
    entry["seq"] = seq
    entry["prev_hash"] = prev_hash
    entry["ingested_at"] = ingested_at.isoformat().replace("+00:00", "Z")
    entry["hash"] = entry_hash(entry)
    entry["kafka"] = kafka
    return entry


def encode_entry(entry: dict[str, Any]) -> bytes:
    return orjson.dumps(entry)


def ref_of(entry: dict[str, Any]) -> LedgerRef:
    return LedgerRef(
        tenant=entry["tenant"],
        stream=entry["stream"],
        seq=entry["seq"],
        hash=entry["hash"],
        event_id=entry["id"],
    )
