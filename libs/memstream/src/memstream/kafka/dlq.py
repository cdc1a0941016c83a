"""Dead-letter records: reason, raw bytes and source coordinates."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

import orjson


def dead_letter(
    reason: str,
    raw: bytes | None,
    topic: str,
    partition: int,
    offset: int,
    component: str,
    now: datetime,
) -> bytes:
    """One DLQ value; the raw bytes travel base64-encoded so nothing is lost."""
    doc: dict[str, Any] = {
        "reason": reason,
        "raw_b64": base64.b64encode(raw).decode() if raw is not None else None,
        "source": {"topic": topic, "partition": partition, "offset": offset},
        "component": component,
        "at": now.isoformat(),
    }
    return orjson.dumps(doc)
