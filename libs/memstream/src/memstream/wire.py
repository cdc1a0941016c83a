"""Field types that accept exactly what their published JSON Schema allows.

pydantic's lax mode reads ``"10"`` and ``true`` as integers and ``"0"`` or ``1700000000`` as
times; its strict mode refuses ``1.0`` for an integer and any string for a datetime. The
HTTP API validates strictly and these types put back what the schema allows.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any

import pydantic_core
from pydantic import (
    AwareDatetime,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PlainValidator,
    TypeAdapter,
    ValidationError,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema
from typing_extensions import TypeAliasType

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


# -- what the stores can hold ------------------------------------------------------------------
#
# One rule for every text and id field, in every model that takes client input (the HTTP
# routes, the MCP tools, the event payloads the sequencer validates), measured on the stores:
# - FalkorDB: the falkordb client renders parameters into the query text, which the server
#   reads as a C string. A NUL cuts the query short ("errMsg: Invalid input ... errCtx:
#   CYPHER"), so the graph projector could never write that record, nor the batch around it.
#   U+0001, ESC, DEL, U+0085, tab, newline, CR and 5 MB strings are stored and read back
#   intact. It does not decode escapes in literals: a JSON string holding the six characters
#   \u0000 (metadata, question families) is stored as written.
# - No map with client-chosen keys reaches the graph (the client refuses a key holding a
#   backtick): metadata and question families travel as JSON strings.
# - Qdrant Edge stores NUL and every control character in payload strings and keyword
#   filters (stream, agent), and 5 MB strings.
# - A lone surrogate ("\ud800" is valid JSON) cannot be encoded as UTF-8: the falkordb client,
#   orjson (outbox, archive, Kafka values) and Qdrant Edge's payload conversion all raise on
#   it. pydantic refuses one in any ``str`` field (a JSON parse error, or ``string_unicode``
#   from Python); ``storable_json`` checks the strings nested in free-form values.
# So free text refuses NUL only (tabs, newlines and ESC in tool output are legitimate); ids
# refuse every control character (C0, DEL, C1): they are printed, logged and sent in paths.

_NUL = ((0x00, 0x00),)
_CONTROL = ((0x00, 0x1F), (0x7F, 0x9F))


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\x{lo:02x}" if lo == hi else f"\\x{lo:02x}-\\x{hi:02x}" for lo, hi in ranges)


@dataclass(frozen=True)
class Refused:
    """``Annotated[str, Field(...), Refused(...)]``: refuses strings holding characters in
    ``ranges`` (code point ranges), and publishes the rule in the JSON Schema as
    ``"not": {"pattern": <the refused characters>}``.

    Not the equivalent ``"pattern": "^[^...]*$"``: schemathesis folds a string's length limits
    into such a pattern (``{1,200000}`` for event text), which the Rust regex engine of its
    validator then refuses as too large, and its coverage phase silently skips the schema.

    Place it after the length constraints (pydantic applies ``Field`` limits written after a
    validator as a generic check with a misleading message). On a ``dict`` it checks the keys
    (``propertyNames`` in the schema); on a union it checks the value when it is a string.
    """

    ranges: tuple[tuple[int, int], ...]
    why: str

    @property
    def pattern(self) -> str:
        """The refused characters as an ECMA-262 class: a string matching it is refused."""
        return f"[{_char_class(self.ranges)}]"

    def first(self, value: str) -> int:
        """Index of the first refused character of ``value``, or -1."""
        if len(self.ranges) == 1 and self.ranges[0][0] == self.ranges[0][1]:
            return value.find(chr(self.ranges[0][0]))  # memchr: ~800x a regex on 200 KB
        found = _regex(self.pattern).search(value)
        return found.start() if found else -1

    def check(self, value: Any) -> Any:
        """``value`` if it holds no refused character (its keys, for a dict)."""
        texts = enumerate(value) if isinstance(value, dict) else ((None, value),)
        for key, text in texts:
            if isinstance(text, str) and (at := self.first(text)) >= 0:
                raise PydanticCustomError(
                    "string_refused_character",
                    "{which}holds U+{code} at index {index}: {why}",
                    {
                        "which": "" if key is None else f"key {echo(key)} ",
                        "code": f"{ord(text[at]):04X}",
                        "index": at,
                        "why": self.why,
                    },
                )
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        refused = {"not": {"pattern": self.pattern}}
        for branch in out.get("anyOf", [out]):
            if branch.get("type") == "string":
                branch.update(refused)
            elif branch.get("type") == "object":
                branch["propertyNames"] = refused
        return out


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


STORABLE = Refused(_NUL, "no store can hold NUL")
PRINTABLE = Refused(_CONTROL, "ids take no control characters")
MAX_ID_LENGTH = 200

Text = Annotated[str, STORABLE]
"""Free text: anything a store can hold (everything but NUL)."""
ItemId = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH), PRINTABLE]
"""The one id type every route, tool and payload takes: event, fact (``<event id>#n``),
artifact, packet, proposal, task and agent ids. Printable (no C0, DEL or C1), 1 to 200
characters; accented, CJK and emoji characters are fine. Ids that become Kafka keys or file
names (event ids, tenants, streams) keep their narrower patterns, which this rule contains."""

POSITION_MAX_LENGTH = 1024
POSITION_PATTERN = r"^ms1u?\.[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)?$"
Position = Annotated[
    str,
    Field(
        max_length=POSITION_MAX_LENGTH,
        pattern=POSITION_PATTERN,
        description="an opaque position, as a write answered it; do not parse it",
    ),
]
"""A position token as a request takes it (``memstream.position`` reads it; the route checks
its tenant and MAC, which need the caller)."""


Loc = tuple[str | int, ...]


def strings(value: Any) -> Iterator[tuple[Loc, str, bool]]:
    """Every string in a JSON value with its location and whether it is a key (a key's
    location ends with it), depth first in document order."""
    pending: list[tuple[Loc, Any, bool]] = [((), value, False)]
    while pending:
        loc, item, is_key = pending.pop()
        inner: list[tuple[Loc, Any, bool]] = []
        if isinstance(item, dict):
            for key, nested in item.items():
                inner += [((*loc, key), key, True), ((*loc, key), nested, False)]
        elif isinstance(item, list | tuple):
            inner = [((*loc, i), nested, False) for i, nested in enumerate(item)]
        elif isinstance(item, str):
            yield loc, item, is_key
        pending += reversed(inner)


def unstorable(text: str) -> str | None:
    """Why no store can hold ``text`` (a NUL, a lone surrogate), or None."""
    at = STORABLE.first(text)
    if at >= 0:
        return f"holds U+0000 at index {at}: {STORABLE.why}"
    return lone_surrogate(text)


def lone_surrogate(text: str) -> str | None:
    """What is wrong with ``text`` if it holds a lone surrogate (it cannot be UTF-8), or None."""
    if text.isascii():
        return None
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        return f"holds a lone surrogate at index {exc.start}: text must be valid Unicode"
    return None


def storable_json(value: Any) -> Any:
    """A free-form JSON value (tool arguments and output) whose strings, keys and numbers a
    store can hold, nested at most ``MAX_DEPTH`` levels. The message names the offending
    place."""
    deep = too_deep(value, MAX_DEPTH)
    if deep is not None:
        raise PydanticCustomError(
            "json_too_deep",
            "{where} nests deeper than {limit} levels",
            {"where": index_path(deep) or "the value", "limit": MAX_DEPTH},
        )
    for loc, number in numbers(value):
        problem = inexact(number)
        if problem is not None:
            raise PydanticCustomError(
                "json_number_refused",
                "{where} {problem}",
                {"where": index_path(loc) or "the value", "problem": problem},
            )
    for loc, text, is_key in strings(value):
        problem = unstorable(text)
        if problem is not None:
            where = index_path(loc)
            where = f"the key of {where}" if is_key else where
            raise PydanticCustomError(
                "json_refused_character",
                "{where} {problem}",
                {"where": where or "the value", "problem": problem},
            )
    return value


# -- numbers ------------------------------------------------------------------------------
#
# JSON numbers have no range; the stores do. The graph (FalkorDB, Neo4j) and Qdrant hold
# signed 64-bit integers, and orjson, which writes every sealed value, outbox segment and
# archive line, raises on an integer past 64 bits ("Integer exceeds 64-bit range"). pydantic
# reads ``NaN``, ``Infinity`` and ``1e400`` (an infinity) as floats that no JSON encoder writes
# back: orjson writes them as ``null``, silently changing the value. So an integer must fit
# signed 64 bits and a float must be finite, in every field, typed or free-form.

INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def inexact(number: int | float) -> str | None:
    """Why no store can hold ``number`` exactly (past 64 bits, NaN, an infinity), or None."""
    if isinstance(number, bool):
        return None
    if isinstance(number, int):
        if INT_MIN <= number <= INT_MAX:
            return None
        return f"is an integer past the signed 64-bit range [{INT_MIN}, {INT_MAX}]"
    if math.isfinite(number):
        return None
    return "is not a finite number (NaN and infinities cannot be stored)"


def numbers(value: Any) -> Iterator[tuple[Loc, int | float]]:
    """Every number (not bool) in a JSON value with its location, depth first."""
    pending: list[tuple[Loc, Any]] = [((), value)]
    while pending:
        loc, item = pending.pop()
        if isinstance(item, dict):
            pending += [((*loc, k), v) for k, v in reversed(item.items())]
        elif isinstance(item, list | tuple):
            pending += [((*loc, i), v) for i, v in reversed(list(enumerate(item)))]
        elif isinstance(item, int | float) and not isinstance(item, bool):
            yield loc, item


# Every model that takes client input: unknown fields refused, no coercion, no NaN.
STRICT_INPUT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


# -- what an error message may show of a client's value -----------------------------------
#
# A refusal names the place and the fault, never the client's value whole: a detail that
# echoed a megabyte key, or a key holding a lone surrogate (which no JSON encoder writes),
# would cost more than the request or fail to be written at all.

ECHO_CHARS = 40
LOC_PARTS = 12  # a path deeper than this is shown by its first and last parts


def echo(value: object, limit: int = ECHO_CHARS) -> str:
    """``value`` as a message may show it: at most ``limit`` characters, every unprintable
    one (control characters, lone surrogates) escaped, its length if cut."""
    text = value if isinstance(value, str) else str(value)
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text[:limit])
    return shown if len(text) <= limit else f"{shown}… ({len(text)} characters)"


def shorten(message: str) -> str:
    """An error message as an answer shows it (see :func:`echo`)."""
    return echo(message, MESSAGE_CHARS)


class _Elided:
    """The parts of a long location left out of its message."""


_ELIDED = _Elided()


def _parts(loc: Loc) -> list[str | int | _Elided]:
    parts: list[str | int | _Elided] = list(loc)
    if len(parts) > LOC_PARTS:
        parts = [*parts[: LOC_PARTS // 2], _ELIDED, *parts[-LOC_PARTS // 2 :]]
    return parts


def dotted(loc: Loc) -> str:
    """A location as a field path: ``events[3].payload.text`` (keys shown by :func:`echo`)."""
    out = ""
    for part in _parts(loc):
        if isinstance(part, _Elided):
            out += "…"
        elif isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{echo(part)}" if out else echo(part)
    return out


def index_path(loc: Loc) -> str:
    """A location inside a free-form value: ``['rows'][1]['name']``."""
    return "".join("…" if isinstance(p, _Elided) else f"[{_short(p)}]" for p in _parts(loc))


def _short(part: str | int) -> str:
    """A key or index as Python writes it (unprintable characters escaped), cut short."""
    if isinstance(part, int) or len(part) <= ECHO_CHARS:
        return repr(part)
    return f"{part[:ECHO_CHARS]!r}… ({len(part)} characters)"


# -- nesting -----------------------------------------------------------------------------
#
# JSON parsers recurse: pydantic's refuses past 254 levels, orjson writes at most 254, the
# standard library raises RecursionError (a 500) near 1,000. So nesting is bounded where the
# client sends it: a free-form value (tool arguments and output) at MAX_DEPTH levels, a
# request body at BODY_MAX_DEPTH. ``deepest`` finds the place in the raw bytes, without
# building the document.

MAX_DEPTH = 32
BODY_MAX_DEPTH = 48
MESSAGE_CHARS = 300  # the longest error message shown for one field
# A JSON string (escapes included) or one structural character.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]', re.DOTALL)


def too_deep(value: Any, limit: int) -> Loc | None:
    """Where a parsed JSON value first nests deeper than ``limit`` containers, or None."""
    pending: list[tuple[Loc, Any]] = [((), value)]
    while pending:
        loc, item = pending.pop()
        if isinstance(item, dict | list | tuple):
            if len(loc) >= limit:
                return loc
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            pending += [((*loc, k), v) for k, v in pairs if isinstance(v, dict | list | tuple)]
    return None


class BodyFault(ValueError):
    """Why a request body holds no JSON document a route reads: what (``problem``), its kind
    (``json_invalid``, ``json_too_deep``, ``string_unicode``), where from the body's root
    (``loc``; None: the body as a whole) and what of it could be read (``doc``; None when
    nothing could)."""

    def __init__(
        self,
        problem: str,
        kind: str,
        loc: Loc | None = None,
        doc: Any = None,
        limit: int = BODY_MAX_DEPTH,
    ) -> None:
        super().__init__(problem)
        self.problem, self.kind, self.loc, self.doc = problem, kind, loc, doc
        self.limit = limit  # the nesting limit the body was read under

    @property
    def rule(self) -> str:
        """The refusal's reason as an answer states it after the place: the limit a body
        broke, else the problem itself."""
        if self.kind == "json_too_deep":
            return f"a request body nests at most {self.limit} levels"
        return self.problem


def json_body(body: bytes, limit: int = BODY_MAX_DEPTH) -> Any:
    """The JSON document of a request body, nested at most ``limit`` levels, else a
    :class:`BodyFault` naming the place: past the limit (found in the raw bytes when the
    parser gave up first), or a string holding a lone surrogate (``"\\ud800"`` is valid JSON
    but no valid Unicode, so no store can hold it)."""
    try:
        doc = pydantic_core.from_json(body)
    except ValueError as exc:
        raise _unreadable(body, exc, limit) from exc
    deep = too_deep(doc, limit)
    if deep is not None:
        raise BodyFault(f"nests deeper than {limit} levels", "json_too_deep", deep, doc, limit)
    return doc


def _unreadable(body: bytes, exc: ValueError, limit: int) -> BodyFault:
    deep = deepest(body, limit)
    if deep is not None:
        return BodyFault(f"nests deeper than {limit} levels", "json_too_deep", deep, None, limit)
    try:
        doc = json.loads(body)  # the standard library reads lone surrogates
    except (ValueError, RecursionError):
        doc = None
    for loc, text, _is_key in strings(doc):
        if (problem := lone_surrogate(text)) is not None:
            return BodyFault(problem, "string_unicode", loc, doc)
    return BodyFault(f"body is not valid JSON: {shorten(str(exc))}", "json_invalid")


def deepest(body: bytes, limit: int) -> Loc | None:
    """Where the JSON text ``body`` first opens a container deeper than ``limit`` levels (the
    path to it), or None. Reads tokens only, so any depth is safe to scan."""
    stack: list[list[Any]] = []  # per open container: [is object, key or index, wants key]
    for match in _TOKENS.finditer(body):
        token = match.group()
        first = token[:1]
        if first in (b"{", b"["):
            if len(stack) >= limit:
                return tuple(frame[1] for frame in stack)
            stack.append([first == b"{", None if first == b"{" else 0, first == b"{"])
        elif first in (b"}", b"]"):
            if stack:
                stack.pop()
        elif not stack:
            continue
        elif first == b",":
            top = stack[-1]
            if top[0]:
                top[2] = True
            else:
                top[1] += 1
        elif first == b":":
            stack[-1][2] = False
        elif stack[-1][0] and stack[-1][2]:
            stack[-1][1] = _key(token)
    return None


def _key(token: bytes) -> str:
    try:
        key = json.loads(token)
    except ValueError:
        return token[1:-1].decode(errors="replace")
    return key if isinstance(key, str) else str(key)


if TYPE_CHECKING:  # mypy reads no recursive TypeAliasType; pydantic needs one
    JsonValue = str | int | float | bool | list["JsonValue"] | dict[str, "JsonValue"] | None
else:
    JsonValue = TypeAliasType(
        "JsonValue",
        Annotated[str, STORABLE]
        | Annotated[int, Field(ge=INT_MIN, le=INT_MAX)]
        | float
        | bool
        | list["JsonValue"]
        | Annotated[dict[str, "JsonValue"], STORABLE]
        | None,
    )
"""The published shape of a free-form JSON value under the storable rule (schema only)."""
StorableJson = Annotated[Any, PlainValidator(storable_json, json_schema_input_type=JsonValue)]
"""Free-form JSON (tool arguments and output), checked by one walk: a union per nested value
would report every member's mismatch for one NUL."""


def storable_scalar(value: Any) -> Any:
    """One JSON scalar (a string, number, boolean or null) a store can hold."""
    if isinstance(value, str):
        if (problem := lone_surrogate(value)) is not None:  # from Python: JSON refuses one
            raise PydanticCustomError("string_unicode", "{problem}", {"problem": problem})
        return STORABLE.check(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        if (problem := inexact(value)) is not None:
            raise PydanticCustomError("number_refused", "{problem}", {"problem": problem})
        return value
    raise PydanticCustomError(
        "scalar_type", "expected a string, number, boolean or null, not a JSON container"
    )


if TYPE_CHECKING:
    ScalarValue = str | int | float | bool | None
else:
    ScalarValue = (
        Annotated[str, STORABLE]
        | Annotated[int, Field(ge=INT_MIN, le=INT_MAX)]
        | float
        | bool
        | None
    )
StorableScalar = Annotated[
    str | int | float | bool | None,
    PlainValidator(storable_scalar, json_schema_input_type=ScalarValue),
]
"""A scalar (metadata values, fact and preference values), checked by one rule with one
message: a union would report each member's mismatch for one NaN."""
