"""Every read route answers 503 with ``Retry-After`` (never 500) while a store it needs is
down: the graph server gone, the broker gone, the vector index closed or reopening.

The API runs in process against real servers and real ports nobody listens on; MCP tools
reach the same routes and carry the 503 in their error.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from memstream.keys import KeyStore
from memstream.projection.embedded import ensure_default_version
from memstream.projection.projectors import VectorProjector
from memstream.settings import Settings
from memstream.stack.net import free_port
from memstream.stack.servers import Server
from memstream_api.app import create_app
from memstream_api.context import context_of
from messages_standin import MessagesStandin
from pydantic import SecretStr
from stackproc import wait_until

BASE = "http://127.0.0.1:8080"  # a loopback Host: MCP refuses others


def reads() -> list[tuple[str, str, dict[str, Any] | None]]:
    """(method, path, JSON body) of every read route, with hostile-looking but valid input."""
    subject = "Éloïse Martin-Duval"
    return [
        ("POST", "/v1/checkout", {"query": "where does Éloïse live now?"}),
        ("POST", "/v1/checkout", {"query": "what did joão say", "purpose": "planning"}),
        ("POST", "/v1/recall", {"query": "harbour crane", "k": 5}),
        ("POST", "/v1/search", {"query": "harbour crane", "altitude": "fact"}),
        ("POST", "/v1/search", {"query": "harbour crane", "altitude": "latent"}),
        ("POST", "/v1/summarize_recall", {"query": "what happened at the harbour?"}),
        ("GET", "/v1/lineage/ev-1", None),
        ("GET", "/v1/latents", None),
        ("GET", "/v1/invalidations", None),
        ("POST", "/v1/invalidate", {"target_ids": ["ev-1"], "reason": "wrong"}),
        ("POST", f"/v1/invalidations/{uuid.uuid4().hex}/accept", {}),
        ("DELETE", f"/v1/subjects/{subject}", None),
        ("DELETE", f"/v1/subjects/{subject}?dry_run=true", None),
    ]


def call(client: TestClient, key: str, method: str, path: str, body: Any) -> httpx.Response:
    return client.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})


def mcp_checkout(client: TestClient, key: str) -> dict[str, Any]:
    r = client.post(
        "/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "checkout", "arguments": {"query": "where is the crane?"}},
        },
        headers={
            "Authorization": f"Bearer {key}",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()["result"]
    return result


def assert_503(r: httpx.Response, what: str) -> None:
    assert r.status_code == 503, f"{what}: {r.status_code} {r.text[:300]}"
    assert int(r.headers["retry-after"]) > 0, what
    assert r.json()["detail"], what


@pytest.fixture
def llm(standin: MessagesStandin, monkeypatch: pytest.MonkeyPatch) -> SecretStr:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", standin.url)
    return SecretStr("test-key")


@contextmanager
def api(settings: Settings, bootstrap: str) -> Iterator[tuple[TestClient, str]]:
    ensure_default_version(settings)
    key = KeyStore.from_settings(settings).create(f"outage-{uuid.uuid4().hex[:8]}")
    app = create_app(settings, bootstrap, project_vectors=True)
    with TestClient(app, base_url=BASE) as client:
        yield client, key


def test_with_the_graph_server_and_the_broker_down_every_read_is_503(
    tmp_path: Path, llm: SecretStr
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        falkordb_url=f"redis://127.0.0.1:{free_port()}",
        falkordb_password=SecretStr("irrelevant"),
        anthropic_api_key=llm,
    )
    with api(settings, f"127.0.0.1:{free_port()}") as (client, key):
        manager = context_of(client.app).serving.vectors
        wait_until(lambda: manager.projector("v1") is not None, 60, "the index to open")
        for method, path, body in reads():
            assert_503(call(client, key, method, path, body), f"{method} {path}")
        result = mcp_checkout(client, key)
        assert result["isError"] and "HTTP 503" in result["content"][0]["text"]
        # events need neither store: the outbox accepts them
        event = {"stream": "s1", "type": "message.user", "payload": {"text": "crane \u00e9"}}
        assert call(client, key, "POST", "/v1/events", event).status_code == 202
        # feedback names memories, which cannot be checked without the graph: 503, retry
        feedback = {"target_ids": ["ev-1"], "signal": 1.0}
        assert_503(call(client, key, "POST", "/v1/feedback", feedback), "POST /v1/feedback")


def test_with_the_vector_index_closed_or_reopening_every_read_is_503_or_answers(
    tmp_path: Path, falkordb_server: Server, llm: SecretStr
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        falkordb_url=f"redis://127.0.0.1:{falkordb_server.port}",
        falkordb_password=SecretStr(falkordb_server.password),
        anthropic_api_key=llm,
    )
    with api(settings, f"127.0.0.1:{free_port()}") as (client, key):
        manager = context_of(client.app).serving.vectors
        wait_until(lambda: manager.projector("v1") is not None, 60, "the index to open")
        projector = manager.projector("v1")
        assert isinstance(projector, VectorProjector)
        assert call(client, key, "POST", "/v1/recall", {"query": "crane"}).status_code == 200
        projector.index.close()  # what a projector restart does to the index reads hold
        for method, path, body in reads():
            r = call(client, key, method, path, body)
            if r.status_code != 503:  # a route that needs no vectors answers
                assert r.status_code < 500, f"{method} {path}: {r.status_code} {r.text[:300]}"
            else:
                assert_503(r, f"{method} {path}")
        for path in ("/v1/checkout", "/v1/recall", "/v1/summarize_recall"):
            assert_503(call(client, key, "POST", path, {"query": "crane"}), path)
        result = mcp_checkout(client, key)
        assert result["isError"] and "HTTP 503" in result["content"][0]["text"]
        manager.stop_all()  # reopening: no projector holds the index yet
        assert_503(call(client, key, "POST", "/v1/checkout", {"query": "crane"}), "reopening")
