"""The edge rule (memstream.wire): what no store can hold is refused, naming the field, by the
models the HTTP API, the MCP tools and the sequencer all validate with."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from memstream.checkout.search import SearchRequest
from memstream.events import EventAdapter, parse_inbound
from memstream.events.envelope import ID_PATTERN, STREAM_PATTERN, TENANT_PATTERN
from memstream.ledger.sequencing import DeadLetter, RawRecord, Sequenced, SequencerState, sequence
from memstream.summarize.model import SummarizeRequest
from memstream.times import iso_utc
from memstream.wire import PRINTABLE, STORABLE, storable_json, strings
from memstream_api.bodies import CheckoutRequest, RecallRequest
from memstream_api.feedback import FeedbackIn
from memstream_api.invalidate_routes import DecisionIn, InvalidateIn
from pydantic import BaseModel, TypeAdapter, ValidationError

NOW = iso_utc(datetime(2026, 5, 1, 12, 0, tzinfo=UTC))
NUL = "a\x00b"
# Every control character class an id refuses, and what text keeps.
CONTROLS = ["a\x01b", "tab\there", "new\nline", "esc\x1b[0m", "del\x7f", "nel\x85", "c1\x9f"]
FRIENDLY = ["Zoë Ängström", "東京の会議", "café ☕ 🙂", "Ωmega-ß", "a" * 200]


def envelope(event_type: str, payload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": "ev-1",
        "tenant": "acme",
        "stream": "s-1",
        "agent": "planner",
        "type": event_type,
        "occurred_at": "2026-05-01T10:00:00Z",
        "payload": payload,
        "metadata": {},
        **extra,
    }


# (event, the field as the HTTP API names it, how to put a value there)
def _put(path: str) -> Any:
    def at(doc: dict[str, Any], value: Any) -> dict[str, Any]:
        *parents, last = path.split(".")
        node = doc
        for part in parents:
            node = node[part]
        if last.endswith("[0]"):
            node[last[:-3]] = [value]
        else:
            node[last] = value
        return doc

    return at


MESSAGE = ("message.user", {"text": "hello"})
TOOL_CALL = ("tool.call", {"tool": "search", "arguments": {}})
TOOL_RESULT = ("tool.result", {"tool": "search"})
FACT = ("fact.asserted", {"subject": "Zoë", "predicate": "lives_in", "object": "Lyon"})
PREFERENCE = ("preference.set", {"key": "units", "value": "metric"})
STARTED = ("task.started", {"task_id": "t-1"})
OUTCOME = ("task.outcome", {"task_id": "t-1", "status": "success"})
FEEDBACK = ("memory.feedback", {"target_ids": ["e1"], "signal": 0.5})
INVALIDATE = ("memory.invalidate", {"target_ids": ["e1"], "reason": "wrong"})

TEXT_FIELDS = [
    (MESSAGE, "payload.text"),
    (TOOL_CALL, "payload.text"),
    (TOOL_RESULT, "payload.text"),
    (FACT, "payload.subject"),
    (FACT, "payload.predicate"),
    (FACT, "payload.object"),
    (FACT, "payload.unit"),
    (FACT, "payload.value"),
    (PREFERENCE, "payload.key"),
    (PREFERENCE, "payload.value"),
    (PREFERENCE, "payload.subject"),
    (STARTED, "payload.goal"),
    (OUTCOME, "payload.text"),
    (FEEDBACK, "payload.reason"),
    (INVALIDATE, "payload.reason"),
    (MESSAGE, "metadata.note"),
]
ID_FIELDS = [
    (MESSAGE, "agent"),
    (TOOL_CALL, "payload.tool"),
    (TOOL_CALL, "payload.call_id"),
    (TOOL_RESULT, "payload.call_id"),
    (STARTED, "payload.task_id"),
    (OUTCOME, "payload.task_id"),
    (OUTCOME, "payload.checkout_ids[0]"),
    (OUTCOME, "payload.used_ids[0]"),
    (FEEDBACK, "payload.target_ids[0]"),
    (FEEDBACK, "payload.packet_id"),
    (FEEDBACK, "payload.task_id"),
    (INVALIDATE, "payload.target_ids[0]"),
    (INVALIDATE, "payload.proposal_id"),
]


def _with(kind: tuple[str, dict[str, Any]], field: str, value: Any) -> dict[str, Any]:
    event_type, payload = kind
    doc = envelope(event_type, orjson.loads(orjson.dumps(payload)))
    if field == "payload.proposal_id":
        doc["payload"]["review_status"] = "accepted"
    return _put(field)(doc, value)  # type: ignore[no-any-return]


def _refusal(doc: dict[str, Any]) -> tuple[str, str]:
    """(field as the API names it, message) of the first error, through the inbound model."""
    with pytest.raises(ValidationError) as info:
        parse_inbound(orjson.dumps({k: v for k, v in doc.items() if k != "tenant"}))
    err = info.value.errors()[0]
    loc = err["loc"][1:]  # after the discriminator tag
    field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    return field, err["msg"]


@pytest.mark.parametrize(("kind", "field"), TEXT_FIELDS + ID_FIELDS)
def test_nul_is_refused_in_every_text_and_id_field_by_name(
    kind: tuple[str, dict[str, Any]], field: str
) -> None:
    doc = _with(kind, field, NUL)
    assert _refusal(doc) == (field, f"holds U+0000 at index 1: {_why(field)}")
    with pytest.raises(ValidationError):  # the sequencer's model refuses it the same way
        EventAdapter.validate_python(doc)


def _why(field: str) -> str:
    return PRINTABLE.why if (field in {f for _, f in ID_FIELDS}) else STORABLE.why


@pytest.mark.parametrize(("kind", "field"), ID_FIELDS)
@pytest.mark.parametrize("value", CONTROLS)
def test_ids_refuse_every_control_character(
    kind: tuple[str, dict[str, Any]], field: str, value: str
) -> None:
    control = next(c for c in value if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F)
    got, message = _refusal(_with(kind, field, value))
    assert got == field and message.startswith(f"holds U+{ord(control):04X} at index")


@pytest.mark.parametrize(("kind", "field"), TEXT_FIELDS + ID_FIELDS)
@pytest.mark.parametrize("value", FRIENDLY)
def test_accented_cjk_emoji_and_long_values_pass_every_field(
    kind: tuple[str, dict[str, Any]], field: str, value: str
) -> None:
    doc = _with(kind, field, value[:50] if field == "payload.unit" else value)
    parse_inbound(orjson.dumps({k: v for k, v in doc.items() if k != "tenant"}))
    EventAdapter.validate_python(doc)


@pytest.mark.parametrize(("kind", "field"), TEXT_FIELDS)
@pytest.mark.parametrize("value", CONTROLS)
def test_text_keeps_tabs_newlines_and_other_control_characters(
    kind: tuple[str, dict[str, Any]], field: str, value: str
) -> None:
    EventAdapter.validate_python(_with(kind, field, value))


def test_ids_are_bounded() -> None:
    field, message = _refusal(_with(FEEDBACK, "payload.target_ids[0]", "x" * 201))
    assert field == "payload.target_ids[0]" and "at most 200 characters" in message


def test_metadata_keys_and_free_form_json_are_walked() -> None:
    field, message = _refusal(_with(MESSAGE, "metadata", {"fine": 1, "bad\x00key": "v"}))
    assert field == "metadata" and message.startswith("key 1 holds U+0000")
    output = {"rows": [{"name": "ok"}, {"name": "Zo\x00ë"}], "n": 2}
    field, message = _refusal(_with(TOOL_RESULT, "payload.output", output))
    assert field == "payload.output"
    assert message == "['rows'][1]['name'] holds U+0000 at index 2: no store can hold NUL"
    field, message = _refusal(_with(TOOL_CALL, "payload.arguments", {"q": {"x\x00": 1}}))
    assert field == "payload.arguments.q" and message.startswith("the key of ['x\\x00']")
    # Tabs, ESC and newlines are what tool output is made of.
    legit = {"log": "line 1\nline 2\t\x1b[31mred\x1b[0m", "n": [1, 2.5, True, None]}
    EventAdapter.validate_python(_with(TOOL_RESULT, "payload.output", legit))


def test_lone_surrogates_are_refused_from_json_and_from_python() -> None:
    raw = b'{"stream":"s","type":"message.user","payload":{"text":"a\\ud800b"}}'
    with pytest.raises(ValidationError, match="Invalid JSON"):  # the API names it: ingest
        parse_inbound(raw)
    with pytest.raises(ValidationError) as info:
        EventAdapter.validate_python(_with(MESSAGE, "payload.text", "a\ud800b"))
    assert info.value.errors()[0]["type"] == "string_unicode"
    with pytest.raises(ValidationError, match="lone surrogate"):
        EventAdapter.validate_python(_with(TOOL_RESULT, "payload.output", ["ok", "\udc00"]))


def test_storable_json_reports_the_first_place_in_document_order() -> None:
    value = {"a": ["x", "y\x00"], "b\x00": "z\x00"}
    assert [(loc, key) for loc, _, key in strings(value)] == [
        (("a",), True),
        (("a", 0), False),
        (("a", 1), False),
        (("b\x00",), True),
        (("b\x00",), False),
    ]
    with pytest.raises(Exception, match=r"^\['a'\]\[1\] holds"):
        storable_json(value)


@pytest.mark.parametrize(
    ("model", "field", "body"),
    [
        (CheckoutRequest, "query", {"query": NUL}),
        (CheckoutRequest, "task_id", {"query": "q", "task_id": "t\x01"}),
        (CheckoutRequest, "stream", {"query": "q", "stream": "s\x00"}),
        (RecallRequest, "query", {"query": NUL}),
        (RecallRequest, "stream", {"query": "q", "stream": "s\x85"}),
        (SearchRequest, "query", {"query": NUL}),
        (SummarizeRequest, "query", {"query": NUL}),
        (SummarizeRequest, "stream", {"query": "q", "stream": "a b"}),
        (FeedbackIn, "target_ids.0", {"target_ids": ["x\x00y"], "signal": 1.0}),
        (FeedbackIn, "packet_id", {"target_ids": ["x"], "signal": 1.0, "packet_id": "p\x7f"}),
        (FeedbackIn, "reason", {"target_ids": ["x"], "signal": 1.0, "reason": NUL}),
        (InvalidateIn, "target_ids.1", {"target_ids": ["ok", "x\x9f"], "reason": "r"}),
        (InvalidateIn, "reason", {"target_ids": ["ok"], "reason": NUL}),
        (DecisionIn, "reason", {"reason": NUL}),
    ],
)
def test_request_models_refuse_by_field(
    model: type[BaseModel], field: str, body: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate_json(orjson.dumps(body))
    assert ".".join(str(p) for p in info.value.errors()[0]["loc"]) == field


@pytest.mark.parametrize("rule", [PRINTABLE, STORABLE])
@pytest.mark.parametrize(
    "value", [NUL, *CONTROLS, *FRIENDLY, "", "trailing newline\n", "\x00", "ok\x00"]
)
def test_the_published_pattern_is_the_rule(rule: Any, value: str) -> None:
    # The schema says `"not": {"pattern": rule.pattern}`: a string the pattern finds is refused.
    assert (re.search(rule.pattern, value) is None) == (rule.first(value) < 0)
    schema = TypeAdapter(Annotated[str, rule]).json_schema()
    assert schema == {"type": "string", "not": {"pattern": rule.pattern}}


@given(st.from_regex(ID_PATTERN, fullmatch=True) | st.from_regex(STREAM_PATTERN, fullmatch=True))
def test_event_ids_streams_and_tenants_are_item_ids(value: str) -> None:
    assert PRINTABLE.first(value) < 0


@given(st.from_regex(TENANT_PATTERN, fullmatch=True))
def test_tenants_are_item_ids(value: str) -> None:
    assert PRINTABLE.first(value) < 0


def test_the_sequencer_dead_letters_what_the_api_refuses_with_the_same_reason() -> None:
    state = SequencerState()
    nul = orjson.dumps(envelope("message.user", {"text": NUL}))
    out = sequence(RawRecord(nul, 2, 41, "memory.events.raw"), state, NOW)
    assert out == DeadLetter(
        "invalid envelope: message.user.payload.text: holds U+0000 at index 1: no store can "
        "hold NUL"
    )
    c1 = orjson.dumps(envelope("message.user", {"text": "hi"}, agent="bot\x85"))
    c1_out = sequence(RawRecord(c1, 2, 42, "memory.events.raw"), state, NOW)
    assert isinstance(c1_out, DeadLetter) and "agent: holds U+0085" in c1_out.reason
    surrogate = b'{"id":"e9","tenant":"acme","stream":"s","text":"\\ud800"}'
    lone = sequence(RawRecord(surrogate, 2, 43, "memory.events.raw"), state, NOW)
    assert isinstance(lone, DeadLetter) and lone.reason.startswith("undecodable")
    assert state.heads == {}  # nothing was sequenced
    fine = orjson.dumps(envelope("message.user", {"text": "tab\tESC\x1b 東京 🙂"}, agent="Zoë"))
    assert isinstance(sequence(RawRecord(fine, 2, 44, "memory.events.raw"), state, NOW), Sequenced)
