"""Pure archiving decision: which ledger records extend the archive."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True)
class Append:
    tenant: str
    key: str
    seq: int
    line: bytes


@dataclass(frozen=True)
class Skip:
    key: str
    seq: int  # already archived (redelivery or restored ledger)


@dataclass(frozen=True)
class Poison:
    reason: str


def plan_record(
    value: bytes | None,
    heads: dict[str, int],
    key: str | None = None,
    seq_header: int | None = None,
) -> Append | Skip | Poison:
    """Decide for one ledger record; ``heads`` maps tenant/stream to the last archived seq.

    ``key``/``seq_header`` come from the record's Kafka key and ``seq`` header when the
    sequencer wrote them, which spares parsing the entry. Updates ``heads`` for appends so a
    batch can hold many entries of one stream.
    """
    if value is None:
        return Poison("empty ledger record")
    if key is not None and seq_header is not None and "/" in key:
        if seq_header <= heads.get(key, 0):
            return Skip(key, seq_header)
        heads[key] = seq_header
        return Append(key.split("/", 1)[0], key, seq_header, value + b"\n")
    try:
        entry: Any = orjson.loads(value)
        tenant, stream, seq = entry["tenant"], entry["stream"], entry["seq"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        return Poison(f"undecodable ledger record: {exc!r}")
    if not isinstance(seq, int) or not isinstance(tenant, str) or "/" in tenant:
        return Poison("ledger record without integer seq or valid tenant")
    key = f"{tenant}/{stream}"
    if seq <= heads.get(key, 0):
        return Skip(key, seq)
    heads[key] = seq
    line = value if value.endswith(b"\n") else value + b"\n"
    return Append(tenant, key, seq, line)
