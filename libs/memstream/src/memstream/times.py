"""Timestamps: one ISO 8601 reader and the string forms each layer stores.

Every layer keeps time as ISO strings; they differ only in the form written:

- the ledger writes ``isoformat()`` with ``Z`` for UTC (:func:`iso_utc`); it is hashed, so
  the form never changes;
- the graph writes a fixed-width form (:func:`iso_z`) because Cypher compares timestamps as
  strings, and a variable-width ``…:00Z`` sorts after ``…:00.5Z``;
- synthesis compares parsed values (:func:`parse_ts`) and shows days (:func:`day_of`).
"""

from __future__ import annotations

from datetime import UTC, datetime


def to_datetime(value: str) -> datetime:
    """An ISO 8601 date or timestamp as an aware datetime; naive input is taken as UTC.

    The offset written in ``value`` is kept (days stay the writer's days). Raises
    ``ValueError`` when ``value`` is not ISO 8601.
    """
    ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def parse_ts(value: str | None) -> datetime | None:
    """Like :func:`to_datetime`, but None for a missing or unreadable value."""
    if not value:
        return None
    try:
        return to_datetime(value)
    except ValueError:
        return None


def day_of(value: str | None) -> str:
    """The ISO day of a timestamp (``""`` if unknown)."""
    ts = parse_ts(value)
    return ts.date().isoformat() if ts else ""


def epoch_seconds(value: str) -> float:
    """Seconds since the Unix epoch of an ISO timestamp (``ValueError`` if unreadable)."""
    return to_datetime(value).timestamp()


def iso_z(value: str) -> str:
    """Fixed-width UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ``; naive input is taken as UTC.

    The fixed width matters: ``…:00Z`` sorts after ``…:00.5Z`` as a string, so the ledger's
    variable-width ``isoformat`` cannot be compared as stored.
    """
    try:
        ts = to_datetime(value)
    except ValueError as exc:
        raise ValueError(f"not an ISO 8601 timestamp: {value!r}") from exc
    return utc_z(as_utc(ts))


def utc_z(ts: datetime) -> str:
    """An aware UTC datetime as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (``strftime("%Y")`` would
    write year 1 as ``1``, breaking the fixed width)."""
    return ts.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def as_utc(ts: datetime) -> datetime:
    """``ts`` in UTC, saturated at the ends of ``datetime``'s range.

    RFC 3339 allows ``0001-01-01T00:00:00+01:00``, which is before year 1 in UTC:
    ``astimezone`` raises on it, and a raise in a consumer would stall it on that event.
    """
    if ts.tzinfo is None:
        return ts.replace(tzinfo=UTC)  # naive is UTC here, as in to_datetime
    try:
        return ts.astimezone(UTC)
    except OverflowError:
        edge = datetime.min if ts.year == datetime.min.year else datetime.max
        return edge.replace(tzinfo=UTC)


def z_suffix(value: str) -> str:
    """An ISO timestamp string with a ``+00:00`` offset written as ``Z``."""
    return value.replace("+00:00", "Z")


def iso_utc(ts: datetime) -> str:
    """The ledger's timestamp form: ``isoformat()`` with a ``Z`` (hashed: never change it)."""
    return z_suffix(ts.isoformat())
