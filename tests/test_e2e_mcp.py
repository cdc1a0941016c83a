"""The MCP server, driven by the SDK's own client session against the running stack: over
stdio (`memstream mcp`, the key from MEMSTREAM_API_KEY) and over streamable HTTP at /mcp."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcpcall
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from memstream import position
from memstream.client import MemoryHttpClient
from memstream.metrics import read_samples
from memstream.settings import Settings
from memstream.shred.sqlite import SqliteDataKeys
from memstream.stack.epoch import read_epoch
from stackproc import BIN, RunningStack, memstream, wait_until

TENANT = "atelier-7"
OTHER = "voisins.2"
TOOLS = {
    "checkout", "recall", "summarize_recall", "remember", "feedback", "invalidate", "lineage",
    "search", "forget",
}  # fmt: skip
FACT = "Séverine Okonkwo-Bah keeps the spare keys of the workshop in the blue teapot."
QUESTION = "where does séverine okonkwo-bah keep the spare keys?"


def key_for(stack: RunningStack, tenant: str) -> str:
    return memstream("keys", "create", "--tenant", tenant, data_dir=stack.data_dir).stdout.strip()


def stdio_session(stack: RunningStack, key: str) -> AbstractAsyncContextManager[ClientSession]:
    return mcpcall.stdio_session(stack.data_dir, key)


@asynccontextmanager
async def http_session(stack: RunningStack, key: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{stack.api_url}/mcp", http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def run(opener: Callable[[], Any], body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        async with opener() as session:
            return await body(session)

    return anyio.run(go)


def text_of(result: CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


@pytest.fixture(scope="module")
def keys(stack: RunningStack) -> dict[str, str]:
    return {TENANT: key_for(stack, TENANT), OTHER: key_for(stack, OTHER)}


@pytest.fixture(scope="module")
def remembered(stack: RunningStack, keys: dict[str, str]) -> Iterator[str]:
    """One event written through stdio `remember`, once checkout can see it."""

    async def remember(session: ClientSession) -> CallToolResult:
        args = {"text": FACT, "agent": "the user", "stream": "atelier", "type": "message.user"}
        return await session.call_tool("remember", args)

    result = run(lambda: stdio_session(stack, keys[TENANT]), remember)
    assert not result.is_error, text_of(result)
    event_id = str(result.structured_content["id"])
    with MemoryHttpClient(stack.api_url, keys[TENANT]) as client:
        wait_until(
            lambda: any(i["item_id"] == event_id for i in client.recall(QUESTION, k=5)),
            30,
            "the remembered event to be recallable",
        )
    yield event_id


def test_stdio_lists_every_tool_each_described_for_a_model(
    stack: RunningStack, keys: dict[str, str]
) -> None:
    async def tools(session: ClientSession) -> Any:
        return (await session.list_tools()).tools

    listed = run(lambda: stdio_session(stack, keys[TENANT]), tools)
    assert {t.name for t in listed} == TOOLS
    by_name = {t.name: t for t in listed}
    for tool in listed:
        assert tool.description and len(tool.description) > 80, tool.name
    # The descriptions tell a model when to use which read tool.
    assert "checkout" in by_name["recall"].description
    assert "checkout" in by_name["summarize_recall"].description
    assert by_name["search"].input_schema["properties"]["altitude"]["enum"] == [
        "event",
        "fact",
        "episode",
        "latent",
    ]


def test_stdio_checkout_answers_from_what_remember_wrote(
    stack: RunningStack, keys: dict[str, str], remembered: str
) -> None:
    async def checkout(session: ClientSession) -> tuple[CallToolResult, CallToolResult]:
        markdown = await session.call_tool("checkout", {"query": QUESTION})
        as_json = await session.call_tool("checkout", {"query": QUESTION, "format": "json"})
        return markdown, as_json

    markdown, as_json = run(lambda: stdio_session(stack, keys[TENANT]), checkout)
    assert not markdown.is_error and not as_json.is_error
    assert "**Answerability:** answer_from_memory" in text_of(markdown)
    assert "blue teapot" in text_of(markdown)
    packet = json.loads(text_of(as_json))
    assert packet["answerability"] == "answer_from_memory"
    assert remembered in packet["answer_candidates"][0]["support_ids"]
    assert any(s["item_id"] == remembered for s in packet["snippets"])


def test_remember_returns_position(stack: RunningStack, keys: dict[str, str]) -> None:
    async def remember_twice(session: ClientSession) -> list[CallToolResult]:
        texts = ["Zoë parked the van at the quai d'Orsay.", "Then the van moved;\tto bay 4."]
        args = {"stream": "van-log", "type": "observation"}
        return [await session.call_tool("remember", {**args, "text": t}) for t in texts]

    results = run(lambda: http_session(stack, keys[TENANT]), remember_twice)
    assert not any(r.is_error for r in results), [text_of(r) for r in results]
    store = SqliteDataKeys(Settings(data_dir=stack.data_dir).data_keys_path)
    try:
        secret = store.tenant_secret(TENANT)
    finally:
        store.close()
    first, second = (
        position.verify(r.structured_content["position"], TENANT, secret) for r in results
    )
    assert first.tenant == TENANT and first.epoch == read_epoch(stack.data_dir)
    ((partition, offset),) = first.raw.items()  # one event: one partition
    assert second.raw[partition] > offset  # the same stream, written after it
    with MemoryHttpClient(stack.api_url, keys[TENANT]) as client:  # the HTTP client's emit
        event = {"stream": "van-log", "type": "observation", "payload": {"text": "bay 5 now"}}
        ids, token = client.emit_written([event])
    third = position.verify(token, TENANT, secret)
    assert len(ids) == 1 and third.raw[partition] > second.raw[partition]
    with pytest.raises(position.ForeignPosition):  # a neighbour's reads cannot use it
        position.verify(results[0].structured_content["position"], OTHER, secret)


def test_stdio_search_lineage_recall_and_feedback(
    stack: RunningStack, keys: dict[str, str], remembered: str
) -> None:
    async def calls(session: ClientSession) -> dict[str, CallToolResult]:
        return {
            "search": await session.call_tool(
                "search", {"query": "teapot spare keys", "altitude": "event", "k": 3}
            ),
            "recall": await session.call_tool("recall", {"query": QUESTION, "k": 3}),
            "lineage": await session.call_tool("lineage", {"item_id": remembered}),
            "feedback": await session.call_tool(
                "feedback", {"target_ids": [remembered], "signal": 1.0, "reason": "it was right"}
            ),
        }

    got = run(lambda: stdio_session(stack, keys[TENANT]), calls)
    for name, result in got.items():
        assert not result.is_error, (name, text_of(result))
    assert got["search"].structured_content["hits"][0]["id"] == remembered
    assert got["recall"].structured_content["items"][0]["item_id"] == remembered
    leaves = got["lineage"].structured_content["leaves"]
    assert [leaf["event_id"] for leaf in leaves] == [remembered]
    assert (leaves[0]["tenant"], leaves[0]["stream"]) == (TENANT, "atelier")
    feedback_id = got["feedback"].structured_content["id"]
    wait_until(
        lambda: any(e["id"] == feedback_id for e in stack.ledger()),
        30,
        "the feedback event in the ledger",
    )


def test_a_tool_error_carries_the_api_reason(
    stack: RunningStack, keys: dict[str, str], remembered: str
) -> None:
    async def calls(
        session: ClientSession,
    ) -> tuple[CallToolResult, CallToolResult]:
        unknown = await session.call_tool("lineage", {"item_id": "no-such-memory-id"})
        wrong = await session.call_tool(
            "invalidate", {"target_ids": [remembered, "no-such-fact#3"], "reason": "typo"}
        )
        return unknown, wrong

    unknown, wrong = run(lambda: stdio_session(stack, keys[TENANT]), calls)
    assert unknown.is_error and "404" in text_of(unknown)
    assert "no-such-memory-id" in text_of(unknown)
    # one unknown target refuses the whole invalidation, naming it
    assert wrong.is_error and "no-such-fact#3" in text_of(wrong)
    assert remembered not in text_of(wrong).split("yet):", 1)[-1]
    # summarize_recall's tool error on a stack without a model key: test_e2e_summarize.


def test_remember_past_the_record_limit_is_refused_naming_the_limit(
    stack: RunningStack, keys: dict[str, str]
) -> None:
    """The largest text remember takes (200,000 characters), of four-byte emoji: sealed, its
    ledger record could pass the broker's 1 MiB record limit, so nothing is written."""
    before = {e["id"] for e in stack.ledger() if e["tenant"] == TENANT}

    async def remember(session: ClientSession) -> CallToolResult:
        return await session.call_tool("remember", {"text": "🐝" * 200_000, "stream": "big"})

    result = run(lambda: http_session(stack, keys[TENANT]), remember)
    assert result.is_error and "413" in text_of(result), text_of(result)
    assert "over the broker's record limit of 1048576 bytes" in text_of(result)
    time.sleep(2)  # a write that was accepted would be ledgered by now
    assert {e["id"] for e in stack.ledger() if e["tenant"] == TENANT} == before


def test_stdio_without_a_key_exits_with_the_reason(stack: RunningStack) -> None:
    params = mcpcall.stdio_params(stack.data_dir, None)
    done = subprocess.run(
        [params.command, *params.args],
        env=params.env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0
    assert "MEMSTREAM_API_KEY" in done.stderr
    assert done.stdout == ""  # stdout belongs to the protocol


def test_http_mcp_serves_the_same_tools_under_the_bearer_key(
    stack: RunningStack, keys: dict[str, str], remembered: str
) -> None:
    async def calls(session: ClientSession) -> tuple[set[str], CallToolResult]:
        names = {t.name for t in (await session.list_tools()).tools}
        return names, await session.call_tool("checkout", {"query": QUESTION, "format": "json"})

    names, checkout = run(lambda: http_session(stack, keys[TENANT]), calls)
    assert names == TOOLS
    assert remembered in json.loads(text_of(checkout))["answer_candidates"][0]["support_ids"]


def test_http_mcp_keeps_tenants_apart(
    stack: RunningStack, keys: dict[str, str], remembered: str
) -> None:
    async def calls(session: ClientSession) -> tuple[CallToolResult, CallToolResult]:
        recall = await session.call_tool("recall", {"query": QUESTION, "k": 10})
        lineage = await session.call_tool("lineage", {"item_id": remembered})
        return recall, lineage

    recall, lineage = run(lambda: http_session(stack, keys[OTHER]), calls)
    assert not recall.is_error
    assert all(i["item_id"] != remembered for i in recall.structured_content["items"])
    assert lineage.is_error and "404" in text_of(lineage)


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing Authorization header"),
        ({"Authorization": "Bearer ms_not_a_key"}, "invalid API key"),
        ({"Authorization": "Basic dXNlcjpwdw=="}, "Bearer scheme"),
    ],
)
def test_http_mcp_refuses_a_request_without_a_valid_key(
    stack: RunningStack, headers: dict[str, str], reason: str
) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    resp = httpx.post(
        f"{stack.api_url}/mcp",
        json=initialize,
        headers={**headers, "Accept": "application/json, text/event-stream"},
        timeout=30,
    )
    assert resp.status_code == 401
    assert reason in resp.json()["detail"]
    assert resp.headers["www-authenticate"] == "Bearer"


def test_tool_calls_are_counted_on_the_api_metrics(
    stack: RunningStack, keys: dict[str, str], remembered: str
) -> None:
    async def calls(session: ClientSession) -> None:
        await session.call_tool("search", {"query": "teapot", "altitude": "event"})
        await session.call_tool("lineage", {"item_id": "no-such-memory-id"})

    def counted() -> dict[tuple[str, str], float]:
        samples = read_samples(
            f"{stack.api_url}/metrics", {"memstream_mcp_tool_calls_total"}, timeout=30
        )
        return {(s.labels["tool"], s.labels["outcome"]): s.value for s in samples}

    before = counted()
    run(lambda: http_session(stack, keys[TENANT]), calls)
    after = counted()
    # The stack is shared with other modules: these two calls, counted once each.
    assert after[("search", "ok")] == before.get(("search", "ok"), 0) + 1
    assert after[("lineage", "error")] == before.get(("lineage", "error"), 0) + 1


def test_http_mcp_on_loopback_refuses_a_foreign_host(
    stack: RunningStack, keys: dict[str, str]
) -> None:
    # DNS rebinding: a page served from another name must not reach the loopback API.
    resp = httpx.post(
        f"{stack.api_url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={
            "Authorization": f"Bearer {keys[TENANT]}",
            "Host": "rebound.example:80",
            "Accept": "application/json, text/event-stream",
        },
        timeout=30,
    )
    assert resp.status_code == 421


def test_stdio_started_before_any_stack_says_so_per_call(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "ANTHROPIC_"))}
    params = StdioServerParameters(
        command=str(BIN / "memstream"),
        args=["mcp", "--data-dir", str(tmp_path / "nothing-here")],
        env=env | {"MEMSTREAM_API_KEY": "ms_some_key"},
    )

    @asynccontextmanager
    async def session() -> AsyncIterator[ClientSession]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s

    async def call(s: ClientSession) -> CallToolResult:
        return await s.call_tool("recall", {"query": "anything"})

    result = run(session, call)
    assert result.is_error
    assert "no running stack found" in text_of(result)


def test_read_tools_take_after_remember_position(
    stack: RunningStack, keys: dict[str, str], remembered: str
) -> None:
    """remember's position given to checkout (json) and recall as after=: the first answer
    already holds the new memory, and says it waited for it."""
    word = "Bérénice-7"

    async def remember_then_read(session: ClientSession) -> list[CallToolResult]:
        args = {"stream": "atelier", "type": "observation"}
        text = f"The workshop's alarm code is {word}, set by Séverine."
        written = await session.call_tool("remember", {**args, "text": text})
        assert not written.is_error, text_of(written)
        pos = written.structured_content["position"]
        query = f"what is the workshop's alarm code {word}?"
        return [
            written,
            await session.call_tool("checkout", {"query": query, "format": "json", "after": pos}),
            await session.call_tool("recall", {"query": query, "k": 5, "after": pos}),
        ]

    written, packet_result, recall_result = run(
        lambda: stdio_session(stack, keys[TENANT]), remember_then_read
    )
    event_id = str(written.structured_content["id"])
    packet = json.loads(text_of(packet_result))
    assert packet["meta"]["after"]["applied"] is True, packet["meta"]
    assert not [w for w in packet["warnings"] if w["kind"] == "stale"]
    assert event_id in json.dumps(packet)
    recalled = recall_result.structured_content
    assert recalled["warnings"] == [] and event_id in [i["item_id"] for i in recalled["items"]]


def invalidate_waits(stack: RunningStack) -> float:
    """How many invalidations the API has waited on a position for."""
    samples = read_samples(
        f"{stack.api_url}/metrics", {"memstream_read_after_wait_seconds_count"}, timeout=30
    )
    return sum(x.value for x in samples if x.labels["route"] == "invalidate")


def test_invalidate_takes_after_remember_position(
    stack: RunningStack, keys: dict[str, str]
) -> None:
    """A memory remembered a moment ago can be invalidated at once, given remember's position
    (without it the graph may not hold it yet, and the target would be unknown)."""

    async def remember_then_invalidate(session: ClientSession) -> list[CallToolResult]:
        text = "The kiln's thermocouple reads Ørsted-12, says Séverine."
        args = {"stream": "atelier", "type": "observation", "text": text}
        written = await session.call_tool("remember", args)
        assert not written.is_error, text_of(written)
        content = written.structured_content
        wrong = {"target_ids": [content["id"]], "reason": "misread"}
        return [
            written,
            await session.call_tool("invalidate", {**wrong, "after": content["position"]}),
        ]

    waits_before = invalidate_waits(stack)
    written, invalidated = run(lambda: stdio_session(stack, keys[TENANT]), remember_then_invalidate)
    assert invalidate_waits(stack) == waits_before + 1  # the API waited on the position
    assert not invalidated.is_error, text_of(invalidated)
    invalidation = str(invalidated.structured_content["id"])

    def entry() -> dict[str, Any] | None:
        return next((e for e in stack.ledger() if e["id"] == invalidation), None)

    wait_until(lambda: entry() is not None, 30, "the invalidation in the ledger")
    found = entry()
    assert found is not None and found["payload"]["target_ids"] == [
        written.structured_content["id"]
    ], found
