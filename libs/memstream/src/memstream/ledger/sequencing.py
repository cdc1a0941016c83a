"""Pure sequencing: raw record + stream heads -> ledger entry, duplicate, or dead letter.

A record enters the ledger only when its producer proved a key (:mod:`memstream.proof`):
the shell authenticates each record before it fetches data keys for it, and
:func:`sequence` dead-letters an unproven one, or an event outside the proving key's scope.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError

from memstream.events.envelope import ID_PATTERN, TENANT_PATTERN, EventAdapter
from memstream.ledger.canonical import GENESIS_HASH
from memstream.ledger.entry import build_entry, validation_reason
from memstream.ledger.redact import redact
from memstream.proof import Proof, Proven, Unproven, admitted
from memstream.shred.seal import (
    CLEAR_FIELDS,
    SEALED,
    SealBroken,
    is_sealed,
    needs_key,
    open_event,
    seal_event,
)


@dataclass
class StreamHead:
    seq: int = 0
    hash: str = GENESIS_HASH
    seen: set[str] = field(default_factory=set)


@dataclass
class SequencerState:
    """Heads of the streams owned by one raw partition, rebuilt from the ledger on start."""

    heads: dict[str, StreamHead] = field(default_factory=dict)

    def observe(self, key: str, event_id: str, seq: int, hash_: str) -> None:
        """Account for an entry already in the ledger (state rebuild)."""
        head = self.heads.setdefault(key, StreamHead())
        head.seen.add(event_id)
        if seq > head.seq:
            head.seq, head.hash = seq, hash_


@dataclass(frozen=True)
class RawRecord:
    value: bytes | None
    partition: int
    offset: int
    topic: str
    proof: Proof | None = None  # what its headers claim (memstream.proof)


@dataclass(frozen=True)
class Sequenced:
    key: str
    entry: dict[str, Any]
    value: bytes  # the entry as written to the ledger


@dataclass(frozen=True)
class Duplicate:
    key: str
    event_id: str


@dataclass(frozen=True)
class DeadLetter:
    reason: str


@dataclass(frozen=True)
class Shredded:
    """An event whose data key is gone: a purge destroyed it before this copy was sequenced
    (an outbox re-send, say). Nothing of it can be read or ledgered."""

    key: str
    event_id: str


Outcome = Sequenced | Duplicate | DeadLetter | Shredded


# (tenant, event id) -> the event's data key, fetched by the shell for a whole batch.
Keys = Mapping[tuple[str, str], bytes]
_TENANT_RE, _ID_RE = re.compile(TENANT_PATTERN), re.compile(ID_PATTERN)
_AS_SENT_FIELDS = CLEAR_FIELDS | {SEALED}


def parse(record: RawRecord) -> Any | DeadLetter:
    """The record's JSON document, or why it has none."""
    if record.value is None:
        return DeadLetter("empty record (no value)")
    try:
        return orjson.loads(record.value)
    except orjson.JSONDecodeError as exc:
        return DeadLetter(f"undecodable: {exc}")


def key_ref(doc: Any) -> tuple[str, str] | None:
    """The (tenant, id) whose data key ``doc`` needs, when it names valid ones."""
    if not isinstance(doc, dict) or not needs_key(doc):
        return None
    tenant, eid = doc.get("tenant"), doc.get("id")
    if not (isinstance(tenant, str) and isinstance(eid, str)):
        return None
    return (tenant, eid) if _TENANT_RE.match(tenant) and _ID_RE.match(eid) else None


def _opened(
    as_sent: dict[str, Any], key: bytes | None, state: SequencerState
) -> Any | Duplicate | Shredded | DeadLetter:
    """An event that arrived sealed, opened to be validated; or a re-send of one already
    ledgered (its key may be gone since), one whose key a purge destroyed, or a seal that
    does not open."""
    stream, eid = f"{as_sent.get('tenant')}/{as_sent.get('stream')}", str(as_sent.get("id"))
    known = state.heads.get(stream)
    if known is not None and eid in known.seen:
        return Duplicate(stream, eid)
    if key is None:
        if key_ref(as_sent) is not None:
            return Shredded(stream, eid)
        return DeadLetter("sealed event without a valid tenant and id")
    try:
        return open_event(as_sent, key)
    except SealBroken as exc:
        return DeadLetter(str(exc))


def _body(
    doc: Any, as_sent: dict[str, Any] | None, key: bytes | None, paths: list[str]
) -> dict[str, Any]:
    """What the ledger keeps: the envelope as the client sent it (validated before;
    re-serialising the model would cost more than the whole rest of ``sequence``), redacted,
    and sealed under ``key``; a sealed event's ciphertext as it came when nothing is
    redacted in it."""
    if key is not None and (kept := _kept_sealed(as_sent, paths)) is not None:
        return kept  # opened to validate; its ciphertext is written as it came
    body = redact(doc, paths)
    return seal_event(body, key) if key is not None else body


def sequence(
    record: RawRecord,
    state: SequencerState,
    now: str,
    keys: Keys | None = None,
    doc: Any = None,
    seal: bool = False,
    proven: Proven | Unproven | None = None,
) -> Outcome:
    """Assign the next seq of the record's stream, or say why it cannot enter the ledger.

    ``now`` is the batch's ingestion time (see :func:`memstream.times.iso_utc`). With
    ``keys`` (see :func:`key_ref`) the entry's content is sealed under its data key, and an
    event that arrived sealed is opened first; ``doc`` is the record already parsed. With
    ``seal``, an event that arrived clear but whose key is absent was purged (no key is made
    again for a destroyed id): it is :class:`Shredded`, never ledgered in the clear.
    ``proven``: what :func:`memstream.proof.authenticate` found of the record (None: not
    checked, for callers that sequence their own records); an unproven record, or an event
    outside the proving key's scope, is a dead letter.
    Mutates ``state`` only when an entry is produced, so a dead letter changes nothing.
    """
    # Decode once and validate the decoded object: a second JSON parse of the same bytes
    # would cost a third of the sequencer's time per event.
    if doc is None:
        doc = parse(record)
    if isinstance(doc, DeadLetter):
        return doc
    if isinstance(proven, Unproven):
        return DeadLetter(proven.reason)
    key = keys.get(key_ref(doc) or ("", "")) if keys is not None else None
    as_sent = doc if isinstance(doc, dict) and is_sealed(doc) else None
    if as_sent is not None:
        doc = _opened(as_sent, key, state)
        if isinstance(doc, Duplicate | Shredded | DeadLetter):
            return doc
    try:
        event = EventAdapter.validate_python(doc)
    except ValidationError as exc:
        return DeadLetter("invalid envelope: " + validation_reason(exc))
    if proven is not None and (out := admitted(proven, event.user, event.agent, event.stream)):
        return DeadLetter(out.reason)
    stream = event.key
    known = state.heads.get(stream)
    if known is not None and event.id in known.seen:
        return Duplicate(stream, event.id)
    if seal and key is None and key_ref(doc) is not None:
        return Shredded(stream, event.id)
    head = state.heads.setdefault(stream, StreamHead())
    body = _body(doc, as_sent, key, event.security.redacted_paths)
    kafka = {"topic": record.topic, "partition": record.partition, "offset": record.offset}
    entry, value = build_entry(body, head.seq + 1, head.hash, now, kafka)
    head.seq, head.hash = entry["seq"], entry["hash"]
    head.seen.add(event.id)
    return Sequenced(stream, entry, value)


def _kept_sealed(
    as_sent: dict[str, Any] | None, redacted_paths: list[str]
) -> dict[str, Any] | None:
    """The event as it arrived sealed, when the ledger may keep that form: nothing to redact
    (redaction must change the content, so it is sealed again) and no field outside the seal
    but the clear ones (content sent beside the seal is moved into it by sealing again)."""
    if as_sent is None or redacted_paths or not as_sent.keys() <= _AS_SENT_FIELDS:
        return None
    return dict(as_sent)
