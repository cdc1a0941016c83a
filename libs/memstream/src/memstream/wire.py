"""Field types that accept exactly what their published JSON Schema allows.

pydantic's lax mode reads ``"10"`` and ``true`` as integers and ``"0"`` or ``1700000000`` as
times; its strict mode refuses ``1.0`` for an integer and any string for a datetime. The
HTTP API validates strictly and these types put back what the schema allows.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import AwareDatetime, BeforeValidator, TypeAdapter, ValidationError

# RFC 3339 `date-time` (the JSON Schema format); the offset may be left out where noted.
_RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?")
_READ = TypeAdapter(datetime)


def _rfc3339(value: Any) -> Any:
    """RFC 3339 text (or a datetime from Python callers), parsed here so that strict
    validation, which takes no string for a datetime, accepts the result."""
    if isinstance(value, datetime):
        return value
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError("expected an RFC 3339 date-time such as 2024-05-01T12:00:00Z")
    if match[2] == "60":  # a leap second: Python's last instant of that minute stands for it
        value = f"{match[1]}:59.999999{match[4] or ''}"
    try:
        return _READ.validate_python(value)
    except ValidationError as exc:
        raise ValueError(exc.errors()[0]["msg"]) from exc


def _integral(value: Any) -> Any:
    # JSON Schema counts 1.0 as an integer; strict int does not. Strings and bools stay refused.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


RfcDatetime = Annotated[AwareDatetime, BeforeValidator(_rfc3339)]
"""An RFC 3339 date-time with its offset."""
RfcTimestamp = Annotated[datetime, BeforeValidator(_rfc3339)]
"""An RFC 3339 date-time; without an offset it is read as UTC."""
JsonInt = Annotated[int, BeforeValidator(_integral)]
"""A JSON integer: ``1`` or ``1.0``, never ``"1"`` or ``true`` (under strict validation)."""
