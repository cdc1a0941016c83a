"""Change and outcome questions through the running stack, by HTTP and by MCP.

One tenant: a planner records where people work and live, and one person changes jobs and
another moves; a coder runs a migration that fails, is retried and succeeds, and starts a
key rotation nobody reports on. Every change question is answered with both ends cited,
every outcome by the latest attempt citing the failure before it, and every question memory
cannot answer asks the user. Uses the session's shared stack (the tenant is this module's).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from mcpcall import call_tool, text_of
from memstream.client import MemoryHttpClient
from stackproc import RunningStack, memstream

TENANT = "orbit-change"


def _event(n: str, day: int, hour: int, stream: str, agent: str, type_: str,
           payload: dict[str, Any], **meta: str) -> dict[str, Any]:  # fmt: skip
    event = {
        "id": f"ch-{n}",
        "stream": stream,
        "agent": agent,
        "user": "mara",
        "type": type_,
        "occurred_at": f"2026-05-{day:02d}T{hour:02d}:00:00Z",
        "payload": payload,
    }
    return event | ({"metadata": meta} if meta else {})


def fact(subject: str, predicate: str, obj: str, text: str) -> dict[str, Any]:
    return {"subject": subject, "predicate": predicate, "object": obj, "text": text}


EVENTS = [
    _event("01", 1, 9, "people", "planner", "fact.asserted",
           fact("Bob Ferreira", "works_at", "Initech", "Bob Ferreira works at Initech")),
    _event("02", 1, 10, "people", "planner", "fact.asserted",
           fact("Zoë Lind", "lives_in", "Oslo", "Zoë Lind lives in Oslo")),
    _event("03", 1, 11, "people", "planner", "fact.asserted",
           fact("Carl Hooper", "works_at", "Hooli", "Carl Hooper works at Hooli")),
    _event("04", 3, 9, "people", "planner", "fact.asserted",
           fact("Bob Ferreira", "works_at", "Globex",
                "Bob Ferreira left Initech for a new job at Globex")),
    _event("05", 4, 9, "people", "planner", "fact.asserted",
           fact("Zoë Lind", "lives_in", "Bergen", "Zoë Lind moved from Oslo to Bergen")),
    _event("06", 2, 8, "ops", "coder", "observation",
           {"text": "The lock timeout happened because the nightly batch job held a lock "
                    "on orders."}),
    _event("07", 2, 9, "ops.migrate", "coder", "task.started",
           {"task_id": "t-mig", "goal": "migrate the orders database to v2"}),
    _event("08", 2, 10, "ops.migrate", "coder", "task.outcome",
           {"task_id": "t-mig", "status": "failure",
            "text": "orders database migration hit a lock timeout"}),
    _event("09", 3, 10, "ops.migrate", "coder", "task.started",
           {"task_id": "t-mig-2", "goal": "retry the orders database migration"},
           retry_of="t-mig"),
    _event("10", 3, 11, "ops.migrate", "coder", "task.outcome",
           {"task_id": "t-mig-2", "status": "success", "text": "done"}),
    _event("11", 4, 10, "ops.keys", "coder", "task.started",
           {"task_id": "t-keys", "goal": "rotate the signing keys"}),
    _event("12", 5, 9, "ops.backfill", "coder", "task.outcome",
           {"task_id": "t-bf", "status": "failure", "text": "invoices backfill ran out of disk"}),
    # The retry shares no task id and names none: its start was caused by the failure.
    _event("13", 5, 10, "ops.backfill", "coder", "task.started",
           {"task_id": "t-bf-b", "goal": "backfill the invoices table again"})
    | {"caused_by": ["ch-12"]},
    _event("14", 5, 11, "ops.backfill", "coder", "task.outcome",
           {"task_id": "t-bf-b", "status": "success", "text": "finished"}),
]  # fmt: skip


@pytest.fixture(scope="module")
def admin(stack: RunningStack) -> str:
    args = ["keys", "create", "--tenant", TENANT, "--json", "--can", "admin"]
    return str(orjson.loads(memstream(*args, data_dir=stack.data_dir).stdout)["key"])


@pytest.fixture(scope="module")
def world(stack: RunningStack, admin: str) -> str:
    """The world written and applied; its position (a read given it waits for it)."""
    with MemoryHttpClient(stack.api_url, admin, timeout=120) as client:
        _ids, position = client.emit_written(EVENTS)
        client.recall("anything", after=position)
    return position


def top(packet: dict[str, Any]) -> dict[str, Any]:
    assert packet["answer_candidates"], packet
    return dict(packet["answer_candidates"][0])


@pytest.mark.parametrize("query", ["Who changed jobs?", "who switched jobs?"])
def test_who_changed_names_the_subject_citing_both_ends(
    stack: RunningStack, admin: str, world: str, query: str
) -> None:
    with MemoryHttpClient(stack.api_url, admin, timeout=120) as client:
        packet = client.checkout(query, after=world)
    assert packet["answerability"] == "answer_from_memory", packet
    answer = top(packet)
    assert answer["value"] == ["Bob Ferreira"], answer
    assert set(answer["support_ids"]) == {"ch-01#0", "ch-04#0"}
    assert "Initech" in answer["answer"] and "Globex" in answer["answer"]


@pytest.mark.parametrize(
    ("query", "ends"),
    [
        ("Did Bob Ferreira change jobs?", ["ch-04#0", "ch-01#0"]),
        ("did bob ferreira switch jobs", ["ch-04#0", "ch-01#0"]),
        ("Did Zoë Lind move?", ["ch-05#0", "ch-02#0"]),
        ("has zoe lind moved", ["ch-05#0", "ch-02#0"]),
    ],
)
def test_did_x_change_is_yes_with_the_new_then_the_old_fact(
    stack: RunningStack, admin: str, world: str, query: str, ends: list[str]
) -> None:
    with MemoryHttpClient(stack.api_url, admin, timeout=120) as client:
        packet = client.checkout(query, after=world)
    assert packet["answerability"] == "answer_from_memory", packet
    answer = top(packet)
    assert answer["value"] is True and answer["support_ids"] == ends, answer


def test_what_memory_does_not_hold_asks_the_user(
    stack: RunningStack, admin: str, world: str
) -> None:
    with MemoryHttpClient(stack.api_url, admin, timeout=120) as client:
        for query, kw in [
            ("Did Carl Hooper change jobs?", {}),
            ("Did Bob Ferreira change jobs?", {"as_of": "2026-05-02T12:00:00Z"}),
            ("Who changed jobs?", {"scope": {"user": "someone-else"}}),
            ("Did the signing key rotation succeed?", {}),
        ]:
            packet = client.checkout(query, after=world, **kw)
            assert packet["answerability"] in ("ask_user", "no_memory"), (query, kw, packet)
            assert not any(a["support_ids"] for a in packet["answer_candidates"]), packet


def test_an_outcome_is_the_retry_that_worked_citing_the_failure_and_its_cause(
    stack: RunningStack, admin: str, world: str
) -> None:
    with MemoryHttpClient(stack.api_url, admin, timeout=120) as client:
        worked = client.checkout("Did the orders database migration succeed?", after=world)
        failed = client.checkout("What failed and why?", after=world)
    assert worked["answerability"] == "answer_from_memory", worked
    answer = top(worked)
    assert answer["value"] is True and answer["support_ids"] == ["ch-10", "ch-08"], answer
    assert "lock timeout" in answer["answer"]
    listed = top(failed)
    assert failed["answerability"] == "answer_from_memory", failed
    ids = listed["support_ids"]
    for failure, retry in [("ch-08", "ch-10"), ("ch-12", "ch-14")]:  # each before what worked
        assert ids[ids.index(failure) + 1] == retry, listed
    assert "lock timeout" in listed["answer"] and "t-mig-2 succeeded" in listed["answer"]
    assert "out of disk" in listed["answer"] and "t-bf-b succeeded" in listed["answer"]


def test_a_retry_caused_by_the_failure_is_one_history_with_it(
    stack: RunningStack, admin: str, world: str
) -> None:
    with MemoryHttpClient(stack.api_url, admin, timeout=120) as client:
        packet = client.checkout("did the invoices backfill work?", after=world)
    assert packet["answerability"] == "answer_from_memory", packet
    answer = top(packet)
    assert answer["value"] is True and answer["support_ids"] == ["ch-14", "ch-12"], answer
    assert "out of disk" in answer["answer"]


def test_mcp_answers_change_and_outcome_as_http_does(
    stack: RunningStack, admin: str, world: str
) -> None:
    for query, ids in [
        ("Who changed jobs?", {"ch-01#0", "ch-04#0"}),
        ("did the orders database migration work?", {"ch-10", "ch-08"}),
    ]:
        args = {"query": query, "format": "json", "after": world}
        result = asyncio.run(call_tool(stack.api_url, admin, "checkout", args))
        assert not result.is_error, text_of(result)
        packet = orjson.loads(text_of(result))
        assert packet["answerability"] == "answer_from_memory", packet
        assert set(top(packet)["support_ids"]) == ids, packet
