"""Bad input, tried by a machine: schemathesis with every check against the running API.

The OpenAPI document must tell the truth (statuses, media types, headers, bodies, and request
schemas exactly as strict as the validation), no request may get a 5xx, every refusal carries
a JSON ``detail``, and a refused ``POST /v1/events`` or ``POST /v1/feedback`` produces
nothing: the fuzz tenant's raw events and ledger hold exactly the ids of the 2xx answers, the
events of the trace exports accepted (read from their bodies: OTLP's answer lists none) and
what the retrospective pass derived from accepted outcomes.

Runs schemathesis' own engine (what ``st run`` runs: examples, coverage and fuzzing phases);
its pytest plugin does not run on this pytest.
"""

from __future__ import annotations

import base64
import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
import pytest
import schemathesis
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memstream.client import MemoryHttpClient, MemstreamHttpError
from memstream.intake.otlp import json_ids_as_proto, spans_of, translate
from memstream.kafka.topics import DLQ, LEDGER, RAW
from memstream_api.feedback import EXAMPLE_TARGET
from memstream_api.traces import PROTOBUF
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from schemathesis import BaseSchema, Case, CheckContext, Response
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status, events
from stackproc import RunningStack, memstream, wait_until
from topicread import read_topic

FUZZ_TENANT = "fuzz-events"  # only this module's stack, only this key: its events are ours
SEED = 20_241_122
# Per operation and phase; the coverage phase adds its own boundary cases (hundreds).
MAX_EXAMPLES = 25
# `negative_data_rejection`'s default list plus 413: a batch over `maxItems` is refused as
# too large, which the document lists for POST /v1/events.
REJECTIONS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
READ_AFTER_ROUTES = (
    r"^/v1/(checkout|recall|search|summarize_recall|invalidate|streams/\{stream\}/events)$"
)
AFTER_ACCEPTANCE = ["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]
# A scope purge naming no field is refused (422): a schema cannot say "at least one of".
SCOPE_PURGE = r"^/v1/scopes$"
# Which bytes decode as a protobuf export no schema can say: schema-valid bytes may be
# refused (400). tests/test_otlp_mapping.py and tests/test_e2e_otlp.py pin what is accepted.
TRACES = r"^/v1/traces$"
TRACES_ACCEPTANCE = [*AFTER_ACCEPTANCE, "400"]
# A protobuf body is bytes, sent as they are.
schemathesis.serializer.alias("application/x-protobuf", "application/octet-stream")
# Operations with inputs; the two without (healthz, metrics) have a handful of cases.
FUZZED = {
    "POST /v1/events",
    "POST /v1/checkout",
    "POST /v1/recall",
    "POST /v1/feedback",
    "GET /v1/lineage/{item_id}",
    "GET /v1/latents",
    "POST /v1/search",
    "POST /v1/summarize_recall",
    "DELETE /v1/subjects/{subject}",
    "DELETE /v1/scopes",
    "POST /v1/invalidate",
    "GET /v1/invalidations",
    "POST /v1/invalidations/{proposal_id}/accept",
    "POST /v1/invalidations/{proposal_id}/reject",
    "POST /v1/data-keys",
    "POST /v1/traces",
    "GET /v1/streams/{stream}/events",
}
# Operations that write events: their 2xx answers name the ids that must reach the ledger.
WRITES = {
    "POST /v1/events",
    "POST /v1/feedback",
    "DELETE /v1/subjects/{subject}",
    "DELETE /v1/scopes",
    "POST /v1/invalidate",
    "POST /v1/invalidations/{proposal_id}/accept",
    "POST /v1/invalidations/{proposal_id}/reject",
}
OPERATIONS = {"GET /healthz", "GET /metrics", "GET /v1/keys/me", "GET /v1/producer", *FUZZED}
STATEFUL = "stateful"


def _reason(body: bytes) -> str | None:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    detail = doc.get("detail") if isinstance(doc, dict) else None
    return detail if isinstance(detail, str) and detail.strip() else None


@schemathesis.check
def refusal_gives_a_reason(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Every 4xx is JSON with a human-readable ``detail`` string."""
    if 400 <= response.status_code < 500 and _reason(response.content) is None:
        raise AssertionError(f"{response.status_code} without a JSON `detail`: {response.text!r}")
    return None


@dataclass
class Run:
    """What one schemathesis run did and found."""

    failures: list[str] = field(default_factory=list)
    cases: dict[str, int] = field(default_factory=dict)  # per operation, probes included
    statuses: dict[str, set[int]] = field(default_factory=dict)  # per operation
    # ids in the 2xx answers to POST /v1/events and POST /v1/feedback
    accepted_ids: set[str] = field(default_factory=set, repr=False)
    events_accepted: int = 0
    events_refused: int = 0
    server_errors: list[str] = field(default_factory=list)  # what each 5xx said

    def called(self, case: Case, response: Response) -> None:
        """``after_call`` hook: every generated request's answer, bodies whole."""
        label = case.operation.label
        if response.status_code >= 500:
            self.server_errors.append(f"{label} {response.status_code}: {response.text[:300]}")
        if label == "POST /v1/traces" and 200 <= response.status_code < 300:
            self.accepted_ids.update(trace_event_ids(case.media_type, case.body))
        if label not in WRITES:
            return
        if 200 <= response.status_code < 300:
            body = response.json()
            if "tombstone_ids" in body:  # a purge (none on a dry run)
                self.accepted_ids.update(body["tombstone_ids"])
            else:
                self.accepted_ids.update(body["ids"] if "ids" in body else [body["id"]])
        if label != "POST /v1/events":
            return
        if 200 <= response.status_code < 300:
            self.events_accepted += 1
        else:
            self.events_refused += 1

    def scenario(self, event: events.ScenarioFinished) -> None:
        # The stateful phase (sequences following the document's links) has no one label.
        label = event.label or STATEFUL
        recorder = event.recorder
        self.cases[label] = self.cases.get(label, 0) + len(recorder.cases)
        # Interactions include the requests checks send themselves (auth probes).
        for interaction in recorder.interactions.values():
            if interaction.response is not None:
                self.statuses.setdefault(label, set()).add(interaction.response.status_code)
        for checks in recorder.checks.values():
            for check in checks:
                if check.status == Status.FAILURE and check.failure_info is not None:
                    failure = check.failure_info.failure
                    sample = check.failure_info.code_sample
                    status = getattr(failure, "status_code", None)  # a server error's
                    said = f" (HTTP {status})" if status is not None else ""
                    self.failures.append(
                        f"{label} [{check.name}] {failure.title}{said}: {failure.message}\n{sample}"
                    )


def run_schemathesis(stack: RunningStack, extra: dict[str, Any]) -> Run:
    """One ``st run --checks all`` against the stack's API, deterministic, fixed seed."""
    config = SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "checks": {  # every built-in check, 413 counted as a refusal
                "enabled": True,
                "negative_data_rejection": {"expected-statuses": [*REJECTIONS, "5xx"]},
            },
            # A schema-valid `after` whose MAC does not verify (or that names another tenant)
            # is refused by the read routes (422 naming `after`, 403): the MAC cannot be put
            # in a schema. tests/test_e2e_read_after.py pins which refusal each gets.
            "operations": [
                {
                    "include-path-regex": READ_AFTER_ROUTES,
                    "checks": {"positive_data_acceptance": {"expected-statuses": AFTER_ACCEPTANCE}},
                },
                {
                    "include-path-regex": SCOPE_PURGE,
                    "checks": {"positive_data_acceptance": {"expected-statuses": AFTER_ACCEPTANCE}},
                },
                {
                    "include-path-regex": TRACES,
                    "checks": {
                        "positive_data_acceptance": {"expected-statuses": TRACES_ACCEPTANCE}
                    },
                },
            ],
            # A purge answers once every store obeyed it or its wait_s (up to 120 s) ran out.
            "request-timeout": 150,
            # No example database: a failure saved by one run must not steer the next.
            "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
            **extra,
        }
    )
    schema: BaseSchema = schemathesis.openapi.from_url(
        f"{stack.api_url}/openapi.json", config=config
    )
    run = Run()

    @schema.hook
    def after_call(_context: Any, case: Case, response: Response) -> None:
        run.called(case, response)

    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished) and event.is_test_scenario:
            run.scenario(event)
        elif isinstance(event, events.NonFatalError):
            run.failures.append(f"{event.label}: error {event.value!r}")
        elif isinstance(event, events.FatalError):
            raise event.exception
        elif isinstance(event, events.EngineFinished):
            run.failures += [f"after run: {f.title}: {f.message}" for f in event.failures]
    run.failures = sorted(set(run.failures))
    return run


@pytest.fixture(scope="module")
def stack(llm_stack: RunningStack) -> RunningStack:
    """The module's stack with summarize_recall on (a Messages API stand-in), so its 2xx
    answers are fuzzed too; the keyless 503 is tested in test_e2e_summarize."""
    return llm_stack


@pytest.fixture(scope="module")
def fuzz_key(stack: RunningStack) -> str:
    args = ("keys", "create", "--tenant", FUZZ_TENANT)
    return memstream(*args, data_dir=stack.data_dir).stdout.strip()


def _values(stack: RunningStack, topic: str) -> list[dict[str, Any]]:
    """The topic's events opened with the stack's data keys (raw and ledger are sealed)."""
    docs = [orjson.loads(m.value() or b"{}") for m in read_topic(stack.bootstrap, topic)]
    return stack.open_entries(docs)


def _derived(value: dict[str, Any]) -> bool:
    """Written by the retrospective pass (feedback on an accepted task.outcome)."""
    return value.get("agent") == "retrospective" and value.get("stream") == "retrospective"


def _derived_then_purged(value: dict[str, Any]) -> bool:
    """Written by the retrospective pass, then reached by a purge: the ledger keeps its
    position and stream, while its agent and causes went with its data key."""
    return "purged" in value and value.get("stream") == "retrospective"


def _dead_letters_of(stack: RunningStack, tenant: str) -> list[dict[str, Any]]:
    """The dead letters whose copied record is one of ``tenant``'s."""
    found = []
    for m in read_topic(stack.bootstrap, DLQ):
        letter = orjson.loads(m.value() or b"{}")
        try:
            record = orjson.loads(base64.b64decode(letter.get("raw_b64") or ""))
        except (ValueError, orjson.JSONDecodeError):
            continue  # no JSON object: names no tenant
        if isinstance(record, dict) and record.get("tenant") == tenant:
            found.append(letter)
    return found


def trace_event_ids(media_type: str | None, body: Any) -> set[str]:
    """The ids of the events an accepted trace export wrote (its answer, OTLP's own
    ``partialSuccess``, lists none): the same translation the route makes, on the body sent.
    Deterministic: an event's id comes from its span or its message, never the clock."""
    export = ExportTraceServiceRequest()
    if media_type == PROTOBUF:
        export.ParseFromString(body)
    else:
        # a copy: the ids are rewritten in place, and the case keeps its body
        doc = json_ids_as_proto(copy.deepcopy(body))
        json_format.ParseDict(doc, export, ignore_unknown_fields=True)
    return {e.id for e in translate(spans_of(export), FUZZ_TENANT, datetime.now(UTC)).events}


def test_the_ids_an_accepted_trace_export_wrote_are_read_from_its_body() -> None:
    trace, span_id = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
    span = {
        "traceId": trace, "spanId": span_id, "name": "execute_tool kiln_log",
        "startTimeUnixNano": "1764000000000000000", "endTimeUnixNano": "1764000001000000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "kiln_log"}},
        ],
    }  # fmt: skip
    plain = {**span, "spanId": "aaa19b7ec3c1b174", "attributes": []}
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [span, plain]}]}]}
    ids = trace_event_ids("application/json", body)
    assert f"otel-{trace}-{span_id}-result" in ids and not any("aaa19b" in i for i in ids)
    encoded = ExportTraceServiceRequest()
    json_format.ParseDict(json_ids_as_proto(copy.deepcopy(body)), encoded)
    assert trace_event_ids(PROTOBUF, encoded.SerializeToString()) == ids


def _ids(stack: RunningStack, topic: str) -> set[str]:
    return {v["id"] for v in _values(stack, topic) if v.get("tenant") == FUZZ_TENANT}


def _only_accepted(stack: RunningStack, topic: str, accepted: set[str]) -> None:
    """The fuzz tenant's records are the accepted events, plus what the retrospective pass
    derived from accepted outcomes (``caused_by``), and nothing else."""
    mine = [v for v in _values(stack, topic) if v.get("tenant") == FUZZ_TENANT]
    assert {v["id"] for v in mine} >= accepted
    for v in mine:
        if v["id"] not in accepted and not _derived_then_purged(v):
            assert _derived(v) and set(v["caused_by"]) <= accepted, orjson.dumps(v).decode()


def seed_the_documented_target(stack: RunningStack, key: str) -> str:
    """The event the document's feedback example names, in memory: the fuzz reaches the
    202 of POST /v1/feedback (ids that name nothing are 404)."""
    with MemoryHttpClient(stack.api_url, key) as client:
        client.emit([{"id": EXAMPLE_TARGET, "stream": "seed", "type": "message.user",
                      "payload": {"text": "a memory the feedback example names"}}])  # fmt: skip
        wait_until(lambda: _lineage_ok(client), 60, "the documented target in memory")
    return EXAMPLE_TARGET


def _lineage_ok(client: MemoryHttpClient) -> bool:
    try:
        client.lineage(EXAMPLE_TARGET)
    except MemstreamHttpError:
        return False
    return True


# A fixed amount of work, but a large one: hundreds of cases, among them dozens of real
# purges, each planned from the graph and reading three topics to their end (1.3 s for a
# subject that names nothing, beside two other suites). Beside a suite it outgrows 300 s.
@pytest.mark.timeout(1200)
def test_fuzz_with_a_key_finds_nothing_and_refusals_produce_nothing(
    stack: RunningStack, fuzz_key: str
) -> None:
    seeded = seed_the_documented_target(stack, fuzz_key)
    run = run_schemathesis(stack, {"headers": {"Authorization": f"Bearer {fuzz_key}"}})
    run.accepted_ids.add(seeded)
    assert not run.failures, f"{len(run.failures)} failure(s):\n\n" + "\n\n".join(
        run.failures + run.server_errors
    )
    # It ran, on every operation, and tried both sides of POST /v1/events.
    assert set(run.cases) - {STATEFUL} == OPERATIONS, run.cases
    assert min(run.cases[label] for label in FUZZED) >= MAX_EXAMPLES, run.cases
    assert run.events_accepted >= 5 and run.events_refused >= 50, run
    assert {202, 401, 403, 413, 422} <= run.statuses["POST /v1/events"], run.statuses
    assert {202, 401, 422} <= run.statuses["POST /v1/feedback"], run.statuses
    assert {200, 400, 401} <= run.statuses["POST /v1/traces"], run.statuses

    # A 2xx means durable (spooled or acknowledged), not yet sequenced: wait for the ledger.
    wait_until(lambda: _ids(stack, LEDGER) >= run.accepted_ids, 120, "accepted events ledgered")
    _only_accepted(stack, LEDGER, run.accepted_ids)
    _only_accepted(stack, RAW, run.accepted_ids)  # nothing was produced for a refused request
    # The stack is shared: other modules' tenants may dead-letter on purpose; none of ours.
    assert _dead_letters_of(stack, FUZZ_TENANT) == [], "an accepted event was dead-lettered"


def test_fuzz_without_a_key_finds_nothing_and_every_v1_call_is_401(stack: RunningStack) -> None:
    # The retrospective pass may still write feedback on the first test's outcomes.
    raw_before = len([v for v in _values(stack, RAW) if not _derived(v)])
    # Without a key every body is refused before it is read: boundary cases add nothing.
    run = run_schemathesis(stack, {"phases": {"coverage": {"enabled": False}}})
    assert not run.failures, f"{len(run.failures)} failure(s):\n\n" + "\n\n".join(
        run.failures + run.server_errors
    )
    assert set(run.cases) - {STATEFUL} == OPERATIONS, run.cases
    assert min(run.cases[label] for label in FUZZED) >= MAX_EXAMPLES, run.cases
    for label, statuses in run.statuses.items():
        # FastAPI decodes a JSON body (400, 422) before it asks for the key; 405 comes first too.
        if " /v1/" in label:
            assert 401 in statuses and statuses <= {400, 401, 405, 422}, (label, statuses)
    assert run.events_accepted == 0 and not run.accepted_ids
    assert len([v for v in _values(stack, RAW) if not _derived(v)]) == raw_before


# -- hostile shapes: lone surrogates in keys at any depth, nesting past any parser's limit ----

HOSTILE_TENANT = "fuzz-hostile"
SURROGATES = ["\\ud800", "\\udfff", "\\udbff\\udbff", "a\\udc00b"]  # as JSON escapes
DETAIL_CHARS = 1200  # a refusal names the place and the fault, never the value whole


@st.composite
def hostile_json(draw: st.DrawFn) -> bytes:
    """A JSON text (bytes, as sent) nesting up to 400 levels, whose keys and strings may hold
    lone surrogates, NUL and control characters, and a long value somewhere."""
    depth = draw(st.sampled_from([0, 3, 33, 47, 49, 60, 260, 400]))
    key = draw(st.sampled_from(["k", "text", "query", "payload", "metadata", "x\\u0000"]))
    bad = draw(st.sampled_from([*SURROGATES, "\\u0000", "\\u001b", "ok"]))
    long_value = draw(st.booleans())
    leaf = f'"{bad}{"y" * 200_000 if long_value else ""}"'
    for level in range(depth):
        leaf = f'{{"{bad if level % 7 == 0 else key}": {leaf}}}' if level % 2 else f"[{leaf}]"
    return f'{{"{key}{bad}": {leaf}, "query": "q", "stream": "s"}}'.encode()


def hostile_events() -> list[bytes]:
    """Events with a surrogate key in metadata and in tool output at depth, and tool output
    nesting past the value limit (32), the body limit (48) and every parser's (~255, ~1000)."""

    def tool(output: str) -> bytes:
        return ('{"stream": "s", "type": "tool.result", '
                f'"payload": {{"tool": "t", "output": {output}}}}}').encode()  # fmt: skip

    def deep(n: int) -> str:
        return "[" * n + "1" + "]" * n

    return [
        b'{"stream": "s", "type": "message.user", "payload": {"text": "hi"}, '
        b'"metadata": {"k\\ud800": "v"}}',
        b'{"events": [{"stream": "s", "type": "message.user", "payload": {"text": "hi"}, '
        b'"metadata": {"\\udfff": 1}}]}',
        tool('{"a": [{"b": {"c\\udbff": 1}}]}'),
        tool(deep(40)),
        tool(deep(300)),
        tool(deep(5_000)),
        tool(deep(200_000)),
        tool('"' + "\\ud800" * 1000 + '"'),
    ]


def json_routes(stack: RunningStack) -> list[tuple[str, str]]:
    """(method, path) of every operation that takes a JSON body, path ids filled."""
    doc = httpx.get(f"{stack.api_url}/openapi.json", timeout=30).json()
    out = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if "application/json" in op.get("requestBody", {}).get("content", {}):
                out.append((method.upper(), path.replace("{proposal_id}", "p-1")))
    return out


def hold_to_the_rule(http: httpx.Client, method: str, path: str, body: bytes) -> None:
    headers = {"content-type": "application/json"}
    resp = http.request(method, path, content=body, headers=headers)
    assert 400 <= resp.status_code < 500, (method, path, resp.status_code, resp.text[:300])
    detail = _reason(resp.content)
    assert detail is not None and len(resp.text) < 4 * DETAIL_CHARS, (path, resp.text[:300])
    assert len(detail) < DETAIL_CHARS, (path, len(detail), detail[:300])
    # The connection answers its next request.
    assert http.get("/healthz").status_code == 200


@pytest.mark.timeout(600)
def test_hostile_shapes_get_a_4xx_on_every_route(stack: RunningStack) -> None:
    routes = json_routes(stack)
    assert ("POST", "/v1/events") in routes and len(routes) >= 9, routes
    key = memstream("keys", "create", "--tenant", HOSTILE_TENANT, data_dir=stack.data_dir)
    auth = {"Authorization": f"Bearer {key.stdout.strip()}"}
    with httpx.Client(base_url=stack.api_url, headers=auth, timeout=60) as http:
        for body in hostile_events():
            hold_to_the_rule(http, "POST", "/v1/events", body)

        @settings(max_examples=40, derandomize=True, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(body=hostile_json(), route=st.sampled_from(routes))
        def each(body: bytes, route: tuple[str, str]) -> None:
            hold_to_the_rule(http, *route, body)

        each()
    # Nothing of it was produced: every write was refused.
    values = [orjson.loads(m.value() or b"{}") for m in read_topic(stack.bootstrap, RAW)]
    assert not [v for v in values if v.get("tenant") == HOSTILE_TENANT]
