"""Purge of one data subject through the running stack: a dry run changes nothing; the purge
removes the subject's events and all derived from them from every read, every file of the
data dir, a replayed version and a restarted stack, while `verify` passes and another
subject's memory stays."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import anyio
import httpx
import orjson
import pytest
from leakscan import found_in, memory_of, no_file_holds
from mcp.types import CallToolResult
from mcpcall import call_tool, stdio_session, text_of
from memstream.client import MemoryHttpClient, MemstreamHttpError
from memstream.events.payloads import QuestionFamily
from memstream.kafka.clients import make_producer
from memstream.kafka.reading import read_to_end
from memstream.kafka.topics import CHECKOUTS, DLQ, LATENTS, LEDGER, RAW
from memstream.learning.trace import CheckoutTrace
from memstream.ledger.opening import EntryOpener
from memstream.metrics import read_samples
from memstream.projection.latents import decode_artifacts
from memstream.projection.status import caught_up
from memstream.records.latent import LatentArtifact
from memstream.sdk import MemoryClient
from memstream.settings import Settings
from memstream.shred.sqlite import SqliteDataKeys
from memstream.shred.traces import TraceOpener, TraceSealer
from memstream.text.names import entity_key, name_forms, names_in
from stackproc import RunningStack, memstream, owned_stack, start_stack, wait_until
from topicread import read_topic


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """This module owns its stack: it scans every file of the data dir, replays and promotes a
    version, and restarts a stack."""
    yield from owned_stack(tmp_path_factory, "purge")


TENANT = "registre"
SUBJECT = "Ines Øverland-Quist"  # asked for as written; her events also say it in lower case
# Strings only her events hold: none may survive in any file of the data dir.
HERS = ("ZX-4471-PQ", "Øverland", "øverland", "harbour café", "Tromsø Harbour Lane")
OTHER = "Bartholomew Achebe repaired the lighthouse lamp on Tuesday."


def events() -> list[dict[str, Any]]:
    """Her events: mentioned, speaking, a fact's subject, lower-case; one of someone else."""
    at = "2026-03-0{}T10:00:00Z"
    return [
        _msg("her-1", "the user", "I had lunch with Ines Øverland-Quist at the harbour café.", 1),
        _msg("her-2", SUBJECT, "My passport number is ZX-4471-PQ, keep it safe.", 2),
        {
            "id": "her-3",
            "stream": "facts",
            "type": "fact.asserted",
            "occurred_at": at.format(3),
            "payload": {
                "subject": SUBJECT,
                "predicate": "lives_at",
                "object": "Tromsø Harbour Lane 7",
            },
        },
        _msg("her-4", "the user", "ines øverland-quist prefers window seats on trains.", 4),
        _msg("his-1", "the user", OTHER, 5),
    ]


def _msg(event_id: str, agent: str, text: str, day: int) -> dict[str, Any]:
    return {
        "id": event_id,
        "stream": "journal",
        "agent": agent,
        "type": "message.user",
        "occurred_at": f"2026-03-0{day}T10:00:00Z",
        "payload": {"text": text},
    }


HER_IDS = {"her-1", "her-2", "her-3", "her-4"}


def key_for(stack: RunningStack) -> str:
    return memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir).stdout.strip()


def remembered(client: MemoryHttpClient) -> None:
    """Emit, then wait until every event is recallable and the episode is built."""
    client.emit(events())

    def ready() -> bool:
        try:
            found = {i["item_id"] for i in client.recall("Ines Øverland-Quist harbour", k=20)}
            episodes = client.latents(types=["episode_latent"])
        except MemstreamHttpError:
            return False
        return {f.split("#")[0] for f in found} >= HER_IDS and bool(episodes)

    wait_until(ready, 90, "the events recalled and an episode built")


def no_file_holds_hers(root: Path, timeout: float = 60) -> None:
    """The graph's append-only file and the vector segments are rewritten a while after the
    stores applied the tombstone: wait for it (see :func:`leakscan.no_file_holds`)."""
    no_file_holds(root, HERS, timeout)


def archive_digest(stack: RunningStack) -> str:
    h = hashlib.sha256()
    for path in sorted((stack.data_dir / "archive").rglob("*.jsonl")):
        h.update(path.read_bytes())
    return h.hexdigest()


def leaks(client: MemoryHttpClient) -> list[str]:
    """Her ids or text in anything a reader can get back."""
    found: list[str] = []
    for q in ("Ines Øverland-Quist", "where does ines live?", "passport number", "window seats"):
        found += [i["item_id"] for i in client.recall(q, k=20) if i["item_id"][:5] == "her-"]
        found += found_in(memory_of(client.checkout(q)), HERS)
        for altitude in ("event", "fact", "episode", "latent"):
            for hit in client.search(q, altitude=altitude, k=20):
                found += [s for s in hit["sources"] if s in HER_IDS]
                found += found_in(orjson.dumps(hit), HERS)
    for artifact in client.latents(include_stale=True):
        found += found_in(orjson.dumps(artifact), HERS)
    for event_id in HER_IDS:
        try:
            client.lineage(event_id)
            found.append(f"lineage {event_id}")
        except MemstreamHttpError as exc:
            assert exc.status == 404, exc
    return found


@pytest.fixture(scope="module")
def client(stack: RunningStack) -> Iterator[MemoryHttpClient]:
    with MemoryHttpClient(stack.api_url, key_for(stack), timeout=150) as c:
        remembered(c)
        yield c


@pytest.fixture(scope="module")
def dry_run(stack: RunningStack, client: MemoryHttpClient) -> dict[str, Any]:
    """The dry run's report, checked to change nothing."""
    before = archive_digest(stack)
    out = memstream(
        "purge",
        "--tenant",
        TENANT,
        "--subject",
        "ines øverland-quist",
        "--dry-run",
        "--json",
        data_dir=stack.data_dir,
    )
    report: dict[str, Any] = json.loads(out.stdout)
    assert archive_digest(stack) == before
    assert not [e for e in stack.ledger() if e["type"] == "memory.purge"]
    assert leaks(client)  # her memory is still served
    return report


def traces(stack: RunningStack, tenant: str = TENANT) -> dict[str, dict[str, Any] | None]:
    """The tenant's checkout traces by packet id, opened through the key store (None: its
    key is gone)."""
    keys = SqliteDataKeys(stack.data_dir / "data-keys.sqlite")
    try:
        opener, out = TraceOpener(keys), {}
        for m in read_to_end(stack.bootstrap, CHECKOUTS):
            doc = orjson.loads(m.value() or b"{}")
            if doc.get("tenant") == tenant:
                assert "sealed" in doc and "query" not in doc, doc
                out[doc["packet_id"]] = opener(doc)
        return out
    finally:
        keys.close()


def someone_elses_traces(stack: RunningStack) -> dict[str, str]:
    """Traces written as the API writes them (sealed under the stack's key store) that the
    purge must leave: his question citing his event; her very question in another tenant.
    Their packet id by tenant."""
    made = {
        TENANT: ("who repaired the lighthouse lamp?", ["bartholomew achebe"], ["his-1"]),
        "elsewhere": ("Where does Ines Øverland-Quist live?", [SUBJECT.lower()], ["her-1"]),
    }
    keys = SqliteDataKeys(stack.data_dir / "data-keys.sqlite")
    producer = make_producer(stack.bootstrap)
    packets = {}
    try:
        for tenant, (query, entities, cited) in made.items():
            trace = CheckoutTrace(
                packet_id=f"pk-{uuid.uuid4().hex}",
                tenant=tenant,
                query=query,
                answerability="answer_from_memory",
                family=QuestionFamily(operation="lookup", entities=entities),
                answer_ids=cited,
                cited_ids=cited,
                at=datetime.now(UTC),
                version="v1",
            )
            value = TraceSealer(keys).encode(trace.model_dump(mode="json"))
            producer.produce(CHECKOUTS, value, key=tenant.encode())
            packets[tenant] = trace.packet_id
        assert producer.flush(30) == 0
    finally:
        keys.close()
    return packets


@pytest.fixture(scope="module")
def traced(
    stack: RunningStack, dry_run: dict[str, Any], client: MemoryHttpClient
) -> tuple[set[str], dict[str, str]]:
    """Before the purge: the packet ids of every trace of the tenant whose question names her
    (the dry run's reads and one more checkout), and someone else's traces."""
    asked = client.checkout("Where does Ines Øverland-Quist live?")["packet_id"]
    wait_until(lambda: asked in traces(stack), 60, "the trace in memory.checkouts")
    forms = name_forms(SUBJECT, entity_key(SUBJECT))
    hers = {p for p, t in traces(stack).items() if t is not None and names_in(t["query"], forms)}
    assert asked in hers and len(hers) >= 2
    return hers, someone_elses_traces(stack)


@pytest.fixture(scope="module")
def purged(
    dry_run: dict[str, Any], traced: tuple[set[str], dict[str, str]], client: MemoryHttpClient
) -> dict[str, Any]:
    report: dict[str, Any] = client.purge(SUBJECT, wait_s=60)
    return report


def test_a_dry_run_reports_and_changes_nothing(dry_run: dict[str, Any]) -> None:
    assert dry_run["dry_run"] is True and dry_run["tombstone_id"] is None
    assert dry_run["subject_key"] == "ines øverland-quist"  # ø has no decomposition
    assert dry_run["removed"]["events"] == len(HER_IDS)
    assert dry_run["removed"]["archive_lines"] == len(HER_IDS)
    assert dry_run["removed"]["facts"] >= 1 and dry_run["removed"]["latent_artifacts"] >= 1


def test_the_purge_completes_in_every_store(purged: dict[str, Any]) -> None:
    assert purged["complete"] is True, purged
    assert set(purged["completed"]) >= {"graph", "latents", "archive", "vectors"}
    assert purged["removed"]["events"] == len(HER_IDS)


def test_her_checkout_traces_no_longer_open_and_another_subjects_do(
    stack: RunningStack, traced: tuple[set[str], dict[str, str]], purged: dict[str, Any]
) -> None:
    hers, others = traced
    assert purged["removed"]["checkout_traces"] >= len(hers)
    after = traces(stack)
    assert {p: after[p] for p in hers} == dict.fromkeys(hers)
    his = after[others[TENANT]]
    assert his is not None and his["query"] == "who repaired the lighthouse lamp?"
    same_words = traces(stack, "elsewhere")[others["elsewhere"]]
    assert same_words is not None and same_words["cited_ids"] == ["her-1"]


def test_the_report_says_per_topic_what_happened(purged: dict[str, Any]) -> None:
    topics = purged["topics"]
    assert set(topics) >= {RAW, LEDGER, CHECKOUTS, DLQ}
    assert all(t["sealed"] for t in topics.values()), topics
    assert topics[RAW]["keys_destroyed"] == len(HER_IDS) == topics[LEDGER]["keys_destroyed"]
    assert topics[CHECKOUTS]["keys_destroyed"] == purged["removed"]["checkout_traces"]
    assert purged["residual"] == []  # everything went through the API: sealed


def test_no_read_returns_her_data(purged: dict[str, Any], client: MemoryHttpClient) -> None:
    assert leaks(client) == []


def test_no_file_in_the_data_dir_holds_her_text(
    stack: RunningStack, purged: dict[str, Any]
) -> None:
    # The graph server's append-only file and the vector segments are rewritten after the
    # stores applied the tombstone: give them the time they take.
    no_file_holds_hers(stack.data_dir)


def test_memory_latents_from_the_start_holds_nothing_of_hers(
    stack: RunningStack, purged: dict[str, Any]
) -> None:
    """A plain consumer reads memory.latents from the start: none of her text in any record,
    and with the stack's data keys no artifact that opens cites one of her events (the latent
    builder destroyed the keys of every artifact built from them, stale ones included)."""
    assert "artifact_keys" in purged["removed"]

    def opened_hers() -> list[str]:
        records = read_topic(stack.bootstrap, LATENTS)
        keys = SqliteDataKeys(stack.data_dir / "data-keys.sqlite")
        try:
            found = decode_artifacts([m.value() for m in records], EntryOpener(keys))
        finally:
            keys.close()
        return [a.artifact_id for a in found
                if isinstance(a, LatentArtifact) and HER_IDS & set(a.source_ids)]  # fmt: skip

    records = read_topic(stack.bootstrap, LATENTS)
    assert any(b'"deleted_by"' in (m.value() or b"") for m in records)  # she had artifacts
    for m in records:
        value = m.value() or b""
        assert not [s for s in HERS if s.encode() in value or s.lower().encode() in value.lower()]
    wait_until(lambda: not opened_hers(), 60, "the keys of her artifacts destroyed")


def test_someone_else_is_intact(purged: dict[str, Any], client: MemoryHttpClient) -> None:
    found = [i for i in client.recall("who repaired the lighthouse lamp?", k=5)]
    assert found and found[0]["item_id"] == "his-1"
    packet = client.checkout("who repaired the lighthouse lamp?")
    assert packet["answerability"] == "answer_from_memory"
    assert client.lineage("his-1")["leaves"][0]["event_id"] == "his-1"


def test_verify_passes_and_counts_the_purged_entries(
    stack: RunningStack, purged: dict[str, Any]
) -> None:
    out = memstream("verify", "--tenant", TENANT, data_dir=stack.data_dir, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "purged" in out.stdout


def test_ingest_refuses_a_hand_written_tombstone(stack: RunningStack) -> None:
    event = {"stream": "x", "type": "memory.purge", "payload": {"subject": "anyone"}}
    resp = httpx.post(
        f"{stack.api_url}/v1/events",
        json=event,
        headers={"Authorization": f"Bearer {key_for(stack)}"},
    )
    assert resp.status_code == 422 and "DELETE /v1/subjects" in resp.json()["detail"]


def test_an_event_resent_under_a_purged_id_is_refused_and_nothing_of_its_batch_written(
    stack: RunningStack, purged: dict[str, Any]
) -> None:
    """Her id's data key is destroyed for good: a re-send (new words, same id) gets 409
    naming it, no key is made again, and the batch's other event is not produced either."""
    fresh = f"after-purge-{uuid.uuid4().hex[:8]}"
    batch = [
        _msg(fresh, "the user", "Odalys Brenneck-Saar bought a kayak.", 6),
        _msg("her-2", SUBJECT, "ines øverland-quist is back: new passport QY-0001-ZZ.", 7),
    ]
    resp = httpx.post(
        f"{stack.api_url}/v1/events",
        json={"events": batch},
        headers={"Authorization": f"Bearer {key_for(stack)}"},
    )
    assert resp.status_code == 409, resp.text
    assert resp.json()["purged_ids"] == ["her-2"] and "purged" in resp.json()["detail"]
    keys = SqliteDataKeys(Settings(data_dir=stack.data_dir).data_keys_path)
    try:
        assert keys.get(TENANT, "event", ["her-2"]) == {}
    finally:
        keys.close()
    raw = [m.value() or b"{}" for m in read_topic(stack.bootstrap, RAW)]
    assert fresh not in {orjson.loads(v).get("id") for v in raw}
    assert not any(b"QY-0001-ZZ" in v for v in raw)


def test_a_replayed_version_does_not_bring_her_back(
    stack: RunningStack, purged: dict[str, Any], client: MemoryHttpClient
) -> None:
    memstream("replay", "--version", "after-purge", data_dir=stack.data_dir)
    wait_until(lambda: _caught_up(stack, "after-purge"), 120, "the replayed version built")
    memstream("projections", "promote", "after-purge", data_dir=stack.data_dir)
    wait_until(lambda: _served(client), 60, "the replayed version serving")
    assert leaks(client) == []
    no_file_holds_hers(stack.data_dir)


def _caught_up(stack: RunningStack, version: str) -> bool:
    res = memstream("projections", "list", "--json", data_dir=stack.data_dir, check=False)
    if res.returncode != 0:
        return False
    [v] = [v for v in json.loads(res.stdout)["versions"] if v["name"] == version]
    # After the purge fewer events are projected than the ledger holds: lag alone says built.
    return bool(v["status"] == "ready" and caught_up(v, 0))


def _served(client: MemoryHttpClient) -> bool:
    try:
        return any(i["item_id"] == "his-1" for i in client.recall("lighthouse lamp", k=5))
    except MemstreamHttpError:
        return False


def test_a_clear_raw_event_is_reported_as_residual_with_its_time(
    stack: RunningStack, purged: dict[str, Any], client: MemoryHttpClient
) -> None:
    """An SDK client without the key store writes raw in the clear: the purge says so."""
    before = datetime.now(UTC)
    with MemoryClient(stack.bootstrap, TENANT, agent="no-keys", prover=stack.prover) as sdk:
        eid = sdk.emit(
            "journal", "message.user", {"text": "quentin fairweather-ng lent me a canoe."}
        )
        sdk.flush()
    after = datetime.now(UTC)

    def canoe() -> bool:
        return any(i["item_id"].split("#")[0] == eid for i in client.recall("canoe", k=10))

    def by_name() -> bool:  # the bounded search a purge plans with is a sparse one
        found = client.recall("Quentin Fairweather-Ng", k=10, mode="sparse")
        return any(i["item_id"].split("#")[0] == eid for i in found)

    wait_until(canoe, 90, "the clear event recalled")
    wait_until(by_name, 90, "the clear event found by name")
    report = client.purge("Quentin Fairweather-Ng", wait_s=60)
    assert report["complete"] and report["removed"]["events"] == 1, json.dumps(report)
    [raw] = [r for r in report["residual"] if r["topic"] == RAW]
    assert raw["count"] == 1
    kept = timedelta(milliseconds=Settings().raw_retention_ms)  # the stack's default
    until = datetime.fromisoformat(raw["until"])
    assert before + kept - timedelta(seconds=5) <= until <= after + kept + timedelta(seconds=5)
    assert "until it restarts" in raw["note"]
    assert not canoe()


def test_the_mcp_forget_tool_is_a_dry_run_unless_told_then_purges(stack: RunningStack) -> None:
    """The agents' way to the same workflow, in a tenant and with a subject of its own."""
    tenant, subject = "atelier-mcp", "bartholomé quispe-nakamura"
    key = memstream("keys", "create", "--tenant", tenant, data_dir=stack.data_dir).stdout.strip()
    told = "Bartholomé Quispe-Nakamura left his umbrella at the pottery studio."
    with MemoryHttpClient(stack.api_url, key) as client:
        (event_id,) = client.emit(
            [{"stream": "mcp", "type": "observation", "payload": {"text": told}}]
        )
        wait_until(lambda: _lineage_found(client, event_id), 60, "the event in memory")

    def counted() -> float:
        # read_samples raises when /metrics does not answer: ``scrape`` would read nothing,
        # and beside a second suite the API busy with a purge has taken over 3 s to answer.
        url, name = f"{stack.api_url}/metrics", "memstream_mcp_tool_calls_total"
        samples = read_samples(url, {name}, timeout=30)
        return sum(s.value for s in samples if s.labels["tool"] == "forget")

    before = counted()
    dry = anyio.run(call_tool, stack.api_url, key, "forget", {"subject": subject})
    assert not dry.is_error and dry.structured_content["dry_run"] is True, text_of(dry)
    assert dry.structured_content["removed"]["events"] == 1
    args = {"subject": subject, "dry_run": False, "wait_s": 60}
    done = anyio.run(call_tool, stack.api_url, key, "forget", args)
    assert not done.is_error and done.structured_content["dry_run"] is False, text_of(done)
    assert done.structured_content["tombstone_id"] and done.structured_content["complete"]
    assert counted() == before + 2  # under its own name, not "unknown"
    with MemoryHttpClient(stack.api_url, key) as client:
        assert not _lineage_found(client, event_id)  # gone from the graph


def _lineage_found(client: MemoryHttpClient, item_id: str) -> bool:
    """Whether lineage finds the item: 404 is "not found"; any other error (a store down)
    says nothing of it and fails the test."""
    try:
        return bool(client.lineage(item_id)["events"])
    except MemstreamHttpError as exc:
        if exc.status == 404:
            return False
        raise


def test_a_restarted_stack_does_not_bring_her_back(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_stack(data)
    try:
        key = key_for(first)
        with MemoryHttpClient(first.api_url, key, timeout=150) as c:
            remembered(c)
            assert c.purge(SUBJECT, wait_s=60)["complete"]
    finally:
        assert first.stop() == 0
    second = start_stack(data)
    try:
        with MemoryHttpClient(second.api_url, key, timeout=150) as c:
            wait_until(lambda: _served(c), 120, "the restarted stack serving")
            assert leaks(c) == []
        no_file_holds_hers(data)
        out = memstream("verify", data_dir=data, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
    finally:
        second.stop()


# One subject per surface, each named in events, asked about, then purged through it.
LOGGED = {
    "http": ("Þórunn Vallée-Østergaard", "Þórunn Vallée-Østergaard repaints the ferry bell."),
    "cli": ("dmitri ivanov-kraus", "dmitri ivanov-kraus tunes the chapel organ on Fridays."),
    "mcp-http": ("Yusuf Ağaoğlu Baptiste", "Yusuf Ağaoğlu Baptiste keeps bees on the roof."),
    "mcp-stdio": ("Nkechi Ødegård-Lund", "Nkechi Ødegård-Lund sails a red dinghy."),
}


def _log_files(stack: RunningStack, extra: list[Path]) -> list[Path]:
    up = stack.data_dir.parent / f"{stack.data_dir.name}-up.log"
    return [*sorted((stack.data_dir / "logs").glob("*")), up, *extra]


def test_no_log_holds_a_subject_purged_through_any_surface(
    stack: RunningStack, tmp_path: Path
) -> None:
    """Each subject's name (in any case, percent-encoded, JSON-escaped, as its key), the text
    said of it and the question asked of it appear in no log of the stack, nor in the stdio
    MCP server's standard error, after a purge through each surface."""
    tenant = "registre-logs"
    key = memstream("keys", "create", "--tenant", tenant, data_dir=stack.data_dir).stdout
    key = key.strip()
    with MemoryHttpClient(stack.api_url, key, timeout=150) as client:
        for surface, (subject, said) in LOGGED.items():
            client.emit([{"stream": surface, "type": "observation", "payload": {"text": said}}])
            asked = f"what does {subject} do?"
            wait_until(lambda q=asked: client.recall(q, k=5) != [], 60, f"{surface} recalled")  # type: ignore[misc]
            client.checkout(asked)
        report = client.purge(LOGGED["http"][0], wait_s=60)
        assert report["complete"] and report["removed"]["events"] == 1, report
    out = memstream("purge", "--tenant", tenant, "--subject", LOGGED["cli"][0], "--json",
                    data_dir=stack.data_dir)  # fmt: skip
    assert json.loads(out.stdout)["removed"]["events"] == 1
    args = {"subject": LOGGED["mcp-http"][0], "dry_run": False, "wait_s": 60}
    done = anyio.run(call_tool, stack.api_url, key, "forget", args)
    assert not done.is_error and done.structured_content["removed"]["events"] == 1

    errlog = tmp_path / "mcp-stdio.err"

    async def stdio_forget() -> CallToolResult:
        with errlog.open("w") as err:
            async with stdio_session(stack.data_dir, key, errlog=err) as session:
                args = {"subject": LOGGED["mcp-stdio"][0], "dry_run": False, "wait_s": 60}
                return await session.call_tool("forget", args)

    done = anyio.run(stdio_forget)
    assert not done.is_error and done.structured_content["removed"]["events"] == 1, text_of(done)
    markers: list[str] = []
    for subject, said in LOGGED.values():
        markers += [subject, subject.lower(), subject.upper(), entity_key(subject), said]
        markers += [f"what does {subject} do?", quote_plus(subject)]
    found = {
        str(path): found_in(path.read_bytes(), tuple(markers))
        for path in _log_files(stack, [errlog])
        if path.is_file()
    }
    assert {p: m for p, m in found.items() if m} == {}
    assert errlog.stat().st_size > 0  # the stdio server wrote its start line there
