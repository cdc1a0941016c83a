"""How large a Kafka record an event can make on its way into the ledger (pure).

Accepted means producible: the edge (HTTP ingest, MCP ``remember``, the SDK) refuses an event
whose ledger record could exceed the broker's record limit, before anything of its batch is
produced. The ledger record is the largest copy an event ever makes: the raw record plus the
chain fields and headers the sequencer adds, with the content sealed (base64 grows it by a
third) when it arrived in the clear, and every redacted value replaced by a marker. The
bound here is an upper bound of that size, never an estimate: an event it admits always fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memstream.events import Event
from memstream.ledger.redact import REDACTED

# Kafka's record batch and record framing around one record (librdkafka counts 36-40 bytes
# for a lone record with headers; a broker counts the batch header of 61 bytes too).
RECORD_FRAMING = 128
HEADER_FRAMING = 8  # per header: two varint lengths
# What build_entry adds: seq (up to 20 digits), prev_hash and hash (64 hex each),
# ingested_at, and the Kafka coordinates of the raw record, with their JSON names.
CHAIN_BYTES = 400
# The ledger headers: event_id (an id of at most 128 characters), seq, hash, raw (the broker
# epoch and the raw offset, 20 digits each).
LEDGER_HEADER_BYTES = 8 + 128 + 3 + 20 + 4 + 64 + 3 + 41 + 4 * HEADER_FRAMING
# Sealing wraps the content in {"v":1,"n":<nonce>,"c":<ciphertext>}: fixed parts and the
# 16-byte GCM tag, before base64.
SEAL_FIXED = 64
GCM_TAG = 16
# A redacted value becomes the marker; the smallest value it replaces is one byte ("0").
REDACTION_GROWTH = len(REDACTED) + 2 - 1


def base64_len(n: int) -> int:
    return 4 * ((n + 2) // 3)


def record_size(key_len: int, value_len: int, header_bytes: int = 0) -> int:
    """What a broker's ``max.message.bytes`` counts for one record (an upper bound)."""
    return RECORD_FRAMING + key_len + value_len + header_bytes


def ledger_record_bound(key_len: int, value_len: int, *, sealed: bool, redactions: int) -> int:
    """The most bytes the ledger record of a raw record can take.

    ``value_len``: the raw value as produced. ``sealed``: it is sealed already (the sequencer
    re-seals the same content); otherwise the sequencer may seal it, so the whole value is
    counted as ciphertext. ``redactions``: the event's ``security.redacted_paths``.
    """
    growth = redactions * REDACTION_GROWTH
    if sealed:
        value = value_len + base64_len(growth) + 4
    else:
        value = SEAL_FIXED + base64_len(value_len + growth + GCM_TAG)
    return record_size(key_len, value + CHAIN_BYTES, LEDGER_HEADER_BYTES)


@dataclass(frozen=True)
class Oversized:
    """An event whose ledger record could pass the limit."""

    index: int
    event_id: str
    bound: int


def oversized(
    events: Sequence[Event], values: Sequence[bytes], limit: int, *, sealed: bool
) -> list[Oversized]:
    """The events of a batch (``values``: as produced) whose ledger record could pass
    ``limit``, in batch order."""
    out = []
    for i, (event, value) in enumerate(zip(events, values, strict=True)):
        redactions = len(event.security.redacted_paths)
        key_len = len(event.key.encode())
        bound = ledger_record_bound(key_len, len(value), sealed=sealed, redactions=redactions)
        if bound > limit:
            out.append(Oversized(i, event.id, bound))
    return out


def refusal(found: list[Oversized], limit: int, batch: bool) -> str:
    """The 413's detail: the first event that can never fit, the limit, and how many more."""
    first = found[0]
    where = f"events[{first.index}]" if batch else "event"
    more = f" (and {len(found) - 1} more such event(s))" if len(found) > 1 else ""
    return (
        f"{where} (id {first.event_id}) would make a ledger record of up to {first.bound} "
        f"bytes, over the broker's record limit of {limit} bytes{more}; nothing was accepted: "
        "keep large content out of the event (store it elsewhere and send its reference)"
    )
