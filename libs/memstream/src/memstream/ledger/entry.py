"""Ledger entries: the envelope plus seq, prev_hash, hash, ingested_at and Kafka coordinates."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from pydantic import AwareDatetime, BaseModel, Field, ValidationError

from memstream.events.envelope import EventAdapter
from memstream.ledger.canonical import canonical_json
from memstream.shred.seal import SEALED

# What build_entry adds to the envelope.
CHAIN_FIELDS = frozenset({"seq", "prev_hash", "hash", "ingested_at", "kafka"})


class _Chain(BaseModel):
    seq: int = Field(ge=1)
    prev_hash: str
    hash: str
    ingested_at: AwareDatetime


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


def validation_reason(exc: ValidationError) -> str:
    """The first few errors of ``exc`` as ``loc: message``, joined."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)


def entry_problem(entry: object) -> str | None:
    """Why ``entry`` is not a ledger entry the sequencer could have written, or None.

    The envelope is checked as stored, i.e. after redaction: a redacted value that no longer
    fits its payload type is a problem of that entry too.
    """
    if not isinstance(entry, dict):
        return f"not a JSON object but {type(entry).__name__}"
    try:
        _Chain.model_validate(entry)
        EventAdapter.validate_python({k: v for k, v in entry.items() if k not in CHAIN_FIELDS})
    except ValidationError as exc:
        return validation_reason(exc)
    return None


T = TypeVar("T")
# What Python raises when code indexes or converts a value of the wrong shape (pydantic's
# ValidationError is a ValueError). Our own code raises them too, so see decode_entry.
_SHAPE_ERRORS = (LookupError, TypeError, ValueError, AttributeError)


Opener = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Unreadable:
    """Why a record's bytes are no JSON document at all."""

    reason: str


def load_entry(raw: bytes | None) -> Any | Unreadable:
    """The record's JSON document (of any shape: :func:`read_loaded` judges it), parsed once."""
    if raw is None:
        return Unreadable("empty record (no value)")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return Unreadable(f"undecodable: {exc}")


def decode_entry(
    raw: bytes | None, read: Callable[[dict[str, Any]], T], opener: Opener | None = None
) -> T | str:
    """``read`` of a ledger record, or why the record itself cannot be read.

    ``opener`` opens a sealed entry first (see :class:`memstream.ledger.opening.EntryOpener`;
    one whose key was destroyed reads as purged); a sealed entry read without one is our
    bug, not the record's, and raises.

    An exception whose cause is not the record propagates: a bug in ``read`` must stop the
    loop before it commits (its traceback is logged, the loop restarts and retries, the lag
    grows) instead of sending every record to the DLQ. The exception type cannot tell the
    two apart (a KeyError may be a missing field or our typo); the record can: if it is a
    well-formed ledger entry, the failure is ours. Well-formed records are never validated
    twice: the check runs only when ``read`` failed.
    """
    return read_loaded(load_entry(raw), read, opener)


def read_loaded(
    entry: Any, read: Callable[[dict[str, Any]], T], opener: Opener | None = None
) -> T | str:
    """:func:`decode_entry` of what :func:`load_entry` gave (e.g. a batch parsed first, so
    that its data keys are read together: ``EntryOpener.for_batch``)."""
    if isinstance(entry, Unreadable):
        return entry.reason
    if isinstance(entry, dict) and SEALED in entry:
        if opener is None:
            raise RuntimeError("a sealed ledger entry read without a data key store")
        try:
            entry = opener(entry)
        except _SHAPE_ERRORS as exc:
            return f"sealed ledger entry does not open: {exc}"
    try:
        return read(entry)
    except _SHAPE_ERRORS as exc:
        problem = entry_problem(entry)
        if problem is None:
            raise
        return f"malformed ledger entry: {problem} ({exc!r})"
