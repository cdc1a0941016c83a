"""The mapping from GenAI spans to events (memstream.intake.otlp), on spans written here:
what each operation becomes, who it is about, ids that make a repeat write nothing, and spans
left out or refused whole with their reason."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from memstream.intake.otlp import Span, json_ids_as_proto, misshapen, translate
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TRACE = "0af7651916cd43dd8448eb211c80319c"


def span(span_id: str, **attributes: Any) -> Span:
    return Span(
        trace_id=TRACE, span_id=span_id, parent_span_id="00f067aa0ba902b7", name="s",
        start=NOW, end=NOW + timedelta(seconds=2), attributes=attributes,
        error=bool(attributes.pop("_error", False)), status_message="kiln too cold",
    )  # fmt: skip


def chat(span_id: str, *messages: tuple[str, str], **more: Any) -> Span:
    history = [{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in messages]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps(history[:-1]),
        "gen_ai.output.messages": json.dumps(history[-1:]),
    }
    return span(span_id, **attributes, **more)


def test_a_chat_span_gives_its_messages_with_roles_and_who() -> None:
    done = translate(
        [chat("a1", ("user", "Is the bisque done?"), ("assistant", "Yes, at 950 °C."),
              **{"gen_ai.agent.name": "kiln bot", "user.id": "Øystein Lie",
                 "gen_ai.conversation.id": "conv 7/β"})],
        "t", NOW,
    )  # fmt: skip
    assert [(e.type, e.payload.text) for e in done.events] == [  # type: ignore[union-attr]
        ("message.user", "Is the bisque done?"),
        ("message.assistant", "Yes, at 950 °C."),
    ]
    first = done.events[0]
    assert (first.agent, first.user) == ("kiln bot", "Øystein Lie")
    other = translate([chat("a2", ("user", "x"), ("assistant", "y"),
                            **{"gen_ai.conversation.id": "conv 7/γ"})], "t", NOW)  # fmt: skip
    assert first.stream.startswith("conv-7-") and first.stream != other.events[0].stream
    assert first.metadata["otel.span_id"] == "a1" and first.metadata["otel.trace_id"] == TRACE


def test_history_repeated_by_a_later_chat_span_is_one_event() -> None:
    first = chat("b1", ("user", "Glaze?"), ("assistant", "Celadon."))
    later = chat("b2", ("user", "Glaze?"), ("assistant", "Celadon."), ("user", "Cone?"),
                 ("assistant", "Cone 10."))  # fmt: skip
    done = translate([first, later], "t", NOW)
    texts = [e.payload.text for e in done.events]  # type: ignore[union-attr]
    assert texts == ["Glaze?", "Celadon.", "Cone?", "Cone 10."]
    again = translate([later], "t", NOW)  # a re-sent export: the same ids
    assert {e.id for e in again.events} <= {e.id for e in done.events}


def test_a_tool_span_gives_call_and_result_and_an_error_says_so() -> None:
    tool = span("c1", **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "kiln_log",
                         "gen_ai.tool.call.id": "call 1", "gen_ai.tool.call.arguments": '{"k": 2}',
                         "_error": True})  # fmt: skip
    call, result = translate([tool], "t", NOW).events
    assert call.type == "tool.call" and call.payload.arguments == {"k": 2}  # type: ignore[union-attr]
    assert result.type == "tool.result" and result.caused_by == [call.id]
    assert result.payload.is_error and result.payload.output == "kiln too cold"  # type: ignore[union-attr]
    assert call.occurred_at < result.occurred_at and call.id.endswith("-c1-call")


def test_an_agent_span_gives_its_outcome() -> None:
    ok = span("d1", **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.call.id": "run-9"})
    bad = span("d2", **{"gen_ai.operation.name": "invoke_agent", "_error": True})
    done = translate([ok, bad], "t", NOW).events
    assert [(e.type, e.payload.status) for e in done] == [  # type: ignore[union-attr]
        ("task.outcome", "success"), ("task.outcome", "failure")]  # fmt: skip
    assert done[0].payload.task_id == "run-9"  # type: ignore[union-attr]


def test_other_spans_are_counted_and_bad_ones_refused_whole_with_a_reason() -> None:
    plain = span("e1", **{"http.method": "GET"})
    no_tool = span("e2", **{"gen_ai.operation.name": "execute_tool"})
    nul = chat("e3", ("user", "bad\x00text"), ("assistant", "fine"))
    broken = span("e4", **{"gen_ai.operation.name": "chat", "gen_ai.input.messages": "{not json"})
    good = chat("e5", ("user", "kept"), ("assistant", "kept too"))
    done = translate([plain, no_tool, nul, broken, good], "t", NOW)
    assert done.ignored == 1 and set(done.refused) == {"e2", "e3", "e4"}
    assert "gen_ai.tool.name" in done.refused["e2"] and "NUL" in done.refused["e3"]
    assert [e.payload.text for e in done.events] == ["kept", "kept too"]  # type: ignore[union-attr]
    assert "1 spans without gen_ai.operation.name ignored" in done.summary()


def test_json_ids_are_read_as_hex() -> None:
    doc = {
        "resourceSpans": [
            {"scopeSpans": [{"spans": [{"traceId": TRACE, "spanId": "00f067aa0ba902b7"}]}]}
        ]
    }
    span_doc = json_ids_as_proto(doc)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert base64.b64decode(span_doc["spanId"]).hex() == "00f067aa0ba902b7"
    assert base64.b64decode(span_doc["traceId"]).hex() == TRACE


EXPORT = ExportTraceServiceRequest.DESCRIPTOR
SPANS = "resourceSpans[0].scopeSpans[0].spans"


def spans_doc(*spans: Any) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


@pytest.mark.parametrize(
    ("doc", "place"),
    [
        (["an", "array"], "the body must be an object"),
        ({"resourceSpans": "x"}, "resourceSpans must be a list"),
        ({"resourceSpans": ["x"]}, "resourceSpans[0] must be an object"),
        ({"resourceSpans": [{"resource": 7}]}, "resourceSpans[0].resource must be an object"),
        (spans_doc({"name": "a"}, "b"), f"{SPANS}[1] must be an object"),
        (
            spans_doc({"attributes": [{"key": "k", "value": {"arrayValue": {"values": [1]}}}]}),
            f"{SPANS}[0].attributes[0].value.arrayValue.values[0] must be an object",
        ),
        (spans_doc({"status": "ERROR"}), f"{SPANS}[0].status must be an object"),
    ],
)  # fmt: skip
def test_a_json_export_of_the_wrong_shape_names_the_place(doc: Any, place: str) -> None:
    assert misshapen(doc, EXPORT) == place


def test_a_well_shaped_export_nulls_and_unknown_fields_included_passes() -> None:
    value = {"kvlistValue": {"values": [{"key": "a", "value": {"stringValue": "b"}}]}}
    doc = spans_doc({"name": "s", "attributes": [{"key": "k", "value": value}], "x-extra": [1]})
    assert misshapen(doc, EXPORT) is None
    assert misshapen({"resourceSpans": None}, EXPORT) is None
    assert misshapen({"resource_spans": [{"scope_spans": []}]}, EXPORT) is None
