"""Counts per tenant/stream from the ledger topic (the authority), DLQ size."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from memstream.kafka.reading import high_watermarks, read_to_end
from memstream.kafka.topics import DLQ, LEDGER


def ledger_stats(bootstrap: str) -> dict[str, Any]:
    """``{"tenants": {t: {"events": N, "streams": M}}, "dlq": K}``."""
    events: dict[str, int] = defaultdict(int)
    streams: dict[str, set[str]] = defaultdict(set)
    for m in read_to_end(bootstrap, LEDGER):
        key = m.key()
        if not isinstance(key, bytes) or b"/" not in key:
            continue
        tenant, stream = key.decode().split("/", 1)
        events[tenant] += 1
        streams[tenant].add(stream)
    return {
        "tenants": {t: {"events": events[t], "streams": len(streams[t])} for t in sorted(events)},
        "dlq": sum(high_watermarks(bootstrap, DLQ).values()),
    }
