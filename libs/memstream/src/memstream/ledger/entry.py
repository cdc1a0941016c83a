"""Ledger entries: the envelope plus seq, prev_hash, hash, ingested_at and Kafka coordinates."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from memstream.ledger.canonical import canonical_json


def build_entry(
    event: dict[str, Any],
    seq: int,
    prev_hash: str,
    ingested_at: str,
    kafka: dict[str, Any],
) -> tuple[dict[str, Any], bytes]:
    """Chain one (already redacted, JSON-mode) event after ``prev_hash``; mutates ``event``.

    Returns the entry and its encoded form: the canonical bytes that were hashed with
    ``hash`` and ``kafka`` appended, so the entry is serialised once, not twice.
    """
    event["seq"] = seq
    event["prev_hash"] = prev_hash
    event["ingested_at"] = ingested_at
    body = canonical_json(event)
    digest = hashlib.sha256(body).hexdigest()
    event["hash"] = digest
    event["kafka"] = kafka
    encoded = b"".join(
        (body[:-1], b',"hash":"', digest.encode(), b'","kafka":', orjson.dumps(kafka), b"}")
    )
    return event, encoded
