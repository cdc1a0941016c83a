"""What a purge does to the copies in Kafka topics, which it cannot delete from.

Sealed copies become unreadable when their data keys go: the events' keys (raw, ledger,
archive, the dead letters that copy them) and the keys of the checkout traces that name the
subject or cite what it reaches. Those traces are found by reading ``memory.checkouts`` from
its start (bounded by its retention) and opening each of the tenant's. Copies written in the
clear (a producer without the key store) cannot be made unreadable: a bounded scan of the raw
topic, the dead letters and the traces finds them, and the report says until when they may
remain.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from confluent_kafka import Message

from memstream.forget.purge import (
    RETENTION_NOTE,
    Residual,
    TopicReport,
    clear_event_reaches,
    trace_reaches,
)
from memstream.kafka.reading import read_to_end
from memstream.kafka.topics import CHECKOUTS, DLQ, LATENT_INPUTS, LEARNING, LEDGER, RAW
from memstream.settings import Settings
from memstream.shred.port import DataKeys
from memstream.shred.seal import is_sealed
from memstream.shred.traces import TraceOpener


@dataclass(frozen=True)
class Reach:
    """What one purge reaches, as the topic scans test it."""

    tenant: str
    forms: frozenset[str]  # the subject's name forms (text.names.name_forms)
    ids: Set[str]  # purged event, fact and latent ids


@dataclass
class Clear:
    """Clear copies found in one topic, and the newest time one was produced."""

    count: int = 0
    newest: datetime | None = None

    def add(self, m: Message) -> None:
        self.count += 1
        _kind, ms = m.timestamp()
        at = datetime.fromtimestamp(max(ms, 0) / 1000, UTC)
        self.newest = at if self.newest is None else max(self.newest, at)


@dataclass
class TraceScan:
    doomed: set[str] = field(default_factory=set)
    clear: Clear = field(default_factory=Clear)


def _doc(value: bytes | None) -> dict[str, Any] | None:
    try:
        doc = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def scan_traces(msgs: Iterable[Message], keys: DataKeys, reach: Reach) -> TraceScan:
    """The tenant's traces the purge reaches: the packet ids of sealed ones (to shred), and
    the clear ones (residual). A trace that does not open is nobody's to read: left alone."""
    opener, out = TraceOpener(keys), TraceScan()
    for m in msgs:
        doc = _doc(m.value())
        if doc is None or doc.get("tenant") != reach.tenant:
            continue
        packet = doc.get("packet_id")
        if not isinstance(packet, str) or packet in out.doomed:
            continue
        try:
            opened = opener(doc)
        except ValueError:
            continue
        if opened is None or not trace_reaches(opened, reach.forms, reach.ids):
            continue
        if is_sealed(doc):
            out.doomed.add(packet)
        else:
            out.clear.add(m)
    return out


def scan_raw(msgs: Iterable[Message], reach: Reach) -> Clear:
    """The tenant's events in ``memory.events.raw`` left in the clear that the purge reaches."""
    out = Clear()
    for m in msgs:
        doc = _doc(m.value())
        mine = doc is not None and doc.get("tenant") == reach.tenant
        if mine and doc is not None and clear_event_reaches(doc, reach.forms, reach.ids):
            out.add(m)
    return out


def scan_dead_letters(msgs: Iterable[Message], reach: Reach) -> Clear:
    """Dead letters whose copied bytes are one of the tenant's clear events (or traces) that
    the purge reaches. A copy that is no JSON object names no tenant: not counted."""
    out = Clear()
    for m in msgs:
        letter = _doc(m.value())
        raw = letter.get("raw_b64") if letter is not None else None
        if not isinstance(raw, str):
            continue
        try:
            doc = _doc(base64.b64decode(raw, validate=True))
        except (binascii.Error, ValueError):
            continue
        if doc is None or doc.get("tenant") != reach.tenant:
            continue
        reached = (
            trace_reaches(doc, reach.forms, reach.ids)
            if "packet_id" in doc
            else clear_event_reaches(doc, reach.forms, reach.ids)
        )
        if reached and not is_sealed(doc):
            out.add(m)
    return out


@dataclass(frozen=True)
class TopicsOutcome:
    traces_shredded: int
    topics: dict[str, TopicReport]
    residual: list[Residual]


def _residual(topic: str, found: Clear, retention_ms: int) -> Residual | None:
    if not found.count or found.newest is None:
        return None
    return Residual(
        topic=topic,
        count=found.count,
        until=found.newest + timedelta(milliseconds=max(retention_ms, 0)),
        note=RETENTION_NOTE,
    )


def purge_topics(
    bootstrap: str,
    settings: Settings,
    keys: DataKeys,
    reach: Reach,
    event_keys: int,
    recent_packets: Iterable[str],
) -> TopicsOutcome:
    """Shred the traces the purge reaches (``recent_packets``: the API's recent packets that
    name the subject, whose traces may not have reached the topic yet), and report per topic.
    Reads raw, the dead letters and the traces from their start: bounded by retention."""
    traces = scan_traces(read_to_end(bootstrap, CHECKOUTS), keys, reach)
    shredded = keys.destroy(reach.tenant, "packet", {*traces.doomed, *recent_packets})
    raw = scan_raw(read_to_end(bootstrap, RAW), reach)
    dead = scan_dead_letters(read_to_end(bootstrap, DLQ), reach)
    sealed = settings.seal
    topics = {
        RAW: TopicReport(sealed=sealed, keys_destroyed=event_keys),
        LEDGER: TopicReport(sealed=sealed, keys_destroyed=event_keys),
        # The learning records and the latent inputs are ledger entries copied as they are:
        # sealed under the same keys.
        LEARNING: TopicReport(sealed=sealed, keys_destroyed=event_keys),
        LATENT_INPUTS: TopicReport(sealed=sealed, keys_destroyed=event_keys),
        CHECKOUTS: TopicReport(sealed=sealed, keys_destroyed=shredded),
        DLQ: TopicReport(sealed=sealed, keys_destroyed=event_keys + shredded),
    }
    found = (
        (RAW, raw, settings.raw_retention_ms),
        (DLQ, dead, settings.dlq_retention_ms),
        (CHECKOUTS, traces.clear, settings.dlq_retention_ms),
    )
    residual = [r for t, c, ms in found if (r := _residual(t, c, ms)) is not None]
    return TopicsOutcome(shredded, topics, residual)
