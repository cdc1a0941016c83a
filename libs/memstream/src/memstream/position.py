"""A write's position (pure): what was accepted, as an opaque token a later read waits for.

A position names, per raw partition, the highest raw offset among the accepted records, with
the tenant and the broker epoch (an embedded broker that restarts starts a new log). It stays
a few hundred bytes whatever the batch size: one entry per partition written to.

Token forms (clients must not parse them):
- ``ms1.<body>.<mac>``: signed. ``mac`` is the first 16 bytes of HMAC-SHA256 over
  ``ms1.<body>`` under a key derived from the tenant's secret (the one the purge digest uses),
  so positions and purge digests never share a key.
- ``ms1u.<body>``: unsigned, made where no secret is at hand (an SDK without data keys).

``body`` is base64url (no padding) of compact JSON. The body is not encrypted: it reveals raw
offsets. :func:`read` gives the tenant before any MAC is checked, so a token from another
tenant is told apart from a forged or damaged one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from memstream.events.envelope import TENANT_PATTERN
from memstream.wire import POSITION_MAX_LENGTH, POSITION_PATTERN

VERSION = 1
MAX_LENGTH = POSITION_MAX_LENGTH
MAC_BYTES = 16
SIGNED, UNSIGNED = "ms1", "ms1u"
KEY_LABEL = b"memstream-position"
MAX_OFFSET = 2**63 - 1  # Kafka offsets are signed 64-bit

# fullmatch, not the pattern's ``$``: Python's ``$`` also matches before a final newline.
_TOKEN_RE = re.compile(POSITION_PATTERN.strip("^$"))
_TENANT_RE = re.compile(TENANT_PATTERN.strip("^$"))
_EPOCH_RE = re.compile(r"[0-9]{0,20}")  # wall ns of the broker's start, or "" (no broker)
_PARTITION_RE = re.compile(r"0|[1-9][0-9]{0,5}")
_RAW_HEADER_RE = re.compile(rb"([0-9]{0,20}):(0|[1-9][0-9]{0,18})")
_KEYS = frozenset({"v", "t", "e", "r", "s", "u"})
RAW_HEADER = "raw"  # the ledger header naming an entry's raw record (see raw_header)


def raw_header(epoch: str, offset: int) -> bytes:
    """The ``raw`` header of a ledger entry, ``<epoch>:<offset>``: where its raw record was
    in which broker's log, so a projection can tell how far into a write's position it has
    applied. Entries restored from the archive carry none: they name no offset of this log."""
    if not _EPOCH_RE.fullmatch(epoch) or not _whole(offset, 0, MAX_OFFSET):
        raise ValueError(f"no raw header for epoch {epoch!r} and offset {offset!r}")
    return f"{epoch}:{offset}".encode()


def read_raw_header(value: bytes | None) -> tuple[str, int] | None:
    """``(epoch, raw offset)`` of a ``raw`` header; None when it is absent or not one (a
    ledger record is data: reading it never raises)."""
    found = _RAW_HEADER_RE.fullmatch(value) if isinstance(value, bytes) else None
    if found is None or int(found[2]) > MAX_OFFSET:
        return None
    return found[1].decode(), int(found[2])


class PositionError(ValueError):
    """A token that cannot be used as a position."""


class MalformedPosition(PositionError):
    """Not a memstream position: damaged, forged, of an unknown version, or badly signed."""


class ForeignPosition(PositionError):
    """A well-formed position issued for another tenant (found before any MAC check)."""

    def __init__(self, issued_for: str, bound_to: str) -> None:
        super().__init__(
            f"position was issued for tenant {issued_for!r}, but the caller is bound to"
            f" tenant {bound_to!r}"
        )
        self.issued_for, self.bound_to = issued_for, bound_to


@dataclass(frozen=True)
class Position:
    """What one write accepted. ``raw``: partition -> highest raw offset of its acknowledged
    records. ``segment``: the outbox segment the write was spooled to (None: no outbox).
    ``unacknowledged``: some records had no broker acknowledgement when the write was
    answered, so their offsets are not in ``raw`` (the outbox segment holds them)."""

    tenant: str
    epoch: str
    raw: Mapping[int, int] = field(default_factory=dict)
    segment: int | None = None
    unacknowledged: bool = False

    def __post_init__(self) -> None:
        problem = _invalid(self)
        if problem is not None:
            raise ValueError(problem)
        object.__setattr__(self, "raw", dict(self.raw))  # the caller's dict may change later


class Acknowledged:
    """Delivery reports of one write as they arrive, from any thread: per raw partition the
    highest acknowledged offset, and how many records were acknowledged."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._raw: dict[int, int] = {}
        self._count = 0

    def add(self, partition: int, offset: int) -> None:
        with self._lock:
            self._count += 1
            if offset > self._raw.get(partition, -1):
                self._raw[partition] = offset

    def snapshot(self) -> tuple[dict[int, int], int]:
        """``(partition -> highest offset, acknowledged count)`` so far."""
        with self._lock:
            return dict(self._raw), self._count


def _invalid(pos: Position) -> str | None:
    """Why ``pos`` cannot be a position (the same rule for encoding and decoding), or None."""
    if not isinstance(pos.tenant, str) or not _TENANT_RE.fullmatch(pos.tenant):
        return "invalid tenant"
    if not isinstance(pos.epoch, str) or not _EPOCH_RE.fullmatch(pos.epoch):
        return "invalid epoch"
    for p, o in pos.raw.items():
        if not _whole(p, 0, 999_999) or not _whole(o, 0, MAX_OFFSET):
            return "invalid partition offset"
    if pos.segment is not None and not _whole(pos.segment, 0, MAX_OFFSET):
        return "invalid segment"
    if not isinstance(pos.unacknowledged, bool):
        return "invalid acknowledgement flag"
    return None


def _whole(value: object, lo: int, hi: int) -> bool:
    # bool is an int in Python; JSON true is no offset.
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


def position_key(tenant_secret: bytes) -> bytes:
    """The tenant's key for positions, derived from its secret (kept apart from purge digests)."""
    return hmac.new(tenant_secret, KEY_LABEL, hashlib.sha256).digest()


def _mac(tenant_secret: bytes, signed_part: str) -> bytes:
    key = position_key(tenant_secret)
    return hmac.new(key, signed_part.encode(), hashlib.sha256).digest()[:MAC_BYTES]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    """base64url without padding, canonical only: one body has one spelling."""
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise MalformedPosition("not a memstream position (bad base64)") from exc
    if _b64(data) != text:
        raise MalformedPosition("not a memstream position (bad base64)")
    return data


def encode(pos: Position, tenant_secret: bytes | None) -> str:
    """``pos`` as a token: signed with the tenant's secret, or unsigned without one."""
    body = {
        "v": VERSION,
        "t": pos.tenant,
        "e": pos.epoch,
        "r": {str(p): o for p, o in sorted(pos.raw.items())},
        "s": pos.segment,
        "u": pos.unacknowledged,
    }
    text = _b64(orjson.dumps(body))
    if tenant_secret is None:
        token = f"{UNSIGNED}.{text}"
    else:
        token = f"{SIGNED}.{text}.{_b64(_mac(tenant_secret, f'{SIGNED}.{text}'))}"
    if len(token) > MAX_LENGTH:  # only past ~20 partitions written at once
        raise ValueError(f"position of {len(pos.raw)} partitions exceeds {MAX_LENGTH} characters")
    return token


def encode_write(pos: Position, tenant_secret: bytes | None) -> str:
    """The token a write answers: :func:`encode`, except that a position naming more
    partitions than a token holds (a raw topic of over 16 partitions, all written at once)
    leaves its offsets out and is marked unacknowledged. A read then waits for the outbox
    segment, or warns at once without one: the write was accepted, its answer must not fail."""
    try:
        return encode(pos, tenant_secret)
    except ValueError:
        if len(encode(Position(pos.tenant, pos.epoch, {}, pos.segment), None)) > MAX_LENGTH:
            raise  # not the partitions: a bug
    return encode(Position(pos.tenant, pos.epoch, {}, pos.segment, True), tenant_secret)


@dataclass(frozen=True)
class Read:
    """A token taken apart, its MAC not yet checked: the tenant to compare, then :func:`verify`."""

    position: Position
    signed_part: str
    mac: bytes | None  # None: an unsigned token


def read(token: object) -> Read:
    """Take ``token`` apart without checking its MAC; :class:`MalformedPosition` otherwise."""
    if not isinstance(token, str) or len(token) > MAX_LENGTH or not _TOKEN_RE.fullmatch(token):
        raise MalformedPosition("not a memstream position")
    prefix, _, rest = token.partition(".")
    body_text, _, mac_text = rest.partition(".")
    if (prefix == SIGNED) != bool(mac_text):
        raise MalformedPosition("not a memstream position (signature missing or unexpected)")
    mac = _unb64(mac_text) if mac_text else None
    if mac is not None and len(mac) != MAC_BYTES:
        raise MalformedPosition("not a memstream position (bad signature)")
    return Read(_body(_unb64(body_text)), f"{prefix}.{body_text}", mac)


def _body(data: bytes) -> Position:
    try:
        doc: Any = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise MalformedPosition("not a memstream position (bad body)") from exc
    if not isinstance(doc, dict) or set(doc) != _KEYS or not _whole(doc["v"], VERSION, VERSION):
        raise MalformedPosition("not a memstream position (unknown version)")
    raw = doc["r"]
    if not isinstance(raw, dict) or not all(_PARTITION_RE.fullmatch(p) for p in raw):
        raise MalformedPosition("not a memstream position (bad body)")
    try:
        return Position(doc["t"], doc["e"], {int(p): o for p, o in raw.items()}, doc["s"], doc["u"])
    except ValueError as exc:
        raise MalformedPosition(f"not a memstream position ({exc})") from exc


def verify(token: object, tenant: str, tenant_secret: bytes) -> Position:
    """The position ``token`` names, for a caller bound to ``tenant``.

    :class:`ForeignPosition` when it was issued for another tenant (checked first, so that
    the answer says so rather than "bad signature"); :class:`MalformedPosition` when it is
    not a position or its MAC does not match. Unsigned tokens pass once the tenant matches:
    a forged one can only make its own tenant's read wait, within the read's bound.
    """
    got = read(token)
    if got.position.tenant != tenant:
        raise ForeignPosition(got.position.tenant, tenant)
    if got.mac is not None and not hmac.compare_digest(
        got.mac, _mac(tenant_secret, got.signed_part)
    ):
        raise MalformedPosition("not a memstream position (bad signature)")
    return got.position
