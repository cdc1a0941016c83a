"""The first answer follows what memory learned, through the running stack.

Two memories answer the same how-to question; the misleading one repeats the question's words
(the closer lexical match, first on its own) and is the newer. Three tasks that followed it
fail, three that followed the other succeed. The next checkout's first answer is the other
memory; the misleading one is flagged with its record, keeps a cut confidence, and still
resolves by lineage; the ledger holds the feedback the outcomes caused.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from memstream.client import MemoryHttpClient
from settling import settled, tenant_ledger
from stackproc import RunningStack, memstream, wait_until

TENANT = "releve-ops"
QUESTION = "How do I restart the nightly payment worker on the staging cluster?"
CLOSE, RIGHT = "restart-by-reboot", "restart-by-rollout"
MEMORIES = [
    {"id": RIGHT, "stream": "runbooks", "type": "observation", "agent": "zoë",
     "occurred_at": "2026-03-02T09:00:00Z",
     "payload": {"text": "The payment worker restarts cleanly with kubectl rollout "
                         "of deploy/payments."}},
    {"id": CLOSE, "stream": "runbooks", "type": "observation", "agent": "ops-bot",
     "occurred_at": "2026-03-09T09:00:00Z",
     "payload": {"text": "To restart the nightly payment worker on the staging cluster, "
                         "reboot the cluster host."}},
]  # fmt: skip
FAILED = [f"payments-fail-{i}" for i in range(3)]
SUCCEEDED = [f"payments-ok-{i}" for i in range(3)]


def ledger(stack: RunningStack) -> list[dict[str, Any]]:
    return tenant_ledger(stack, TENANT)


def feedback(stack: RunningStack) -> list[dict[str, Any]]:
    return [e for e in ledger(stack) if e["type"] == "memory.feedback"]


def first(packet: dict[str, Any]) -> list[str]:
    answers = packet["answer_candidates"]
    return [i.split("#", 1)[0] for i in answers[0]["support_ids"]] if answers else []


def run_task(client: MemoryHttpClient, task: str, status: str, used: str) -> str:
    """Check out for a task, follow ``used``, report how it went; returns the outcome id."""
    packet = client.checkout(QUESTION, task_id=task)
    [outcome] = client.emit(
        [{"id": f"{task}-outcome", "stream": "errands", "type": "task.outcome",
          "payload": {"task_id": task, "status": status, "checkout_ids": [packet["packet_id"]],
                      "used_ids": [used]}}]
    )  # fmt: skip
    return outcome


@pytest.fixture(scope="module")
def client(stack: RunningStack) -> Iterator[MemoryHttpClient]:
    key = memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir).stdout.strip()
    with MemoryHttpClient(stack.api_url, key) as c:
        c.emit(MEMORIES)
        wait_until(lambda: len(ledger(stack)) == len(MEMORIES) and settled(stack), 90, "memories")
        yield c


@pytest.fixture(scope="module")
def learned(stack: RunningStack, client: MemoryHttpClient) -> dict[str, Any]:
    before = client.checkout(QUESTION)
    outcomes = [run_task(client, t, "failure", CLOSE) for t in FAILED]
    outcomes += [run_task(client, t, "success", RIGHT) for t in SUCCEEDED]
    wait_until(lambda: len(feedback(stack)) >= 6, 120, "the retrospective's feedback")
    wait_until(lambda: settled(stack), 90, "feedback projected")
    return {"before": before, "after": client.checkout(QUESTION), "outcomes": outcomes}


def test_the_closer_match_answers_first_before_any_outcome(learned: dict[str, Any]) -> None:
    before = learned["before"]
    assert first(before) == [CLOSE], before["answer_candidates"]
    assert before["answer_candidates"][0]["confidence"] == 1.0


def test_after_the_outcomes_the_memory_that_succeeded_answers_first(
    learned: dict[str, Any],
) -> None:
    after = learned["after"]
    assert first(after) == [RIGHT], after["answer_candidates"]
    assert "kubectl rollout" in after["answer_candidates"][0]["answer"]
    assert after["answerability"] == "answer_from_memory", after["warnings"]
    moved = {a["item_id"]: a for a in after["meta"]["feedback"]}
    assert moved[CLOSE]["effect"] == "lowered" and sorted(moved[CLOSE]["failed_tasks"]) == FAILED


def test_the_failed_memory_is_flagged_with_its_record_and_kept(
    client: MemoryHttpClient, learned: dict[str, Any]
) -> None:
    after = learned["after"]
    flags = [
        e for e in after["answer_candidates"][0]["excluded_ids"] if e["reason"] == "failure_record"
    ]
    assert [e["item_id"].split("#", 1)[0] for e in flags] == [CLOSE], flags
    assert all(t in flags[0]["detail"] for t in FAILED) and RIGHT in flags[0]["detail"]
    # an answer resting on it may follow, never at full confidence
    rest = [a for a in after["answer_candidates"] if CLOSE in first({"answer_candidates": [a]})]
    assert all(a["confidence"] <= 0.5 for a in rest)
    [warning] = [w for w in after["warnings"] if w["kind"] == "failure_record"]
    assert warning["ids"] == [CLOSE] and all(t in warning["message"] for t in FAILED)
    lineage = client.lineage(CLOSE)
    assert lineage["kind"] == "event" and lineage["events"][0]["text"].endswith("cluster host.")


def test_the_ledger_holds_the_feedback_the_outcomes_caused(
    stack: RunningStack, learned: dict[str, Any]
) -> None:
    by_outcome = {e["caused_by"][0]: e["payload"] for e in feedback(stack)}
    assert set(learned["outcomes"]) <= set(by_outcome)
    for task in FAILED:
        fb = by_outcome[f"{task}-outcome"]
        assert (fb["target_ids"], fb["outcome"], fb["signal"] < 0) == ([CLOSE], "failure", True)
    for task in SUCCEEDED:
        fb = by_outcome[f"{task}-outcome"]
        assert (fb["target_ids"], fb["outcome"], fb["signal"] > 0) == ([RIGHT], "success", True)
