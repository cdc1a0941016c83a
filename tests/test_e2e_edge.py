"""The edge of a running stack (`memstream up`, short timeouts): hostile ids and text on every
route answer 422 naming the field and never 5xx; a poison record produced straight to Kafka is
dead-lettered with its reason while another tenant goes on; bodies over the limit are refused
before they are sent; half-sent requests are closed while the API keeps answering."""

from __future__ import annotations

import base64
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import anyio
import httpx
import orjson
import pytest
from confluent_kafka import Message, Producer
from mcpcall import call_tool, text_of
from memstream.kafka.topics import DLQ, RAW
from memstream.sdk import MemoryClient
from stackproc import RunningStack, memstream, start_stack, wait_until
from topicread import read_topic

HOSTILE = "edge-a"  # the tenant that sends what no store can hold
NEIGHBOUR = "edge-b"  # the tenant whose memory must go on regardless
TIMEOUT_S = 2  # the stack's header and body timeouts
JSON_LIMIT = 1 << 20  # the default body limit of every route but ingest
ENV = {"MEMSTREAM_API_HEADER_TIMEOUT_S": str(TIMEOUT_S), "MEMSTREAM_API_BODY_TIMEOUT_S": "2"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    s = start_stack(tmp_path_factory.mktemp("edge") / "data", env=dict(ENV))
    try:
        yield s
    finally:
        s.stop()


@dataclass
class Api:
    stack: RunningStack
    keys: dict[str, str]

    def call(self, tenant: str, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.keys[tenant]}", **kw.pop("headers", {})}
        return httpx.request(method, self.stack.api_url + path, headers=headers, timeout=60, **kw)


@pytest.fixture(scope="module")
def api(stack: RunningStack) -> Api:
    keys = {
        t: memstream("keys", "create", "--tenant", t, data_dir=stack.data_dir).stdout.strip()
        for t in (HOSTILE, NEIGHBOUR)
    }
    out = Api(stack, keys)
    # Reads answer 503 until the first projection version is live.
    wait_until(
        lambda: out.call(HOSTILE, "POST", "/v1/recall", json={"query": "x"}).status_code == 200,
        90,
        "a live projection",
    )
    return out


def event(**fields: Any) -> dict[str, Any]:
    payload = fields.pop("payload", {"text": "hello"})
    return {"stream": "chat-1", "type": "message.user", "payload": payload, **fields}


# (method, path, JSON body or raw bytes, the field the 422 names)
Case = tuple[str, str, Any, str]
EVENTS: list[Case] = [
    ("POST", "/v1/events", event(payload={"text": "a\x00b"}), "payload.text"),
    ("POST", "/v1/events", event(agent="bot\x01"), "agent"),
    ("POST", "/v1/events", event(metadata={"note": "x\x00"}), "metadata.note"),
    ("POST", "/v1/events", event(metadata={"k\x00": 1}), "metadata"),
    (
        "POST",
        "/v1/events",
        event(type="tool.result", payload={"tool": "ls", "output": {"rows": ["ok", "a\x00"]}}),
        "payload.output",
    ),
    (
        "POST",
        "/v1/events",
        event(type="tool.call", payload={"tool": "ls", "arguments": {"path\x00": "/"}}),
        "payload.arguments",
    ),
    (
        "POST",
        "/v1/events",
        event(
            type="task.outcome",
            payload={"task_id": "t", "status": "success", "used_ids": ["e\x85"]},
        ),
        "payload.used_ids[0]",
    ),
    (
        "POST",
        "/v1/events",
        event(type="memory.feedback", payload={"target_ids": ["x\x7fy"], "signal": 1}),
        "payload.target_ids[0]",
    ),
    (
        "POST",
        "/v1/events",
        event(type="task.started", payload={"task_id": "t" * 201}),
        "payload.task_id",
    ),
    ("POST", "/v1/events", {"events": [event(), event(payload={"text": "\x00"})]}, "payload.text"),
    (
        "POST",
        "/v1/events",
        b'{"stream":"s","type":"message.user","payload":{"text":"a\\ud800b"}}',
        "payload.text",
    ),
]
ROUTES: list[Case] = [
    ("POST", "/v1/checkout", {"query": "a\x00b"}, "query"),
    ("POST", "/v1/checkout", {"query": "q", "task_id": "t\x85"}, "task_id"),
    ("POST", "/v1/checkout", {"query": "q", "stream": "s\x00"}, "stream"),
    ("POST", "/v1/recall", {"query": "a\x00"}, "query"),
    ("POST", "/v1/recall", {"query": "q", "stream": "s\x00"}, "stream"),
    ("POST", "/v1/search", {"query": "a\x00"}, "query"),
    ("POST", "/v1/summarize_recall", {"query": "a\x00"}, "query"),
    ("POST", "/v1/feedback", {"target_ids": ["x\x00y"], "signal": 1}, "target_ids[0]"),
    ("POST", "/v1/feedback", {"target_ids": ["x"], "signal": 1, "reason": "\x00"}, "reason"),
    ("POST", "/v1/feedback", b'{"target_ids":["a\\udc00"],"signal":1}', "target_ids[0]"),
    ("POST", "/v1/invalidate", {"target_ids": ["x\x00y"], "reason": "r"}, "target_ids[0]"),
    ("POST", "/v1/invalidate", {"target_ids": ["x"], "reason": "a\x00"}, "reason"),
    ("POST", "/v1/invalidations/x%00y/accept", None, "path.proposal_id"),
    ("POST", "/v1/invalidations/x%01y/reject", None, "path.proposal_id"),
    ("POST", "/v1/invalidations/p-1/accept", {"reason": "a\x00"}, "reason"),
    ("GET", "/v1/lineage/x%00y", None, "path.item_id"),
    ("GET", "/v1/lineage/x%7Fy", None, "path.item_id"),
    ("GET", "/v1/lineage/x%C2%85y", None, "path.item_id"),
    ("GET", "/v1/lineage/" + "x" * 201, None, "path.item_id"),
    ("GET", "/v1/latents?stream=x%00y", None, "query.stream[0]"),  # a repeatable parameter
    ("DELETE", "/v1/subjects/a%00b?dry_run=true", None, "path.subject"),
]


def _send(api: Api, method: str, path: str, body: Any) -> httpx.Response:
    if isinstance(body, bytes):  # a lone surrogate cannot be encoded by a JSON library
        headers = {"content-type": "application/json"}
        return api.call(HOSTILE, method, path, content=body, headers=headers)
    return api.call(HOSTILE, method, path, json=body)


@pytest.mark.parametrize(("method", "path", "body", "field"), EVENTS + ROUTES)
def test_hostile_ids_and_text_are_422_naming_the_field(
    api: Api, method: str, path: str, body: Any, field: str
) -> None:
    r = _send(api, method, path, body)
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == field, r.text
    assert field in r.json()["detail"]


FRIENDLY_EVENT = event(
    agent="Zoë Ängström",
    payload={"text": "東京で会いましょう 🙂\ttab, ESC \x1b[1mbold\x1b[0m, DEL \x7f, NEL \x85"},
    metadata={"note": "café ☕ in Kraków", "n": 3},
)


@pytest.mark.parametrize(
    ("method", "path", "body", "statuses"),
    [
        ("POST", "/v1/events", FRIENDLY_EVENT, {202}),
        ("POST", "/v1/checkout", {"query": "Où habite Zoë Ängström ? 東京 🙂\t"}, {200}),
        ("POST", "/v1/recall", {"query": "Zoë\x1b[0m Kraków", "stream": "chat-1"}, {200}),
        ("POST", "/v1/search", {"query": "東京 🙂", "altitude": "episode"}, {200}),
        # names no memory: refused, the id listed (tests/test_e2e_learning.py: accepted ids)
        ("POST", "/v1/feedback", {"target_ids": ["évènement-東京-🙂"], "signal": -1}, {404}),
        ("GET", "/v1/lineage/" + quote("évènement-東京-🙂"), None, {404}),
        ("GET", "/v1/latents?stream=chat-1", None, {200}),
        ("POST", "/v1/invalidations/" + quote("évènement 東京") + "/accept", None, {404}),
        ("DELETE", "/v1/subjects/" + quote("Zoë Ängström") + "?dry_run=true", None, {200}),
    ],
)
def test_accented_cjk_emoji_and_control_text_pass(
    api: Api, method: str, path: str, body: Any, statuses: set[int]
) -> None:
    r = _send(api, method, path, body)
    assert r.status_code in statuses, r.text


def test_an_mcp_tool_refuses_a_nul_id_naming_the_argument(api: Api) -> None:
    args = {"item_id": "x\x00y"}
    result = anyio.run(call_tool, api.stack.api_url, api.keys[HOSTILE], "lineage", args)
    text = text_of(result)
    assert result.is_error and "item_id" in text and "U+0000" in text, text


def test_a_nul_produced_straight_to_kafka_is_dead_lettered_and_the_neighbour_goes_on(
    api: Api,
) -> None:
    stack = api.stack
    poison = orjson.dumps(
        {
            "id": "poison-1",
            "tenant": HOSTILE,
            "stream": "s",
            "agent": "sdk",
            "type": "message.user",
            "occurred_at": "2026-05-01T10:00:00Z",
            "payload": {"text": "a\x00b"},
        }
    )
    delivered: list[Message] = []
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    producer.produce(
        RAW, poison, key=f"{HOSTILE}/s", headers=stack.prover.headers(poison),
        on_delivery=lambda _e, m: delivered.append(m),
    )  # fmt: skip
    assert producer.flush(30) == 0 and delivered and delivered[0].error() is None
    with MemoryClient(
        stack.bootstrap, NEIGHBOUR, agent="profile-bot", prover=stack.prover
    ) as client:
        fact = client.emit(
            "profile",
            "fact.asserted",
            {"subject": "Zoë Ängström", "predicate": "lives_in", "object": "Kraków"},
        )
        client.flush()

    def dead() -> dict[str, Any] | None:
        for m in read_topic(stack.bootstrap, DLQ):
            doc: dict[str, Any] = orjson.loads(m.value() or b"{}")
            if doc["raw_b64"] and base64.b64decode(doc["raw_b64"]) == poison:
                return doc
        return None

    wait_until(lambda: dead() is not None, 60, "the poison record in memory.dlq")
    letter = dead()
    assert letter is not None
    assert letter["reason"] == (
        "invalid envelope: message.user.payload.text: holds U+0000 at index 1: "
        "no store can hold NUL"
    )
    assert letter["source"] == {
        "topic": RAW,
        "partition": delivered[0].partition(),
        "offset": delivered[0].offset(),
    }

    def neighbours_fact() -> bool:
        question = {"query": "Where does Zoë Ängström live?"}
        r = api.call(NEIGHBOUR, "POST", "/v1/checkout", json=question)
        return r.status_code == 200 and any(f["fact_id"] == f"{fact}#0" for f in r.json()["facts"])

    wait_until(neighbours_fact, 60, "the neighbour's fact in its checkout")
    assert not any(e["id"] == "poison-1" for e in stack.ledger())


def _address(stack: RunningStack) -> tuple[str, int]:
    url = urlsplit(stack.api_url)
    assert url.hostname is not None and url.port is not None
    return url.hostname, url.port


def _connect(stack: RunningStack) -> socket.socket:
    sock = socket.create_connection(_address(stack), timeout=60)
    sock.settimeout(60)
    return sock


def _read_until_closed(sock: socket.socket) -> bytes:
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def _head(method: str, path: str, **headers: str) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: memstream",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.parametrize(
    ("path", "declared"),
    [
        ("/v1/events", 200 * 1024 * 1024),
        ("/v1/checkout", 2 * JSON_LIMIT),
        ("/healthz", JSON_LIMIT + 1),
    ],
)
def test_a_declared_oversized_body_without_a_key_is_413_before_it_is_sent(
    stack: RunningStack, path: str, declared: int
) -> None:
    with _connect(stack) as sock:
        head = _head(
            "POST" if path != "/healthz" else "GET",
            path,
            **{"Content-Type": "application/json", "Content-Length": str(declared)},
        )
        sock.sendall(head + b'{"events": [')  # and nothing more of the body
        answer = _read_until_closed(sock)  # closed once the body did not come
    assert _status(answer) == 413, answer
    body = orjson.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert "limit" in body["detail"]


def test_a_chunked_body_is_refused_once_it_passes_the_limit(stack: RunningStack) -> None:
    planned = 64 * JSON_LIMIT
    chunk = b"x" * 65536
    sent = 0
    with _connect(stack) as sock:
        sock.sendall(
            _head(
                "POST",
                "/v1/checkout",
                **{"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
            )
        )
        while sent < planned and not select.select([sock], [], [], 0)[0]:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
        answer = _read_until_closed(sock)
    assert _status(answer) == 413, answer
    assert JSON_LIMIT < sent < planned  # answered mid-way: the rest was never sent


def test_half_sent_requests_are_closed_and_the_api_keeps_answering(stack: RunningStack) -> None:
    body_head = _head(
        "POST", "/v1/checkout", **{"Content-Type": "application/json", "Content-Length": "1000"}
    )
    kinds = {
        # headers never finished (slow loris)
        "headers": b"POST /v1/checkout HTTP/1.1\r\nHost: memstream\r\nContent-Le",
        # a body declared, begun and never finished, on a route that reads it
        "body": body_head + b'{"query": "wh',
        # a body declared and never sent, on a route that answers without reading it
        "unread": _head("GET", "/openapi.json", **{"Content-Length": "1000"}),
        # a connection that says nothing at all
        "silent": b"",
    }
    socks: list[tuple[str, socket.socket]] = []
    try:
        for i in range(200):
            kind = list(kinds)[i % len(kinds)]
            sock = _connect(stack)
            sock.sendall(kinds[kind])
            socks.append((kind, sock))
        r = httpx.get(f"{stack.api_url}/healthz", timeout=60)
        assert r.status_code == 200, r.text
        answers: dict[str, list[int]] = {kind: [] for kind in kinds}
        for kind, sock in socks:
            answers[kind].append(_status(_read_until_closed(sock)))
    finally:
        for _, sock in socks:
            sock.close()
    assert set(answers["headers"]) == {408} and set(answers["silent"]) == {408}
    assert set(answers["body"]) == {408}
    assert set(answers["unread"]) == {200}  # answered, then closed when the body never came
    assert httpx.get(f"{stack.api_url}/healthz", timeout=60).status_code == 200


def _answer(sock: socket.socket) -> bytes:
    """One answer on a kept-alive connection (read by its Content-Length); b"" if closed."""
    out = b""
    while b"\r\n\r\n" not in out:
        if not (chunk := sock.recv(65536)):
            return out
        out += chunk
    head, body = out.split(b"\r\n\r\n", 1)
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_an_idle_connection_outlives_the_clients_own_keep_alive(stack: RunningStack) -> None:
    # httpx drops an idle connection after 5 s. A server closing at that moment races the
    # client's next request on it (the client reads a reset): the server waits longer.
    with _connect(stack) as sock:
        sock.sendall(_head("GET", "/healthz"))
        assert _status(_answer(sock)) == 200
        time.sleep(6.0)  # idle past the client's own keep-alive
        sock.sendall(_head("GET", "/healthz"))
        answer = _answer(sock)
        assert answer, "the API closed the idle connection"
        assert _status(answer) == 200


def test_the_limits_are_documented_on_every_operation(stack: RunningStack) -> None:
    spec = httpx.get(f"{stack.api_url}/openapi.json", timeout=60).json()
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            assert {"408", "413"} <= set(op["responses"]), (method, path)
