"""Agents' own traces as events: OTLP spans that follow the GenAI semantic conventions.

What maps to what (the rule is the span's ``gen_ai.operation.name``):

- ``chat`` / ``text_completion`` / ``generate_content``: every text part of its
  ``gen_ai.input.messages`` and ``gen_ai.output.messages`` becomes ``message.user`` or
  ``message.assistant`` (system instructions and tool parts do not: the tool spans carry
  those);
- ``execute_tool``: ``tool.call`` (``gen_ai.tool.name``, ``gen_ai.tool.call.id``, its
  arguments) and ``tool.result`` (``gen_ai.tool.call.result``; ``is_error`` when the span's
  status is an error), the result caused by the call;
- ``invoke_agent``: ``task.outcome`` of the invocation, ``failure`` when the span's status
  is an error, else ``success``.

Scope: the agent is ``gen_ai.agent.name`` (else ``gen_ai.agent.id``, else the resource's
``service.name``); the user is ``user.id`` (else ``enduser.id``); the stream is
``gen_ai.conversation.id`` (else ``session.id``, else ``trace-<trace id>``).

Every event's id is made from the trace, the span and its place in it, so a re-sent export,
and the history a chat span repeats from the spans before it, ledger nothing twice; its
metadata names the trace, span and parent span. A span without ``gen_ai.operation.name``
(an HTTP call, a database query) is ignored and counted; a span whose events do not
validate is refused whole, with its reason, and the others are written.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from memstream.events import Event
from memstream.events.envelope import fill_defaults
from memstream.wire import shorten

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor

CHAT_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
STATUS_ERROR = 2  # OTLP's Status.StatusCode STATUS_CODE_ERROR
_UNSAFE = re.compile(r"[^A-Za-z0-9._:@-]+")
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")


def safe_name(value: object) -> str:
    """``value`` as a stream or id: as it is where it is one already, else its safe
    characters and a digest of the whole (two conversations never share a stream)."""
    text = str(value)
    if _SAFE.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{_UNSAFE.sub('-', text).strip('-._:@')[:100]}-{digest}".lstrip("-")


@dataclass(frozen=True)
class Span:
    """One span as the mapping reads it (ids as lower-case hex)."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start: datetime
    end: datetime
    attributes: Mapping[str, Any]
    error: bool
    status_message: str = ""


@dataclass
class Translated:
    """The events of an export, and the spans left out: ``ignored`` (no GenAI operation)
    and ``refused`` (span id → why)."""

    events: list[Event] = field(default_factory=list)
    ignored: int = 0
    refused: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        parts = []
        if self.ignored:
            parts.append(f"{self.ignored} spans without gen_ai.operation.name ignored")
        parts += [f"span {s}: {why}" for s, why in list(self.refused.items())[:5]]
        return "; ".join(parts)


def translate(spans: Iterable[Span], tenant: str, now: datetime) -> Translated:
    """The events ``spans`` map to for ``tenant``; see the module note for the rule."""
    done = Translated()
    seen: set[str] = set()
    for span in spans:
        operation = span.attributes.get("gen_ai.operation.name")
        if not isinstance(operation, str):
            done.ignored += 1
            continue
        try:
            events = [fill_defaults(e, tenant, now, e["agent"]) for e in _events(span, operation)]
        except (ValidationError, ValueError, TypeError) as exc:
            done.refused[span.span_id] = _why(exc)
            continue
        # A chat span repeats the history the spans before it carried: one event an id.
        for event in events:
            if event.id not in seen:
                seen.add(event.id)
                done.events.append(event)
    return done


def _why(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:])
        return shorten(f"{where}: {first['msg']}")
    return shorten(str(exc))


def _events(span: Span, operation: str) -> list[dict[str, Any]]:
    if operation in CHAT_OPERATIONS:
        return list(_messages(span))
    if operation == "execute_tool":
        return _tool(span)
    if operation == "invoke_agent":
        return [_outcome(span)]
    return []


def _base(span: Span, kind: str, suffix: str, at: datetime) -> dict[str, Any]:
    a = span.attributes
    agent = a.get("gen_ai.agent.name") or a.get("gen_ai.agent.id") or a.get("service.name")
    user = a.get("user.id") or a.get("enduser.id")
    stream = a.get("gen_ai.conversation.id") or a.get("session.id") or f"trace-{span.trace_id}"
    return {
        "id": f"otel-{span.trace_id}-{span.span_id}-{suffix}",
        "stream": safe_name(stream),
        "type": kind,
        "agent": str(agent or "otel"),
        "user": str(user) if user else None,
        "occurred_at": at,
        "metadata": {
            "otel.trace_id": span.trace_id,
            "otel.span_id": span.span_id,
            "otel.parent_span_id": span.parent_span_id or None,
            "otel.span_name": span.name[:200],
        },
    }


def _messages(span: Span) -> Iterator[dict[str, Any]]:
    """The text of each message, its id from the conversation's history: the same message
    at the same place in a later chat span's input gets the same id."""
    history = [*_parsed(span, "gen_ai.input.messages"), *_parsed(span, "gen_ai.output.messages")]
    thread = span.attributes.get("gen_ai.conversation.id") or span.trace_id
    for place, message in enumerate(history):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            continue
        text = "\n".join(
            str(p.get("content"))
            for p in message.get("parts") or []
            if isinstance(p, dict) and p.get("type") == "text" and p.get("content")
        )
        if not text.strip():
            continue
        digest = hashlib.sha256(f"{thread}\0{place}\0{role}\0{text}".encode()).hexdigest()[:32]
        event = _base(span, f"message.{role}", "", span.start if role == "user" else span.end)
        event["id"] = f"otel-{digest}"
        event["payload"] = {"text": text}
        yield event


def _parsed(span: Span, key: str) -> list[Any]:
    raw = span.attributes.get(key)
    if raw is None:
        return []
    value = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, list):
        raise ValueError(f"{key} is not a list of messages")
    return value


def _tool(span: Span) -> list[dict[str, Any]]:
    a = span.attributes
    tool = a.get("gen_ai.tool.name")
    if not isinstance(tool, str) or not tool:
        raise ValueError("execute_tool without gen_ai.tool.name")
    call_id = a.get("gen_ai.tool.call.id")
    call = _base(span, "tool.call", "call", span.start)
    arguments = _json_value(a.get("gen_ai.tool.call.arguments"))
    call["payload"] = {
        "tool": safe_name(tool),
        "call_id": safe_name(call_id) if call_id else None,
        "arguments": arguments if isinstance(arguments, dict) else {"value": arguments},
    }
    result = _base(span, "tool.result", "result", span.end)
    output = _json_value(a.get("gen_ai.tool.call.result"))
    if output is None and span.error:
        output = span.status_message or None
    result["payload"] = {**call["payload"], "output": output, "is_error": span.error}
    del result["payload"]["arguments"]
    result["caused_by"] = [call["id"]]
    return [call, result]


def _json_value(raw: Any) -> Any:
    """An attribute that holds JSON as text, decoded; any other value as it is."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def _outcome(span: Span) -> dict[str, Any]:
    event = _base(span, "task.outcome", "outcome", span.end)
    agent_call = span.attributes.get("gen_ai.agent.call.id")
    task = safe_name(agent_call or f"{span.trace_id}-{span.span_id}")
    event["payload"] = {"task_id": task, "status": "failure" if span.error else "success"}
    return event


def spans_of(request: Any) -> Iterator[Span]:
    """The spans of an ``ExportTraceServiceRequest`` (the protobuf message), each with its
    resource's attributes under its own."""
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                yield Span(
                    trace_id=s.trace_id.hex(),
                    span_id=s.span_id.hex(),
                    parent_span_id=s.parent_span_id.hex(),
                    name=s.name,
                    start=_time(s.start_time_unix_nano),
                    end=_time(s.end_time_unix_nano or s.start_time_unix_nano),
                    attributes={**resource, **_attributes(s.attributes)},
                    error=s.status.code == STATUS_ERROR,
                    status_message=s.status.message,
                )


def _time(nanos: int) -> datetime:
    return datetime.fromtimestamp(nanos / 1e9, UTC)


def _attributes(pairs: Iterable[Any]) -> dict[str, Any]:
    return {kv.key: _any(kv.value) for kv in pairs}


def _any(value: Any) -> Any:
    """An OTLP ``AnyValue`` as Python."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_any(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _any(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, kind) if kind else None


def json_ids_as_proto(doc: Any) -> Any:
    """OTLP/JSON gives trace and span ids in hex; the protobuf JSON mapping reads bytes as
    base64: the ids of ``doc`` rewritten so the protobuf parser reads them right."""
    for resource_spans in _list(doc, "resourceSpans"):
        for scope_spans in _list(resource_spans, "scopeSpans"):
            for span in _list(scope_spans, "spans"):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if isinstance(span, dict) and isinstance(span.get(key), str):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
                for link in _list(span, "links"):
                    for key in ("traceId", "spanId"):
                        if isinstance(link, dict) and isinstance(link.get(key), str):
                            link[key] = base64.b64encode(bytes.fromhex(link[key])).decode()
    return doc


def misshapen(doc: Any, message: Descriptor, place: str = "") -> str | None:
    """Where the JSON ``doc`` is not shaped as ``message``: a message that is no object, a
    repeated field that is no list. Protobuf's JSON parser reads a string where a message
    belongs as an empty message (each character an unknown field, ignored), so without this
    a malformed export would be taken as an empty one."""
    if not isinstance(doc, dict):
        return f"{place or 'the body'} must be an object"
    for name, value in doc.items():
        field = message.fields_by_camelcase_name.get(name) or message.fields_by_name.get(name)
        if field is None or field.message_type is None or value is None:
            continue  # unknown fields are ignored, scalars are the parser's to check
        where = f"{place}.{name}" if place else name
        if not field.is_repeated:
            found = misshapen(value, field.message_type, where)
        elif not isinstance(value, list):
            found = f"{where} must be a list"
        else:
            shapes = (
                misshapen(v, field.message_type, f"{where}[{i}]") for i, v in enumerate(value)
            )
            found = next((s for s in shapes if s is not None), None)
        if found is not None:
            return found
    return None


def _list(doc: Any, key: str) -> list[Any]:
    found = doc.get(key) if isinstance(doc, dict) else None
    return found if isinstance(found, list) else []
