"""Memory learns from use, through the running stack: outcomes → retrospective → priors.

Two memories answer the same question differently. Tasks that relied on the first fail, tasks
that relied on the second succeed; the retrospective pass binds each outcome to its checkout,
writes feedback (and a proposal) back through the ledger, and the next checkout answers from
the second, with the first's failure record in the packet. Praise alone moves nothing.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
import orjson
import pytest
from confluent_kafka import Producer
from mcpcall import call_tool, text_of
from memstream import position
from memstream.client import MemoryHttpClient, MemstreamHttpError
from memstream.events.payloads import QuestionFamily
from memstream.kafka.reading import committed_offsets
from memstream.kafka.topics import CHECKOUTS, LEARNING, RAW, RETROSPECTIVE_GROUP
from memstream.learning.trace import CheckoutTrace
from memstream.metrics import scrape
from scratchtopics import tenant_reach
from settling import settled, tenant_ledger
from stackproc import RunningStack, memstream, owned_stack, pid_alive, wait_until
from topicread import read_topic


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """This module owns its stack: it kills the retrospective pass mid-way. Two replicas of
    every worker that scales out, the retrospective pass included: a tenant's outcomes and
    traces must meet in whichever replica holds the tenant."""
    yield from owned_stack(tmp_path_factory, "learning", env={"MEMSTREAM_REPLICAS": "2"})


TENANT = "atelier"
QUESTION = "What is the door code of the atelier on rue Dupré?"
# Told by the same person a week apart; the newer one (which checkout prefers at first) is wrong.
WRONG, RIGHT, PAINT = "door-code-4417", "door-code-9052", "atelier-paint"
MEMORIES = [
    {"id": RIGHT, "stream": "notes", "type": "observation", "agent": "inès",
     "occurred_at": "2026-02-03T09:00:00Z",
     "payload": {"text": "inès says the door code of the atelier on rue Dupré is 9052."}},
    {"id": WRONG, "stream": "notes", "type": "observation", "agent": "inès",
     "occurred_at": "2026-02-10T09:00:00Z",
     "payload": {"text": "inès says the door code of the atelier on rue Dupré is 4417."}},
    {"id": PAINT, "stream": "notes", "type": "observation", "agent": "the user",
     "occurred_at": "2026-02-12T09:00:00Z",
     "payload": {"text": "The user repainted the atelier on rue Dupré in a pale blue."}},
]  # fmt: skip
FAILED = [f"door-fail-{i}" for i in range(3)]
SUCCEEDED = [f"door-ok-{i}" for i in range(3)]


def ledger(stack: RunningStack) -> list[dict[str, Any]]:
    return tenant_ledger(stack, TENANT)


def top_support(packet: dict[str, Any]) -> list[str]:
    answers = packet["answer_candidates"]
    return [i.split("#", 1)[0] for i in answers[0]["support_ids"]] if answers else []


def retro_feedback(stack: RunningStack) -> list[dict[str, Any]]:
    return [
        e
        for e in ledger(stack)
        if e["type"] == "memory.feedback" and e["payload"]["source"] == "retrospective"
    ]


def outcome_of(task: str, status: str, packet_id: str, used: str) -> dict[str, Any]:
    payload = {"task_id": task, "status": status, "checkout_ids": [packet_id], "used_ids": [used]}
    return {
        "id": f"{task}-outcome",
        "stream": "errands",
        "type": "task.outcome",
        "payload": payload,
    }


def run_task(client: MemoryHttpClient, task: str, status: str, used: str) -> str:
    """Start a task, check out for it, report how it went; returns the outcome id."""
    client.emit([{"id": f"{task}-start", "stream": "errands", "type": "task.started",
                  "payload": {"task_id": task, "goal": "let the courier in"}}])  # fmt: skip
    packet = client.checkout(QUESTION, task_id=task)
    [outcome] = client.emit([outcome_of(task, status, packet["packet_id"], used)])
    return outcome


@pytest.fixture(scope="module")
def key(stack: RunningStack) -> str:
    return memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir).stdout.strip()


@pytest.fixture(scope="module")
def client(stack: RunningStack, key: str) -> Iterator[MemoryHttpClient]:
    with MemoryHttpClient(stack.api_url, key) as c:
        c.emit(MEMORIES)
        wait_until(lambda: len(ledger(stack)) == len(MEMORIES) and settled(stack), 90, "memories")
        yield c


@pytest.fixture(scope="module")
def learned(stack: RunningStack, client: MemoryHttpClient) -> dict[str, Any]:
    """The first answer, then three failed tasks on it and three successes on the other."""
    before = client.checkout(QUESTION)
    outcomes = [run_task(client, t, "failure", WRONG) for t in FAILED]
    outcomes += [run_task(client, t, "success", RIGHT) for t in SUCCEEDED]

    def proposed() -> bool:
        return any(e["type"] == "memory.invalidate" for e in ledger(stack))

    wait_until(lambda: len(retro_feedback(stack)) >= 6 and proposed(), 120, "the retrospective")
    wait_until(lambda: settled(stack), 90, "feedback projected")
    return {"before": before, "after": client.checkout(QUESTION), "outcomes": outcomes}


def test_the_next_checkout_answers_from_the_memory_that_led_to_success(
    learned: dict[str, Any],
) -> None:
    assert top_support(learned["before"]) == [WRONG], learned["before"]["answer_candidates"]
    after = learned["after"]
    assert after["answerability"] == "answer_from_memory", after
    assert top_support(after) == [RIGHT], after["answer_candidates"]
    assert "9052" in after["answer_candidates"][0]["answer"]
    moved = {a["item_id"]: a for a in after["meta"]["feedback"]}
    assert moved[WRONG]["effect"] == "lowered" and moved[RIGHT]["effect"] == "raised"
    assert sorted(moved[WRONG]["failed_tasks"]) == FAILED


def test_the_packet_shows_the_first_memorys_failure_record(learned: dict[str, Any]) -> None:
    records = [w for w in learned["after"]["warnings"] if w["kind"] == "failure_record"]
    assert [w["ids"] for w in records] == [[WRONG]], learned["after"]["warnings"]
    assert all(task in records[0]["message"] for task in FAILED)


def test_the_first_memory_is_still_in_memory(
    stack: RunningStack, client: MemoryHttpClient, learned: dict[str, Any]
) -> None:
    lineage = client.lineage(WRONG)
    assert lineage["kind"] == "event" and lineage["leaves"][0]["event_id"] == WRONG
    [entry] = [e for e in ledger(stack) if e["id"] == WRONG]
    assert entry["payload"]["text"].endswith("4417.")


def test_feedback_and_the_proposal_are_in_the_ledger_caused_by_the_outcomes(
    stack: RunningStack, learned: dict[str, Any]
) -> None:
    feedback = retro_feedback(stack)
    by_outcome = {e["caused_by"][0]: e for e in feedback}
    assert set(by_outcome) == set(learned["outcomes"]) and len(feedback) == 6
    for task in FAILED + SUCCEEDED:
        p = by_outcome[f"{task}-outcome"]["payload"]
        failed = task in FAILED
        assert p["target_ids"] == [WRONG if failed else RIGHT] and p["task_id"] == task
        assert (p["signal"], p["certainty"]) == ((-1.0 if failed else 1.0), 1.0)
        assert p["packet_id"].startswith("pk-") and p["family"]["operation"]
    [proposal] = [e for e in ledger(stack) if e["type"] == "memory.invalidate"]
    assert proposal["payload"]["review_status"] == "proposed"
    assert proposal["payload"]["target_ids"] == [WRONG]
    assert sorted(proposal["caused_by"]) == sorted(f"{t}-outcome" for t in FAILED)


def test_the_chain_verifies(stack: RunningStack, learned: dict[str, Any]) -> None:
    result = memstream("verify", "--tenant", TENANT, data_dir=stack.data_dir, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ok: {len(ledger(stack))} entries" in result.stdout


def praise_of(stack: RunningStack) -> list[dict[str, Any]]:
    return [e for e in ledger(stack) if e["payload"].get("target_ids") == [PAINT]]


def test_praise_alone_does_not_put_an_unrelated_memory_on_top(
    stack: RunningStack, key: str, client: MemoryHttpClient, learned: dict[str, Any]
) -> None:
    ids = []
    for _ in range(10):
        resp = httpx.post(
            f"{stack.api_url}/v1/feedback",
            json={"target_ids": [PAINT], "signal": 1, "reason": "love this one"},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert resp.status_code == 202, resp.text
        ids.append(resp.json()["id"])
    wait_until(lambda: len(praise_of(stack)) == 10 and settled(stack), 90, "praise projected")
    assert sorted(e["id"] for e in praise_of(stack)) == sorted(ids)
    assert all(e["payload"]["source"] == "explicit" for e in praise_of(stack))
    for query in (QUESTION, "door code for the atelier?"):
        packet = client.checkout(query)
        assert PAINT not in top_support(packet), packet["answer_candidates"]
        assert top_support(packet) == [RIGHT]
        # it mentions the atelier, so the prior may re-order it among the candidates; it
        # cannot make it the answer to a question it does not answer
        assert all(PAINT not in a["support_ids"] for a in packet["answer_candidates"])


RETRO_SERIES = {"memstream_retrospective_outcomes_total", "memstream_retrospective_traces"}


def retro_replicas(stack: RunningStack) -> dict[str, dict[str, Any]]:
    """The retrospective replicas in ``stack.json``, by name."""
    info = json.loads((stack.data_dir / "stack.json").read_text())["components"]
    return {n: c for n, c in info.items() if c.get("worker") == "retrospective"}


def retro_metric(stack: RunningStack, name: str, **labels: str) -> float:
    """``name`` summed over the retrospective replicas that answer."""
    urls = [c["metrics_url"] for c in retro_replicas(stack).values()]
    return sum(
        float(s.value)
        for s in scrape(urls, RETRO_SERIES)
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def tenant_holder(stack: RunningStack) -> str:
    """The retrospective replica whose partition of memory.learning holds the tenant."""
    [part] = {
        m.partition() for m in read_topic(stack.bootstrap, LEARNING) if m.key() == TENANT.encode()
    }
    res = memstream("status", "--json", data_dir=stack.data_dir, check=False)
    members = json.loads(res.stdout)["consumer_groups"][RETROSPECTIVE_GROUP]["members"]
    [pid] = [m["pid"] for m in members if part in m["assignment"].get(LEARNING, [])]
    [name] = [n for n, c in retro_replicas(stack).items() if c["pid"] == pid]
    return name


def test_state_survives_a_restart_of_the_retrospective(
    stack: RunningStack, client: MemoryHttpClient, learned: dict[str, Any]
) -> None:
    """A packet checked out before a kill -9 of the replica holding the tenant binds after
    the restart (its partitions' traces are rebuilt from memory.checkouts, wherever they
    land), and nothing is emitted twice (one proposal, no repeats)."""
    assert len(retro_replicas(stack)) == 2
    task = "door-fail-after-restart"
    packet = client.checkout(QUESTION, task_id=task)
    victim = tenant_holder(stack)
    old = stack.pid(victim)
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: not pid_alive(old), 10, "the old process to die")
    wait_until(lambda: stack.pid(victim) != old, 30, "the supervisor to restart it")

    def both_members() -> bool:
        res = memstream("status", "--json", data_dir=stack.data_dir, check=False)
        groups = json.loads(res.stdout or "{}").get("consumer_groups", {})
        members = groups.get(RETROSPECTIVE_GROUP, {}).get("members", [])
        return len(members) == 2 and all(m["assignment"].get(LEARNING) for m in members)

    wait_until(both_members, 90, "both replicas holding partitions again")
    wait_until(lambda: retro_metric(stack, "memstream_retrospective_traces") >= 7, 60, "traces")
    bound = retro_metric(stack, "memstream_retrospective_outcomes_total", result="bound")
    late = retro_metric(stack, "memstream_retrospective_outcomes_total", result="late")
    client.emit([outcome_of(task, "failure", packet["packet_id"], WRONG)])
    wait_until(lambda: len(retro_feedback(stack)) == 7, 60, "feedback for the new outcome")
    [fb] = [e for e in retro_feedback(stack) if e["caused_by"] == [f"{task}-outcome"]]
    assert fb["payload"]["packet_id"] == packet["packet_id"]
    assert (
        retro_metric(stack, "memstream_retrospective_outcomes_total", result="bound") == bound + 1
    )
    assert retro_metric(stack, "memstream_retrospective_outcomes_total", result="late") == late
    ids = [e["id"] for e in ledger(stack)]
    assert len(ids) == len(set(ids))
    proposals = [e for e in ledger(stack) if e["type"] == "memory.invalidate"
                 and e["payload"]["review_status"] == "proposed"]  # fmt: skip
    assert len(proposals) == 1


def test_feedback_from_the_command_line_and_its_refusals(
    stack: RunningStack, client: MemoryHttpClient, learned: dict[str, Any]
) -> None:
    packet = client.checkout(QUESTION)
    args = ("--tenant", TENANT, "--signal", "-0.5", "--packet", packet["packet_id"])
    result = memstream("feedback", *args, "--reason", "wrong floor", "--json", WRONG,
                       data_dir=stack.data_dir)  # fmt: skip
    doc = json.loads(result.stdout)  # one JSON document and nothing else
    assert doc["target_ids"] == [WRONG] and doc["signal"] == -0.5
    wait_until(lambda: any(e["id"] == doc["id"] for e in ledger(stack)), 60, "cli feedback")
    [event] = [e for e in ledger(stack) if e["id"] == doc["id"]]
    p = event["payload"]
    assert (p["source"], p["packet_id"], p["reason"]) == (
        "explicit",
        packet["packet_id"],
        "wrong floor",
    )
    # the API still remembers the packet: the feedback counts for questions like it
    assert p["family"]["operation"] == packet["synthesis_plan"]["operation"]
    bad = memstream("feedback", "--tenant", TENANT, "--signal", "2", WRONG,
                    data_dir=stack.data_dir, check=False)  # fmt: skip
    assert bad.returncode != 0
    url = f"{stack.api_url}/v1/feedback"
    assert httpx.post(url, json={"target_ids": [WRONG], "signal": 1}).status_code == 401
    key = {"Authorization": f"Bearer {stack.dev_key}"}
    for body in ({"target_ids": [], "signal": 1}, {"target_ids": ["x"], "signal": "1"},
                 {"target_ids": ["x"], "signal": 1, "tenant": "other"}):  # fmt: skip
        resp = httpx.post(url, json=body, headers=key)
        assert resp.status_code == 422 and resp.json()["detail"], resp.text


def test_feedback_naming_no_memory_is_404_listing_the_ids_and_writes_nothing(
    stack: RunningStack, client: MemoryHttpClient, key: str, learned: dict[str, Any]
) -> None:
    """A typo, a latent artifact's id, another tenant's event: 404 naming each, over HTTP,
    the SDK, the command line and MCP; nothing reaches the ledger. Known ids are accepted,
    and the 202's position names the raw record of the one feedback event."""
    latent = next(iter(client.latents()), {"artifact_id": "lat-none"})["artifact_id"]
    other = memstream("keys", "create", "--tenant", "elsewhere-fb", data_dir=stack.data_dir)
    with MemoryHttpClient(stack.api_url, other.stdout.strip()) as theirs:
        theirs.emit([{"id": "their-note", "stream": "n", "type": "observation",
                      "payload": {"text": "a note of another tenant"}}])  # fmt: skip
    unknown = ["door-code-44l7", latent, "their-note"]
    before = len(ledger(stack))
    with pytest.raises(MemstreamHttpError) as err:
        client.feedback([WRONG, *unknown], -1.0, reason="typo")
    assert err.value.status == 404 and all(i in str(err.value) for i in unknown), err.value
    assert WRONG not in str(err.value).split("memory")[-1]
    cli = memstream("feedback", "--tenant", TENANT, "--signal", "1", "--key", key, *unknown,
                    data_dir=stack.data_dir, check=False)  # fmt: skip
    assert cli.returncode == 1 and all(i in cli.stderr + cli.stdout for i in unknown), cli
    called = mcp_feedback(stack, key, unknown)
    assert called["isError"] and all(i in called["text"] for i in unknown), called
    url, auth = f"{stack.api_url}/v1/feedback", {"Authorization": f"Bearer {key}"}
    resp = httpx.post(url, json={"target_ids": [RIGHT], "signal": 0.5}, headers=auth)
    assert resp.status_code == 202, resp.text
    raw = position.read(resp.json()["position"]).position.raw
    assert len(ledger(stack)) >= before  # settles below
    wait_until(lambda: any(e["id"] == resp.json()["id"] for e in ledger(stack)), 60, "feedback")
    assert not [e for e in ledger(stack)[before:] if e.get("payload", {}).get("reason") == "typo"]
    ((partition, offset),) = raw.items()  # the one feedback event
    assert offset == tenant_reach(stack.bootstrap, RAW, TENANT)[partition]


def mcp_feedback(stack: RunningStack, key: str, ids: list[str]) -> dict[str, Any]:
    result = anyio.run(call_tool, stack.api_url, key, "feedback", {"target_ids": ids, "signal": 1})
    return {"isError": result.is_error, "text": text_of(result)}


def learning_position(stack: RunningStack, event_id: str) -> tuple[int, int] | None:
    """Where the pass reads the event: its copy in memory.learning."""
    for m in read_topic(stack.bootstrap, LEARNING):
        if orjson.loads(m.value() or b"{}").get("id") == event_id:
            return m.partition() or 0, m.offset() or 0
    return None


def test_an_outcome_waiting_for_its_trace_holds_the_commit(
    stack: RunningStack, client: MemoryHttpClient, learned: dict[str, Any]
) -> None:
    """The trace of a packet is still in flight: the outcome naming it waits, the group does
    not commit past it (even after later outcomes are settled), then it binds on arrival."""
    waiting, later = "door-in-flight", "door-after-the-waiting-one"
    [waiting_id] = client.emit([outcome_of(waiting, "success", "pk-in-flight", RIGHT)])
    wait_until(lambda: learning_position(stack, waiting_id) is not None, 60, "the outcome routed")
    part, offset = learning_position(stack, waiting_id) or (0, 0)
    # a later outcome of the same tenant (so the same partition) settles at once
    packet = client.checkout(QUESTION, task_id=later)
    client.emit([outcome_of(later, "success", packet["packet_id"], RIGHT)])
    wait_until(
        lambda: any(e["caused_by"] == [f"{later}-outcome"] for e in retro_feedback(stack)),
        60,
        "the later outcome settled",
    )
    assert not any(e["caused_by"] == [waiting_id] for e in retro_feedback(stack))
    committed = committed_offsets(stack.bootstrap, RETROSPECTIVE_GROUP, LEARNING)
    assert committed[part] <= offset, (committed, part, offset)
    trace = CheckoutTrace(
        packet_id="pk-in-flight", tenant=TENANT, query=QUESTION, task_id=waiting,
        answerability="answer_from_memory", answer_ids=[RIGHT], cited_ids=[RIGHT],
        family=QuestionFamily(operation="lookup"), at=datetime.now(UTC), version="late",
    )  # fmt: skip
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    producer.produce(CHECKOUTS, trace.model_dump_json().encode(), key=TENANT.encode())
    assert producer.flush(10) == 0
    wait_until(
        lambda: any(e["caused_by"] == [waiting_id] for e in retro_feedback(stack)),
        60,
        "the waiting outcome bound",
    )
    [fb] = [e for e in retro_feedback(stack) if e["caused_by"] == [waiting_id]]
    assert fb["payload"]["packet_id"] == "pk-in-flight"
    wait_until(
        lambda: committed_offsets(stack.bootstrap, RETROSPECTIVE_GROUP, LEARNING)[part] > offset,
        30,
        "the commit to move past it",
    )


def exclusions(packet: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (e["item_id"].split("#", 1)[0], e["reason"])
        for a in packet["answer_candidates"]
        for e in a["excluded_ids"]
    }


def test_a_proposal_changes_nothing_until_accepted(
    stack: RunningStack, client: MemoryHttpClient, learned: dict[str, Any]
) -> None:
    """The retrospective's proposal is listed open and leaves checkout alone; accepted (from
    the command line), the memory it names is left out as invalidated, and stays in the
    ledger; a second decision is refused."""
    [proposal] = client.invalidations("proposed")
    assert (proposal["target_ids"], proposal["decisions"]) == ([WRONG], [])
    packet = client.checkout(QUESTION)
    assert not any(reason == "invalidated" for _, reason in exclusions(packet))
    args = ("--tenant", TENANT, "--reason", "the code changed back", "--json")
    result = memstream("invalidations", "accept", proposal["id"], *args, data_dir=stack.data_dir)
    decision = json.loads(result.stdout)
    assert decision["status"] == "accepted"

    def left_out() -> bool:
        return (WRONG, "invalidated") in exclusions(client.checkout(QUESTION))

    wait_until(left_out, 60, "the accepted proposal projected")
    packet = client.checkout(QUESTION)
    assert top_support(packet) == [RIGHT] and "9052" in packet["answer_candidates"][0]["answer"]
    assert WRONG not in [s["item_id"] for s in packet["snippets"]]
    assert any(w["kind"] == "invalidated" and WRONG in w["ids"] for w in packet["warnings"])
    [entry] = [e for e in ledger(stack) if e["id"] == decision["id"]]
    assert entry["payload"]["proposal_id"] == proposal["id"]
    assert entry["payload"]["target_ids"] == [WRONG] and entry["caused_by"] == [proposal["id"]]
    assert client.lineage(WRONG)["events"][0]["text"].endswith("4417.")  # never deleted
    [listed] = client.invalidations("proposed")
    assert listed["decisions"] == [f"{decision['id']} accepted"]
    again = memstream("invalidations", "reject", proposal["id"], "--tenant", TENANT,
                      data_dir=stack.data_dir, check=False)  # fmt: skip
    assert again.returncode != 0 and "already decided" in again.stderr + again.stdout
    url = f"{stack.api_url}/v1/invalidations/no-such-proposal/accept"
    key = {"Authorization": f"Bearer {stack.dev_key}"}
    assert httpx.post(url, json={}, headers=key).status_code == 404


AMARA = "amara ọ̀kàfor-lindqvist"  # accented, hyphenated, written in lower case


def test_invalidating_a_fact_closes_it_and_reopens_the_one_before(
    stack: RunningStack, client: MemoryHttpClient
) -> None:
    facts = [
        {"id": "amara-city-1", "stream": "crm", "type": "fact.asserted",
         "occurred_at": "2025-04-01T00:00:00Z",
         "payload": {"subject": AMARA, "predicate": "lives_in", "object": "Bergen",
                     "valid_from": "2025-04-01T00:00:00Z"}},
        {"id": "amara-city-2", "stream": "crm", "type": "fact.asserted",
         "occurred_at": "2026-01-15T00:00:00Z",
         "payload": {"subject": AMARA, "predicate": "lives_in", "object": "Kraków",
                     "valid_from": "2026-01-15T00:00:00Z"}},
    ]  # fmt: skip
    client.emit(facts)
    question = "Where does Amara Ọ̀kàfor-Lindqvist live now?"

    def answer() -> str:
        found = client.checkout(question)["answer_candidates"]
        return str(found[0]["answer"]) if found else ""

    # the vector lane can answer before the graph holds the fact, and an invalidation names
    # what the graph holds (404 "not projected yet" before): wait for both
    wait_until(lambda: "Kraków" in answer() and settled(stack), 60, "the newer fact current")
    event_id = client.invalidate(["amara-city-2"], "mistyped: she never moved")
    wait_until(lambda: "Bergen" in answer(), 60, "the invalidation projected")
    packet = client.checkout(question)
    assert ("amara-city-2", "invalidated") in exclusions(packet), packet["answer_candidates"]
    [wrong] = [
        e for a in packet["answer_candidates"] for e in a["excluded_ids"]
        if e["item_id"].startswith("amara-city-2")
    ]  # fmt: skip
    assert wrong["detail"] == "mistyped: she never moved"
    assert all("Kraków" not in f["value_text"] for f in packet["facts"])
    # as of before the invalidation (made now), memory held the newer fact
    then = client.checkout(question, as_of="2026-02-01T00:00:00Z")
    assert "Kraków" in then["answer_candidates"][0]["answer"]
    # recall stays raw: the invalidated event is still found, marked with who closed it
    for mode in ("fused", "sparse"):
        found = {i["item_id"]: i for i in client.recall("Amara Kraków", k=10, mode=mode)}
        assert found["amara-city-2"]["invalidated_by"] == event_id, (mode, found)
        assert found["amara-city-2"]["invalidation_reason"] == "mistyped: she never moved"
        assert found.get("amara-city-1", {}).get("invalidated_by") is None
    listed = client.invalidations("accepted")
    assert any(v["id"] == event_id and v["target_ids"] == ["amara-city-2"] for v in listed)
    key = {"Authorization": f"Bearer {stack.dev_key}"}
    url = f"{stack.api_url}/v1/invalidate"
    for body in ({"target_ids": [], "reason": "x"}, {"target_ids": ["x"]},
                 {"target_ids": ["x"], "reason": ""}):  # fmt: skip
        resp = httpx.post(url, json=body, headers=key)
        assert resp.status_code == 422 and resp.json()["detail"], resp.text
    assert httpx.post(url, json={"target_ids": ["x"], "reason": "y"}).status_code == 401
