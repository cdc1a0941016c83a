"""Many agents, one tenant: scopes on every read, scoped keys, proofs on the raw topic, and
forgetting by scope, through the running stack.

One tenant, three agents (planner, coder, reviewer) and two users over four days, with a fact
that changes and a stream both users share. Every event's text carries a token of its own, so
a packet holding anything from outside its scope shows it: each read is checked over every id
and ref in it and over its whole text. Uses the session's shared stack (its tenants are this
module's own) and starts a second API process on it for the revocation test.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from confluent_kafka import Producer
from leakscan import files_holding, memory_of, no_file_holds, topics_holding
from mcpcall import call_tool, list_tools, text_of
from memstream.client import MemoryHttpClient, MemstreamHttpError
from memstream.kafka.topics import DLQ, RAW
from memstream.scope import Scope
from memstream.sdk import EventRefusedError, MemoryClient
from memstream.stack.children import spawn, stop_process
from memstream.stack.net import free_port
from messages_standin import MessagesStandin, prompt_ids
from stackproc import RunningStack, memstream, wait_until
from topicread import read_topic

TENANT = "orbit-scopes"
DAYS = ["2031-03-02", "2031-03-03", "2031-03-05", "2031-03-08"]


def _events(prefix: str) -> list[dict[str, Any]]:
    """(id, day, stream, agent, user, text or fact) for the world; text carries its token."""
    rows: list[tuple[str, int, str, str, str | None, str | dict[str, str]]] = [
        ("01", 0, "ines.trip", "planner", "inês", "Inês booked the night train to Vienna"),
        (
            "02",
            0,
            "ines.trip",
            "planner",
            "inês",
            {"subject": "Inês", "predicate": "lives_in", "object": "Porto"},
        ),
        ("03", 1, "ines.trip", "reviewer", "inês", "the reviewer checked the Vienna hotel"),
        ("04", 1, "tomasz.move", "planner", "tomasz", "Tomasz asked for a moving van in May"),
        (
            "05",
            1,
            "tomasz.move",
            "coder",
            "tomasz",
            {"subject": "Tomasz", "predicate": "works_at", "object": "Kestrel Labs"},
        ),
        ("06", 2, "standup", "coder", "inês", "the coder fixed the seat map bug for Inês"),
        (
            "07",
            2,
            "standup",
            "coder",
            "inês",
            {"subject": "Inês", "predicate": "lives_in", "object": "Lyon"},
        ),
        ("08", 2, "standup", "reviewer", "tomasz", "the reviewer approved the van quote"),
        ("09", 3, "standup", "planner", None, "the planner moved the standup to Friday"),
        ("10", 3, "tomasz.move", "coder", "tomasz", "Tomasz's boxes go to the Gdańsk flat"),
        ("11", 3, "ines.trip", "reviewer", "inês", "Inês prefers a window seat on trains"),
    ]
    out = []
    for n, day, stream, agent, user, body in rows:
        eid = f"{prefix}-{n}"
        event: dict[str, Any] = {"id": eid, "stream": stream, "agent": agent}
        event["occurred_at"] = f"{DAYS[day]}T{9 + int(n) % 8:02d}:00:00Z"
        if user is not None:
            event["user"] = user
        if isinstance(body, str):
            event |= {"type": "observation", "payload": {"text": f"{body} (tok{prefix}{n})"}}
        else:
            event |= {"type": "fact.asserted", "payload": body}
        out.append(event)
    return out


EVENTS = _events("sc")
BY_ID = {e["id"]: e for e in EVENTS}
SCOPES: list[dict[str, Any]] = [
    {"user": "inês"},
    {"user": "tomasz"},
    {"agent": "coder"},
    {"agent": ["planner", "reviewer"], "user": "inês"},
    {"stream": "standup"},
    {"stream": ["ines.trip", "tomasz.move"], "agent": "planner"},
]
QUESTIONS = [
    "Where does Inês live now?",
    "Where does Tomasz work?",
    "what happened at the standup?",
    "what did the coder do about the van and the trains?",
]


def inside(event: dict[str, Any], scope: dict[str, Any]) -> bool:
    return Scope.model_validate(scope).admits(
        user=event.get("user"), agent=event["agent"], stream=event["stream"]
    )


def _strings(doc: Any) -> Iterator[str]:
    if isinstance(doc, str):
        yield doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _strings(v)


def held(doc: Any, events: dict[str, dict[str, Any]]) -> set[str]:
    """The world's event ids ``doc`` names anywhere: as an id, a fact id, or a ref."""
    return {s.split("#", 1)[0] for s in _strings(doc)} & set(events)


def assert_within(doc: Any, scope: dict[str, Any], events: dict[str, dict[str, Any]]) -> None:
    """Nothing of ``doc`` comes from outside ``scope``: no id or ref, no token of text."""
    if isinstance(doc, bytes):
        doc = orjson.loads(doc)
    named = held(doc, events)
    outside = {i for i in named if not inside(events[i], scope)}
    assert not outside, (scope, sorted(outside))
    text = orjson.dumps(doc).decode()
    tokens = {f"tok{i.replace('-', '')}" for i, e in events.items() if not inside(e, scope)}
    assert not {t for t in tokens if t in text}, (scope, [t for t in tokens if t in text])


def key(stack: RunningStack, *options: str) -> str:
    args = ["keys", "create", "--tenant", TENANT, "--json", *options]
    return str(orjson.loads(memstream(*args, data_dir=stack.data_dir).stdout)["key"])


@pytest.fixture(scope="module")
def admin(stack: RunningStack) -> str:
    return key(stack, "--name", "scopes admin", "--can", "admin")


@pytest.fixture(scope="module")
def world(stack: RunningStack, admin: str) -> str:
    """The world written and applied (a read given its position waits for it); the
    position."""
    with MemoryHttpClient(stack.api_url, admin, timeout=120) as client:
        _ids, position = client.emit_written(EVENTS)
        client.recall("anything", after=position)
        # derived artifacts (episodes) arrive a little later: checked when they are there
        wait_until(lambda: bool(client.latents(limit=1000)), 120, "the first latent artifacts")
    return position


@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: orjson.dumps(s).decode())
def test_every_read_with_a_scope_holds_nothing_from_outside_it(
    stack: RunningStack, admin: str, world: str, scope: dict[str, Any]
) -> None:
    seen: set[str] = set()
    with MemoryHttpClient(stack.api_url, admin, timeout=120) as client:
        for q in QUESTIONS:
            packet = client.checkout(q, scope=scope, purpose="planning", max_tokens=4000)
            assert_within(memory_of(packet), scope, BY_ID)
            recalled = client.recall(q, k=50, scope=scope)
            assert_within(recalled, scope, BY_ID)
            seen |= held(packet, BY_ID) | held(recalled, BY_ID)
        # not empty-handed: the reads found the scope's own memory
        assert seen == {i for i, e in BY_ID.items() if inside(e, scope)}
        for altitude in ("event", "fact", "episode", "latent"):
            hits = client.search(QUESTIONS[0], altitude=altitude, k=50, scope=scope)  # type: ignore[arg-type]
            assert_within(hits, scope, BY_ID)
        listed = client.latents(include_stale=True, limit=1000, scope=scope)
        assert_within(listed, scope, BY_ID)
        for artifact in listed:  # each rests on the scope and cites only that
            refs = {r["event_id"] for r in artifact["source_event_refs"]}
            assert refs and refs <= {i for i, e in BY_ID.items() if inside(e, scope)}


def test_a_scope_sees_what_it_holds_and_a_stream_answers_from_its_own_facts(
    stack: RunningStack, admin: str, world: str
) -> None:
    with MemoryHttpClient(stack.api_url, admin, timeout=120) as client:
        trip = client.checkout("Where does Inês live now?", stream="ines.trip")
        facts = {f["fact_id"].split("#")[0]: f for f in trip["facts"]}
        assert "sc-02" in facts and "sc-07" not in held(trip, BY_ID)  # Porto, on this stream
        assert facts["sc-02"].get("valid_to") is None  # Lyon, elsewhere, closes nothing here
        everywhere = client.checkout("Where does Inês live now?")
        assert "sc-07" in held(everywhere, BY_ID)  # the whole tenant sees the move to Lyon
        tomasz = held(client.recall("moving van boxes", k=50, scope={"user": "tomasz"}), BY_ID)
        assert {"sc-04", "sc-10"} <= tomasz


def test_stream_and_scope_stream_must_agree(stack: RunningStack, admin: str, world: str) -> None:
    with MemoryHttpClient(stack.api_url, admin) as client:
        with pytest.raises(MemstreamHttpError) as info:
            client.checkout("trains?", stream="standup", scope={"stream": "ines.trip"})
        assert info.value.status == 422 and "different streams" in info.value.detail


def test_lineage_and_summaries_stay_inside_the_scope(
    stack: RunningStack, admin: str, world: str, shared_standin: MessagesStandin
) -> None:
    reader = key(stack, "--can", "read", "--scope", "user=inês")
    with MemoryHttpClient(stack.api_url, reader, timeout=120) as client:
        assert client.lineage("sc-01")["leaves"][0]["event_id"] == "sc-01"
        for foreign in ("sc-04", "sc-05#0", "sc-09"):
            with pytest.raises(MemstreamHttpError) as info:
                client.lineage(foreign)
            assert info.value.status == 404, foreign
        before = len(shared_standin.requests)
        result = client.summarize_recall("what about the van, the trains and Tomasz?", k=20)
        assert_within(result, {"user": "inês"}, BY_ID)
        asked = [i for r in shared_standin.requests[before:] for i in prompt_ids(r)]
        assert asked and all(
            inside(BY_ID[i.split("#")[0]], {"user": "inês"})
            for i in asked
            if i.split("#")[0] in BY_ID
        )


def test_a_scoped_key_reads_inside_its_scope_and_is_refused_beyond_it(
    stack: RunningStack, world: str
) -> None:
    reader = key(stack, "--can", "read", "--scope", "user=inês")
    with MemoryHttpClient(stack.api_url, reader, timeout=120) as client:
        packet = client.checkout("Where does Tomasz work and where does Inês live?")
        assert_within(memory_of(packet), {"user": "inês"}, BY_ID)
        narrower = client.recall("trains", scope={"user": "inês", "agent": "reviewer"})
        assert_within(narrower, {"user": "inês", "agent": "reviewer"}, BY_ID)
        for asked in ({"user": "tomasz"}, {"user": ["inês", "tomasz"]}):
            with pytest.raises(MemstreamHttpError) as info:
                client.checkout("who moves?", scope=asked)
            assert info.value.status == 403 and "scope.user" in info.value.detail
        with pytest.raises(MemstreamHttpError) as info:
            client.emit(
                [
                    {
                        "stream": "ines.trip",
                        "type": "observation",
                        "payload": {"text": "a reader writing"},
                    }
                ]
            )
        assert info.value.status == 403 and "may not write" in info.value.detail
        assert client.key()["permissions"] == ["read"]


def test_a_write_outside_the_keys_scope_is_refused_and_its_fields_filled(
    stack: RunningStack, admin: str, world: str
) -> None:
    coder = key(stack, "--can", "read,write", "--scope", "agent=coder")
    note = {"stream": "standup", "type": "observation", "payload": {"text": "coder's note"}}
    with MemoryHttpClient(stack.api_url, coder) as client:
        with pytest.raises(MemstreamHttpError) as info:
            client.emit([note | {"agent": "planner"}])
        assert info.value.status == 403 and "agent" in info.value.detail
        (written,), position = client.emit_written([note | {"user": "inês"}])
    with MemoryHttpClient(stack.api_url, admin) as client:
        client.recall("coder's note", after=position)
        leaf = client.lineage(written)["events"][0]
        assert leaf["agent"] == "coder" and leaf["user"] == "inês"


def test_mcp_lists_only_what_the_key_may_call_and_holds_to_its_scope(
    stack: RunningStack, admin: str, world: str
) -> None:
    reader = key(stack, "--can", "read", "--scope", "user=tomasz")
    writer = key(stack, "--can", "read,write")
    assert asyncio.run(list_tools(stack.api_url, reader)) == sorted(
        ["checkout", "recall", "search", "lineage", "summarize_recall"]
    )
    assert "forget" not in asyncio.run(list_tools(stack.api_url, writer))
    assert "forget" in asyncio.run(list_tools(stack.api_url, admin))
    for scope in ({"agent": "coder"}, {"stream": "standup"}):
        args = {"query": QUESTIONS[1], "format": "json", "scope": scope}
        result = asyncio.run(call_tool(stack.api_url, reader, "checkout", args))
        assert not result.is_error, text_of(result)
        assert_within(orjson.loads(text_of(result)), scope | {"user": "tomasz"}, BY_ID)
    beyond = {"query": "trains", "scope": {"user": "inês"}}
    result = asyncio.run(call_tool(stack.api_url, reader, "recall", beyond))
    assert result.is_error and "403" in text_of(result) and "scope.user" in text_of(result)
    refused = asyncio.run(
        call_tool(stack.api_url, writer, "forget", {"subject": "Tomasz", "dry_run": True})
    )
    assert refused.is_error and "403" in text_of(refused) and "forget" in text_of(refused)


def test_purge_needs_forget_on_every_surface(stack: RunningStack, world: str) -> None:
    writer = key(stack, "--can", "read,write")
    with MemoryHttpClient(stack.api_url, writer) as client:
        for purge in (
            lambda: client.purge("Tomasz", dry_run=True),
            lambda: client.purge_scope({"user": "tomasz"}, dry_run=True),
        ):
            with pytest.raises(MemstreamHttpError) as info:
                purge()
            assert info.value.status == 403 and "may not forget" in info.value.detail
    cli = memstream(
        "purge",
        "--tenant",
        TENANT,
        "--scope",
        "user=tomasz",
        "--dry-run",
        "--key",
        writer,
        data_dir=stack.data_dir,
        check=False,
    )
    assert cli.returncode == 1 and "may not forget" in cli.stdout + cli.stderr


@pytest.fixture(scope="module")
def second_api(stack: RunningStack) -> Iterator[str]:
    """A second API process on the stack's data dir: the revocation must hold there too."""
    port = free_port()
    env = dict(
        os.environ,
        MEMSTREAM_DATA_DIR=str(stack.data_dir.resolve()),
        MEMSTREAM_KAFKA_BOOTSTRAP=stack.bootstrap,
        MEMSTREAM_FALKORDB_URL=str(stack.info["falkordb_url"]),
        MEMSTREAM_API_PORT=str(port),
        MEMSTREAM_API_REPLICA="scopes",
    )
    env.pop("MEMSTREAM_API_FD", None)
    log = stack.data_dir.parent / "api-scopes.log"
    proc = spawn([sys.executable, "-m", "memstream_api.main"], log, env)
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(answers, 180, "the second API to answer")
        yield url
    finally:
        stop_process(proc)


def test_a_revoked_key_is_refused_by_both_apis_within_two_seconds(
    stack: RunningStack, second_api: str
) -> None:
    doc = orjson.loads(
        memstream(
            "keys",
            "create",
            "--tenant",
            TENANT,
            "--json",
            "--name",
            "to revoke",
            data_dir=stack.data_dir,
        ).stdout
    )
    urls = [stack.api_url, second_api]
    auth = {"Authorization": f"Bearer {doc['key']}"}
    for url in urls:
        assert httpx.get(f"{url}/v1/keys/me", headers=auth, timeout=10).status_code == 200
    memstream("keys", "revoke", doc["id"], data_dir=stack.data_dir)
    revoked_at = time.monotonic()
    refused: dict[str, float] = {}
    while len(refused) < 2 and time.monotonic() - revoked_at < 10:
        for url in urls:
            if url not in refused:
                got = httpx.get(f"{url}/v1/keys/me", headers=auth, timeout=10).status_code
                if got == 401:
                    refused[url] = time.monotonic() - revoked_at
    assert set(refused) == set(urls) and max(refused.values()) < 2.0, refused
    listed = orjson.loads(
        memstream("keys", "list", "--tenant", TENANT, "--json", data_dir=stack.data_dir).stdout
    )["keys"]
    (mine,) = [k for k in listed if k["id"] == doc["id"]]
    assert mine["revoked_at"] and mine["last_used_at"] and "key" not in mine


def test_a_raw_record_without_a_proof_is_never_ledgered(
    stack: RunningStack, admin: str, world: str
) -> None:
    intruder = f"raw-{uuid.uuid4().hex[:8]}"
    doc = {
        "id": intruder,
        "tenant": TENANT,
        "stream": "standup",
        "agent": "intruder",
        "type": "observation",
        "payload": {"text": "planted without a key"},
    }
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    producer.produce(RAW, orjson.dumps(doc), key=f"{TENANT}/standup".encode())
    assert producer.flush(30) == 0
    with MemoryHttpClient(stack.api_url, admin) as client:  # a proven write after it
        _ids, position = client.emit_written(
            [
                {
                    "stream": "standup",
                    "type": "observation",
                    "payload": {"text": "after the intruder"},
                }
            ]
        )
        client.recall("after the intruder", after=position)

        def letter() -> dict[str, Any] | None:
            for m in read_topic(stack.bootstrap, DLQ):
                d: dict[str, Any] = orjson.loads(m.value() or b"{}")
                if d.get("raw_b64") and intruder.encode() in base64.b64decode(d["raw_b64"]):
                    return d
            return None

        wait_until(lambda: letter() is not None, 60, "the unproven record in memory.dlq")
        assert str((letter() or {})["reason"]).startswith("unauthenticated")
        assert intruder not in {e["id"] for e in stack.ledger()}
        with pytest.raises(MemstreamHttpError) as info:
            client.lineage(intruder)
        assert info.value.status == 404


def test_the_sdk_from_an_endpoint_and_a_key_keeps_the_promises(
    stack: RunningStack, admin: str
) -> None:
    coder = key(stack, "--can", "read,write", "--scope", "agent=coder")
    token = f"tok{uuid.uuid4().hex[:10]}"
    with MemoryClient.connect(stack.api_url, coder) as sdk:
        assert sdk.agent == "coder" and sdk.tenant == TENANT
        written = sdk.emit("standup", "observation", {"text": f"sdk note {token}"}, user="inês")
        position = sdk.flush()
        with pytest.raises(EventRefusedError) as info:
            sdk.emit_many(
                [
                    {"stream": "standup", "type": "observation", "payload": {"text": "fine"}},
                    {"stream": "standup", "type": "observation", "payload": {}},
                ]
            )
        assert str(info.value).startswith("event 1: payload") and "\n" not in str(info.value)
        with pytest.raises(EventRefusedError) as info:
            sdk.emit("standup", "observation", {"text": "as someone else"}, agent="planner")
        assert info.value.field == "agent"
    with MemoryHttpClient(stack.api_url, admin) as client:
        packet = client.checkout(f"sdk note {token}", after=position)
        assert packet["meta"]["after"]["applied"] is True, packet["meta"]["after"]
        assert written in held(packet, {written: {}})
    copies = [
        v for m in read_topic(stack.bootstrap, RAW) if written.encode() in (v := m.value() or b"")
    ]
    # sealed before the first copy was written: the raw topic never held the text
    assert copies and all(token.encode() not in v and b'"sealed"' in v for v in copies)


@pytest.fixture(scope="module")
def doomed(stack: RunningStack) -> tuple[str, list[dict[str, Any]]]:
    """A tenant of its own holding the same world, for the scope purge; its admin key."""
    tenant = f"{TENANT}-purge"
    events = _events("sp")
    admin = str(
        orjson.loads(
            memstream(
                "keys", "create", "--tenant", tenant, "--json", data_dir=stack.data_dir
            ).stdout
        )["key"]
    )
    with MemoryHttpClient(stack.api_url, admin, timeout=120) as client:
        _ids, position = client.emit_written(events)
        client.recall("anything", after=position)
        for q in QUESTIONS:  # packets and traces that cite what goes
            client.checkout(q)
    return admin, events


def test_a_scope_purge_lists_its_events_then_leaves_no_byte_of_them(
    stack: RunningStack, doomed: tuple[str, list[dict[str, Any]]]
) -> None:
    admin, events = doomed
    by_id = {e["id"]: e for e in events}
    gone = {i for i, e in by_id.items() if e.get("user") == "tomasz"}
    with MemoryHttpClient(stack.api_url, admin, timeout=180) as client:
        preview = client.purge_scope({"user": "tomasz"}, dry_run=True)
        listed = {e["event_id"]: e for e in preview["events"]}
        assert set(listed) == gone and preview["dry_run"] is True
        for i, e in listed.items():
            assert (e["stream"], e["agent"], e["user"]) == (
                by_id[i]["stream"],
                by_id[i]["agent"],
                "tomasz",
            )
            assert e["occurred_at"].startswith(by_id[i]["occurred_at"][:10])
        report = client.purge_scope({"user": "tomasz"}, wait_s=90)
        assert report["complete"] is True and report["removed"]["events"] == len(gone), report
        markers = tuple(f"tok{i.replace('-', '')}" for i in gone if "text" in by_id[i]["payload"])
        assert markers
        assert topics_holding(stack.bootstrap, markers) == {}
        no_file_holds(stack.data_dir, markers, timeout=120)
        kept = held(client.recall("trains Vienna window seat", k=50), by_id)
        assert {"sp-01", "sp-03", "sp-11"} <= kept and not kept & gone
        assert files_holding(stack.data_dir.parent / f"{stack.data_dir.name}-up.log", markers) == {}


def test_a_scope_holding_the_whole_tenant_answers_as_the_tenant_does(
    stack: RunningStack,
) -> None:
    """A tenant whose every event is one user's: the same questions with that user's scope
    and without one find the same memories in the same order (the scope removes nothing and
    reorders nothing)."""
    tenant = f"{TENANT}-solo"
    admin = str(
        orjson.loads(
            memstream(
                "keys", "create", "--tenant", tenant, "--json", data_dir=stack.data_dir
            ).stdout
        )["key"]
    )
    events = [
        {k: v for k, v in e.items() if k != "id"} | {"id": f"so-{i}", "user": "solo"}
        for i, e in enumerate(EVENTS)
    ]
    with MemoryHttpClient(stack.api_url, admin, timeout=120) as client:
        _ids, position = client.emit_written(events)
        client.recall("anything", after=position)
        for q in QUESTIONS:
            whole = client.checkout(q)
            scoped = client.checkout(q, scope={"user": "solo"})
            for part in ("answer_candidates", "facts", "evidence", "snippets"):
                assert orjson.dumps(whole[part]) == orjson.dumps(scoped[part]), (q, part)
            assert [c["item_id"] for c in client.recall(q, k=30)] == [
                c["item_id"] for c in client.recall(q, k=30, scope={"user": "solo"})
            ]
