"""Counts per tenant/stream from the ledger topic (the authority), DLQ size."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import orjson

from memstream.kafka.reading import high_watermarks, read_to_end
from memstream.kafka.topics import DLQ, LEDGER
from memstream.ledger.purge import is_purged

# Ledger records are compact JSON; only records with this marker are parsed (see is_purged).
_PURGED_MARKER = b'"purged":{'


def _purged(value: bytes | None) -> bool:
    if value is None or _PURGED_MARKER not in value:
        return False
    try:
        doc: Any = orjson.loads(value)
    except orjson.JSONDecodeError:
        return False
    return isinstance(doc, dict) and is_purged(doc)


def count_entries(records: Iterable[tuple[bytes | None, bytes | None]]) -> dict[str, Any]:
    """``{t: {"events": N, "streams": M, "purged": P}}`` from ``(key, value)`` records.

    A purged entry still counts as an event (it keeps its place in the chain); ``purged``
    says how many of them had their content removed.
    """
    events: dict[str, int] = defaultdict(int)
    purged: dict[str, int] = defaultdict(int)
    streams: dict[str, set[str]] = defaultdict(set)
    for key, value in records:
        if not isinstance(key, bytes) or b"/" not in key:
            continue
        tenant, stream = key.decode().split("/", 1)
        events[tenant] += 1
        streams[tenant].add(stream)
        purged[tenant] += _purged(value)
    return {
        t: {"events": events[t], "streams": len(streams[t]), "purged": purged[t]}
        for t in sorted(events)
    }


def ledger_stats(bootstrap: str) -> dict[str, Any]:
    """``{"tenants": {t: {"events": N, "streams": M, "purged": P}}, "dlq": K}``."""
    return {
        "tenants": count_entries((m.key(), m.value()) for m in read_to_end(bootstrap, LEDGER)),
        "dlq": sum(high_watermarks(bootstrap, DLQ).values()),
    }
