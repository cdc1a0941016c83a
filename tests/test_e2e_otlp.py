"""Agents' traces in: the OpenTelemetry SDK's own OTLP/HTTP exporter sends a pydantic-ai
agent's GenAI spans (its test model, no network) to ``/v1/traces``; the tool's result is then
found by checkout, lineage leads back to the span, a re-sent export ledgers nothing twice,
and spans without a GenAI operation are counted as left out. JSON exports and refusals too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from memstream.client import MemoryHttpClient
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.test import TestModel
from stackproc import RunningStack, memstream, wait_until

TENANT = "otlp-ceramics"
RESULT = "the anagama kiln at Ostrowo peaked at 1287 °C on the ninth firing"


def key_for(stack: RunningStack, tenant: str = TENANT, *extra: str) -> str:
    done = memstream("keys", "create", "--tenant", tenant, *extra, data_dir=stack.data_dir)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def key(stack: RunningStack) -> str:
    return key_for(stack)


@pytest.fixture(scope="module")
def agent_run(stack: RunningStack, key: str) -> Iterator[tuple[list[ReadableSpan], Any]]:
    """One agent run, exported to memstream by the SDK's exporter and kept in memory too."""
    exporter = OTLPSpanExporter(
        endpoint=f"{stack.api_url}/v1/traces", headers={"Authorization": f"Bearer {key}"}
    )
    kept = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "kiln-desk"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    instrumented = Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))
    agent = Agent(TestModel(), name="kiln-log-agent", capabilities=[instrumented])

    @agent.tool_plain
    def firing_log(kiln: str) -> str:
        """The last firing of a kiln."""
        return RESULT

    result = agent.run_sync("How hot did the anagama kiln get at its last firing?")
    provider.shutdown()
    yield kept.get_finished_spans(), result


def test_the_agents_tool_result_is_found_and_leads_back_to_its_span(
    stack: RunningStack, key: str, agent_run: tuple[list[ReadableSpan], Any]
) -> None:
    spans, _result = agent_run
    tool_span = next(
        s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"
    )
    span_id, trace_id = f"{tool_span.context.span_id:016x}", f"{tool_span.context.trace_id:032x}"
    with MemoryHttpClient(stack.api_url, key) as client:

        def cited() -> bool:
            packet = client.checkout("How hot did the anagama kiln at Ostrowo get?")
            return any("1287" in (s.get("text") or "") for s in packet["snippets"])

        wait_until(cited, 90, "the tool's result in a checkout")
        result_id = f"otel-{trace_id}-{span_id}-result"
        doc = client.lineage(result_id)
    assert [leaf["event_id"] for leaf in doc["leaves"]] == [result_id]
    event = doc["events"][0]
    assert event["type"] == "tool.result" and event["agent"] == "kiln-log-agent"
    assert RESULT in event["text"]
    assert doc["leaves"][0]["stream"] == tool_span.attributes["gen_ai.conversation.id"]


def test_messages_tool_calls_and_the_outcome_are_ledgered_once(
    stack: RunningStack, key: str, agent_run: tuple[list[ReadableSpan], Any]
) -> None:
    spans, _ = agent_run
    conversation = str(spans[0].attributes["gen_ai.conversation.id"])
    with MemoryHttpClient(stack.api_url, key) as client:

        def kinds() -> list[str]:
            hits = client.recall("anagama kiln firing", k=20, stream=conversation)
            return sorted(h["type"] for h in hits if h.get("kind") == "event")

        wanted = ["message.assistant", "message.user", "task.outcome", "tool.call", "tool.result"]
        wait_until(lambda: set(wanted) <= set(kinds()), 90, "every kind of event projected")
        before = kinds()
        ledgered = _ledgered(stack)
        # The same export again, then a marker in the same stream: once the marker is read,
        # the export before it was sequenced, and only the marker was added.
        again = OTLPSpanExporter(
            endpoint=f"{stack.api_url}/v1/traces", headers={"Authorization": f"Bearer {key}"}
        )
        assert again.export(spans) == SpanExportResult.SUCCESS
        marker = client.emit_written([{"stream": conversation, "type": "observation",
                                       "payload": {"text": "kiln log closed"}}])[1]  # fmt: skip
        client.checkout("kiln log closed", after=marker)
        wait_until(lambda: _ledgered(stack) >= ledgered + 1, 30, "the marker ledgered")
        assert _ledgered(stack) == ledgered + 1
    assert before.count("message.user") == 1  # the two chat spans repeat it; one event


def test_a_json_export_with_other_spans_counts_them_as_left_out(
    stack: RunningStack, key: str
) -> None:
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
        "name": "execute_tool glaze_mix", "startTimeUnixNano": "1764000000000000000",
        "endTimeUnixNano": "1764000001000000000", "status": {"code": 2, "message": "no cobalt"},
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "glaze_mix"}},
            {"key": "gen_ai.agent.name", "value": {"stringValue": "glaze-bot"}},
            {"key": "user.id", "value": {"stringValue": "Åsa Lindqvist"}},
        ],
    }  # fmt: skip
    plain = {**span, "spanId": "aaa19b7ec3c1b174", "name": "GET /glazes", "attributes": []}
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [span, plain]}]}]}
    auth = {"Authorization": f"Bearer {key}"}
    answer = httpx.post(f"{stack.api_url}/v1/traces", json=body, headers=auth, timeout=30)
    assert answer.status_code == 200, answer.text
    partial = answer.json()["partialSuccess"]
    # An int64: the protobuf JSON mapping writes it as a string.
    assert partial["rejectedSpans"] == "1"
    assert "without gen_ai.operation.name" in partial["errorMessage"]
    with MemoryHttpClient(stack.api_url, key) as client:
        found = "otel-5b8efff798038103d269b633813fc60c-eee19b7ec3c1b174-result"
        wait_until(lambda: _has(client, found), 90, "the failed tool's result")
        event = client.lineage(found)["events"][0]
    assert event["type"] == "tool.result" and event["user"] == "Åsa Lindqvist"
    assert event["agent"] == "glaze-bot" and "no cobalt" in event["text"]


def _ledgered(stack: RunningStack) -> int:
    doc = json.loads(memstream("ledger", "stats", "--json", data_dir=stack.data_dir).stdout)
    return int(doc["tenants"][TENANT]["events"])


def _has(client: MemoryHttpClient, event_id: str) -> bool:
    try:
        client.lineage(event_id)
    except Exception:
        return False
    return True


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        ({"content-type": "text/plain"}, b"spans", 415),
        ({"content-type": "application/x-protobuf"}, b"\xff\xff\xff not protobuf", 400),
        ({"content-type": "application/json"}, b'{"resourceSpans": 7}', 400),
        ({"content-type": "application/json"}, b'{"resourceSpans": [\x00', 400),
        ({"content-type": "application/json"}, b'[{"resourceSpans": []}]', 400),
        ({"content-type": "application/json"}, b"", 400),
        ({"content-type": "application/json"}, b'{"resourceSpans": ' + b"[" * 3000, 400),
        ({"content-type": "application/json"}, b"[" * 3000 + b"]" * 3000, 400),
        ({}, b'{"resourceSpans": []}', 415),
    ],
)
def test_a_body_that_is_not_an_export_gets_a_4xx_with_its_reason(
    stack: RunningStack, key: str, headers: dict[str, str], body: bytes, status: int
) -> None:
    auth = {"Authorization": f"Bearer {key}", **headers}
    answer = httpx.post(f"{stack.api_url}/v1/traces", content=body, headers=auth, timeout=30)
    assert answer.status_code == status, answer.text
    assert answer.json()["detail"]


def test_a_refused_json_export_names_the_place(stack: RunningStack, key: str) -> None:
    auth = {"Authorization": f"Bearer {key}", "content-type": "application/json"}
    span = b'{"traceId": "00", "spanId": "00", "name": "chat \\udc00 model"}'
    lone = b'{"resourceSpans": [{"scopeSpans": [{"spans": [' + span + b"]}]}]}"
    deep = b'{"resourceSpans": [{"resource": ' + b"[" * 60 + b"]" * 60 + b"}]}"
    for body, said in (
        (lone, "resourceSpans[0].scopeSpans[0].spans[0].name: holds a lone surrogate"),
        (deep, "resourceSpans[0].resource"),
    ):
        answer = httpx.post(f"{stack.api_url}/v1/traces", content=body, headers=auth, timeout=30)
        assert answer.status_code == 400, answer.text
        assert answer.json()["detail"].startswith(said), answer.text


def test_a_key_scoped_to_another_agent_is_refused_whole(stack: RunningStack) -> None:
    scoped = key_for(stack, TENANT, "--scope", "agent=someone-else")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("chat m") as s:
        s.set_attribute("gen_ai.operation.name", "chat")
        s.set_attribute("gen_ai.agent.name", "kiln-log-agent")
        s.set_attribute("gen_ai.input.messages", json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "salt glaze?"}]}]))  # fmt: skip
    sent = OTLPSpanExporter(
        endpoint=f"{stack.api_url}/v1/traces", headers={"Authorization": f"Bearer {scoped}"}
    ).export(exporter.get_finished_spans())
    assert sent == SpanExportResult.FAILURE
    no_key = httpx.post(f"{stack.api_url}/v1/traces", content=b"", timeout=30,
                        headers={"content-type": "application/x-protobuf"})  # fmt: skip
    assert no_key.status_code == 401
