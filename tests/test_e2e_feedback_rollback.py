"""Feedback priors through the running stack, and rollback by replaying without feedback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from memstream.client import MemoryHttpClient
from stackproc import RunningStack, memstream, owned_stack, wait_until


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """This module owns its stack: it replays a version without feedback and promotes it for
    every tenant."""
    yield from owned_stack(tmp_path_factory, "rollback")


TENANT = "rollback"
QUESTION = "where does the build cache of zoë's runner live?"
OLDER = {
    "id": "cache-older",
    "stream": "ops-notes",
    "type": "observation",
    "agent": "Jörg",
    "occurred_at": "2026-02-02T09:00:00Z",
    "payload": {"text": "The build cache of Zoë's runner lives in bucket alpha-7."},
}
NEWER = {
    "id": "cache-newer",
    "stream": "ops-notes",
    "type": "observation",
    "agent": "deploy-agent",
    "occurred_at": "2026-02-03T09:00:00Z",
    "payload": {"text": "The build cache of Zoë's runner lives in bucket kilo-3."},
}


def top(packet: dict[str, Any]) -> str | None:
    answers = packet["answer_candidates"]
    return answers[0]["support_ids"][0] if answers and answers[0]["support_ids"] else None


def feedback(target: str, signal: float) -> dict[str, Any]:
    return {
        "stream": "reviews",
        "type": "memory.feedback",
        "agent": "reviewer",
        "payload": {"target_ids": [target], "signal": signal, "reason": "checked by hand"},
    }


def live(stack: RunningStack) -> str:
    res = memstream("projections", "list", "--json", data_dir=stack.data_dir)
    (name,) = [v["name"] for v in json.loads(res.stdout)["versions"] if v["live"]]
    return str(name)


def test_feedback_turns_the_answer_and_a_replay_without_it_restores_the_original(
    stack: RunningStack,
) -> None:
    key = memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir).stdout.strip()
    client = MemoryHttpClient(stack.api_url, key)
    client.emit([OLDER, NEWER])
    wait_until(lambda: top(client.checkout(QUESTION)) == "cache-newer", 60, "the newer answer")

    ids = client.emit([feedback("cache-newer", -1.0)] * 3 + [feedback("cache-older", 1.0)] * 3)
    wait_until(lambda: top(client.checkout(QUESTION)) == "cache-older", 60, "feedback applied")
    packet = client.checkout(QUESTION)
    notes = {n["item_id"]: n for n in packet["meta"]["feedback"]}
    assert notes["cache-newer"]["effect"] == "lowered" and notes["cache-newer"]["prior"] < -0.5
    assert notes["cache-older"]["effect"] == "raised"
    assert set(notes["cache-newer"]["feedback_ids"]) == set(ids[:3])
    # feedback events are not memories: no lane returns them
    assert not set(ids) & {s["item_id"] for s in packet["snippets"]}
    assert client.lineage("cache-newer")["leaves"][0]["event_id"] == "cache-newer"

    original = live(stack)
    res = memstream(
        "replay", "--version", "nofb", "--no-feedback", "--json", data_dir=stack.data_dir
    )
    assert json.loads(res.stdout)["name"] == "nofb"
    memstream("projections", "promote", "nofb", data_dir=stack.data_dir)
    try:
        again = client.checkout(QUESTION)
        assert top(again) == "cache-newer" and again["meta"]["feedback"] == []
        assert again["meta"]["version"] == "nofb"
    finally:
        memstream("projections", "promote", original, data_dir=stack.data_dir)
    assert top(client.checkout(QUESTION)) == "cache-older"
    client.close()
