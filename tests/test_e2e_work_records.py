"""Records of work answer questions about the work, never a how-to question, through the
running stack.

A how-to question has two answers in memory; the misleading one is the closer match. Each of
six tasks starts with a goal that repeats the question's words, checks out, and reports how
it went: three that followed the misleading memory failed, three that followed the other
succeeded. The next checkout answers the how-to question from the memory that succeeded,
flags the one that failed, and holds no task record among its candidates; a question about
the tasks is answered from the task records.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from memstream.client import MemoryHttpClient
from settling import settled, tenant_ledger
from stackproc import RunningStack, memstream, wait_until

TENANT = "atelier-ceramique"
QUESTION = "How do I reset the kiln controller after error E-17?"
GOAL = "reset the kiln controller after error E-17 before the glaze firing"
CLOSE, RIGHT = "kiln-hold-stop", "kiln-breaker"
MEMORIES = [
    {"id": RIGHT, "stream": "atelier", "type": "message.user", "agent": "Maëlle Okonkwo",
     "occurred_at": "2026-04-01T08:00:00Z",
     "payload": {"text": "The controller only clears E-17 once its breaker has been off "
                         "for thirty seconds."}},
    {"id": CLOSE, "stream": "atelier", "type": "observation", "agent": "ops-bot",
     "occurred_at": "2026-04-08T08:00:00Z",
     "payload": {"text": "To reset the kiln controller after error E-17, hold STOP for "
                         "five seconds."}},
]  # fmt: skip
FAILED = [f"kiln-fail-{i}" for i in range(3)]
SUCCEEDED = [f"kiln-ok-{i}" for i in range(3)]
TASK_RECORDS = {f"{t}-{end}" for t in FAILED + SUCCEEDED for end in ("start", "outcome")}
WORK_TYPES = {"task.started", "task.outcome", "memory.feedback", "memory.invalidate"}


def ledger(stack: RunningStack) -> list[dict[str, Any]]:
    return tenant_ledger(stack, TENANT)


def first(packet: dict[str, Any]) -> list[str]:
    answers = packet["answer_candidates"]
    return [i.split("#", 1)[0] for i in answers[0]["support_ids"]] if answers else []


def cited(packet: dict[str, Any]) -> set[str]:
    """Every event id the packet offers: answer support, evidence, facts, snippets."""
    ids = {i for a in packet["answer_candidates"] for i in a["support_ids"]}
    ids |= {r["support_id"] for r in packet["evidence"]}
    ids |= {f["fact_id"] for f in packet["facts"]} | {s["item_id"] for s in packet["snippets"]}
    return {i.split("#", 1)[0] for i in ids}


def run_task(client: MemoryHttpClient, task: str, status: str, used: str) -> None:
    """Start a task whose goal repeats the question, check out for it, report the outcome."""
    client.emit([{"id": f"{task}-start", "stream": "kiln-jobs", "type": "task.started",
                  "payload": {"task_id": task, "goal": GOAL}}])  # fmt: skip
    packet = client.checkout(QUESTION, task_id=task)
    client.emit(
        [{"id": f"{task}-outcome", "stream": "kiln-jobs", "type": "task.outcome",
          "payload": {"task_id": task, "status": status, "checkout_ids": [packet["packet_id"]],
                      "used_ids": [used]}}]
    )  # fmt: skip


@pytest.fixture(scope="module")
def client(stack: RunningStack) -> Iterator[MemoryHttpClient]:
    key = memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir).stdout.strip()
    with MemoryHttpClient(stack.api_url, key) as c:
        c.emit(MEMORIES)
        wait_until(lambda: len(ledger(stack)) == len(MEMORIES) and settled(stack), 90, "memories")
        yield c


@pytest.fixture(scope="module")
def learned(stack: RunningStack, client: MemoryHttpClient) -> dict[str, Any]:
    for task in FAILED:
        run_task(client, task, "failure", CLOSE)
    for task in SUCCEEDED:
        run_task(client, task, "success", RIGHT)

    def feedback() -> int:
        return sum(1 for e in ledger(stack) if e["type"] == "memory.feedback")

    wait_until(lambda: feedback() >= 6, 120, "the retrospective's feedback")
    wait_until(lambda: settled(stack), 90, "feedback projected")
    return client.checkout(QUESTION)


def test_the_proven_memory_is_the_first_answer(learned: dict[str, Any]) -> None:
    assert first(learned) == [RIGHT], learned["answer_candidates"]
    assert "breaker" in learned["answer_candidates"][0]["answer"]
    assert learned["answerability"] == "answer_from_memory", learned["warnings"]


def test_the_failed_memory_is_flagged(learned: dict[str, Any]) -> None:
    flags = [
        e for e in learned["answer_candidates"][0]["excluded_ids"]
        if e["reason"] == "failure_record"
    ]  # fmt: skip
    assert [e["item_id"].split("#", 1)[0] for e in flags] == [CLOSE], flags
    assert all(t in flags[0]["detail"] for t in FAILED)
    [warning] = [w for w in learned["warnings"] if w["kind"] == "failure_record"]
    assert warning["ids"] == [CLOSE]


def test_no_record_of_work_is_among_a_how_to_questions_candidates(
    learned: dict[str, Any],
) -> None:
    assert not cited(learned) & TASK_RECORDS, cited(learned)
    assert not {s["type"] for s in learned["snippets"]} & WORK_TYPES
    assert learned["synthesis_plan"]["about_work"] is False


@pytest.mark.parametrize(
    "question",
    ["Did the kiln controller reset tasks succeed?", "which kiln jobs failed?"],
)
def test_a_question_about_the_tasks_is_answered_from_their_records(
    client: MemoryHttpClient, learned: dict[str, Any], question: str
) -> None:
    packet = client.checkout(question)
    assert packet["synthesis_plan"]["about_work"] is True
    assert first(packet) and set(first(packet)) <= TASK_RECORDS, packet["answer_candidates"]
    assert {s["type"] for s in packet["snippets"]} & {"task.outcome", "task.started"}
