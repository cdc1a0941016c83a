"""Fair share of the read routes on a running stack: a tenant over its share gets 429 with
``Retry-After`` on every read route and through MCP, while another tenant, the other routes,
``/healthz`` and requests without a key are untouched.

The stack runs with a budget of read time so small (0.1 ms of CPU, refilled at 10 µs per
second) that one checkout spends it for minutes: the second read of the same tenant is refused
whatever the machine's speed, and nothing here waits on time. So each tenant that must be
served makes one read, with a key of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession
from memstream.keys import KeyStore
from memstream.metrics import read_samples
from stackproc import RunningStack, start_stack, wait_until
from test_e2e_mcp import http_session, run, text_of

LIMITED = ("/v1/checkout", "/v1/recall", "/v1/search", "/v1/summarize_recall")
TINY_BUDGET = {
    "MEMSTREAM_READ_TENANT_SHARE": "0.00001",
    "MEMSTREAM_READ_TENANT_BURST_S": "0.0001",
}
BODY = {"query": "Où Zoë Ngũgĩ-Lefèvre garde-t-elle les clés ?"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    s = start_stack(tmp_path_factory.mktemp("fair-share") / "data", env=TINY_BUDGET)
    try:
        yield s
    finally:
        s.stop()


def post(stack: RunningStack, key: str | None, path: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(f"{stack.api_url}{path}", json=body, headers=headers, timeout=60)


def fresh_key(stack: RunningStack, tenant: str) -> str:
    return KeyStore(stack.data_dir / "keys.json").create(tenant)


@pytest.fixture(scope="module")
def spent(stack: RunningStack) -> str:
    """A tenant whose overlapping checkouts spent its whole budget; returns its key."""
    # The live vector index opens after start-up (503 until then); each try spends a budget.
    tries = iter(range(10_000))

    def served() -> bool:
        key = fresh_key(stack, f"warm-up-{next(tries)}")
        return post(stack, key, "/v1/checkout", BODY).status_code == 200

    wait_until(served, 90, "checkout to answer")
    key = fresh_key(stack, "Flood_A.1")
    # Reads sent one after another are never charged; reads that overlap the tenant's own
    # (while another tenant read lately) are. Six sent at once overlap unless the machine is
    # so loaded that the server answers each before the next arrives (a checkout of an empty
    # memory takes ~10 ms): then the next six are sent, until the tenant is refused.
    codes: list[int] = []

    def flooded() -> bool:
        with ThreadPoolExecutor(6) as pool:
            codes.extend(
                pool.map(lambda _: post(stack, key, "/v1/checkout", BODY).status_code, range(6))
            )
        return post(stack, key, "/v1/checkout", BODY).status_code == 429

    wait_until(flooded, 60, "six overlapping checkouts to spend the tenant's budget")
    assert 200 in codes and set(codes) <= {200, 429}, codes
    second = post(stack, key, "/v1/checkout", BODY)
    assert second.status_code == 429, second.text
    # The premise of every test here: the debt lasts far longer than this module.
    assert int(second.headers["Retry-After"]) >= 60, second.headers
    return key


def test_every_read_route_refuses_a_tenant_over_its_share(stack: RunningStack, spent: str) -> None:
    bodies = {"/v1/summarize_recall": {"query": BODY["query"], "k": 3}}
    for path in LIMITED:
        resp = post(stack, spent, path, bodies.get(path, BODY))
        assert resp.status_code == 429, (path, resp.status_code, resp.text)
        wait = resp.headers["Retry-After"]
        assert wait.isdigit() and int(wait) >= 1, wait
        detail = resp.json()["detail"]
        assert "share of read time" in detail and f"retry after {wait} s" in detail, detail


def test_another_tenant_and_other_routes_are_untouched(stack: RunningStack, spent: str) -> None:
    calm = fresh_key(stack, "calm")
    assert post(stack, calm, "/v1/checkout", BODY).status_code == 200
    assert httpx.get(f"{stack.api_url}/healthz", timeout=30).status_code == 200
    # Lineage, latents and writes are not read routes of the fair share.
    auth = {"Authorization": f"Bearer {spent}"}
    lineage = httpx.get(f"{stack.api_url}/v1/lineage/nothing-here", headers=auth, timeout=30)
    assert lineage.status_code == 404, lineage.text
    event = {"stream": "s", "type": "observation", "payload": {"text": "still writing"}}
    assert post(stack, spent, "/v1/events", event).status_code == 202
    # Without a key (or with an unknown one) the route says why, as before.
    assert post(stack, None, "/v1/checkout", BODY).status_code == 401
    assert post(stack, "ms_nope_nope", "/v1/recall", BODY).status_code == 401


def test_mcp_tool_calls_get_the_429_as_a_tool_error(stack: RunningStack, spent: str) -> None:
    async def call(session: ClientSession) -> Any:
        return await session.call_tool("recall", {"query": BODY["query"]})

    refused = run(lambda: http_session(stack, spent), call)
    assert refused.is_error
    text = text_of(refused)
    assert "HTTP 429" in text and "share of read time" in text and "Retry-After" in text, text
    calm = fresh_key(stack, "calm-mcp")
    served = run(lambda: http_session(stack, calm), call)
    assert not served.is_error, text_of(served)


def test_refusals_are_counted_by_route_and_reason(stack: RunningStack, spent: str) -> None:
    assert post(stack, spent, "/v1/search", BODY).status_code == 429
    samples = read_samples(
        f"{stack.api_url}/metrics", {"memstream_reads_throttled_total"}, timeout=30
    )
    counted = {(s.labels["route"], s.labels["reason"]): s.value for s in samples if s.value > 0}
    assert counted.get(("/v1/search", "budget"), 0) >= 1, counted
    assert "tenant" not in samples[0].labels  # unbounded: never a label here


def test_the_document_lists_429_with_retry_after_on_each_read_route(stack: RunningStack) -> None:
    doc = httpx.get(f"{stack.api_url}/openapi.json", timeout=30).json()
    for path in LIMITED:
        answer = doc["paths"][path]["post"]["responses"]["429"]
        assert answer["headers"]["Retry-After"]["required"] is True, path
    assert "429" not in doc["paths"]["/v1/lineage/{item_id}"]["get"]["responses"]
