"""The learned ranker through the running stack: a recall explains the fused top as a ranker
reads it (inside the caller's scope), and the ``learned`` preset orders a checkout with the
shipped model. Uses the session's shared stack (the tenant is this module's)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from memstream.checkout.retrieve.features import FEATURES
from memstream.checkout.synthesis.answerable import ANSWER_FEATURES, THRESHOLD, shipped
from memstream.client import MemoryHttpClient
from stackproc import RunningStack, memstream

TENANT = "orbit-ranker"


def _said(n: int, user: str, agent: str, text: str) -> dict[str, Any]:
    return {
        "id": f"rk-{n:02d}",
        "stream": f"chat-{user[0]}",  # one stream per user (a stream name is ASCII)
        "agent": agent,
        "user": user,
        "type": "message.user",
        "occurred_at": f"2026-06-{n + 1:02d}T10:00:00Z",
        "payload": {"text": text},
    }


EVENTS = [
    _said(1, "maría", "María José", "I started learning the cello in March."),
    _said(2, "maría", "María José", "The cello teacher lives in Ålesund."),
    _said(3, "maría", "Tom", "Haha, that is great news!"),
    _said(4, "tomás", "Tomás", "I play the bassoon in the Friday orchestra."),
    _said(5, "tomás", "Tomás", "My bassoon reed cracked twice this month."),
    _said(6, "tomás", "Inês", "Weather is awful here, rain all week."),
]


def _key(stack: RunningStack, *extra: str) -> str:
    args = ["keys", "create", "--tenant", TENANT, "--json", *extra]
    return str(orjson.loads(memstream(*args, data_dir=stack.data_dir).stdout)["key"])


@pytest.fixture(scope="module")
def world(stack: RunningStack) -> str:
    """The events written and applied; an admin key."""
    admin = _key(stack, "--can", "admin")
    with MemoryHttpClient(stack.api_url, admin, timeout=120) as client:
        _ids, position = client.emit_written(EVENTS)
        client.recall("anything", after=position)
    return admin


def test_a_recall_explains_the_fused_top_with_every_feature(
    stack: RunningStack, world: str
) -> None:
    with MemoryHttpClient(stack.api_url, world, timeout=120) as client:
        items, ranked = client.ranked("which instrument is maría josé learning?", k=3)
    assert 1 <= len(items) <= 3 and ranked
    assert {i["item_id"] for i in items} <= {r["item_id"] for r in ranked}
    for r in ranked:
        assert list(r["features"]) == list(FEATURES)
        assert all(isinstance(v, float) for v in r["features"].values())
    assert [r["features"]["fused_rank"] for r in ranked] == [float(i) for i in range(len(ranked))]
    # likeness read from the embedder's vectors through the stack (never the unknown -1)
    sims = [r["features"]["similarity"] for r in ranked]
    assert all(-1.0 <= s <= 1.0 for s in sims) and max(sims) > 0.0
    assert min(r["features"]["similarity_gap"] for r in ranked) == 0.0
    if len(ranked) > 1:
        assert all(r["features"]["near_top"] > -1.0 for r in ranked)


def test_an_explained_recall_stays_inside_the_callers_scope(
    stack: RunningStack, world: str
) -> None:
    scoped = _key(stack, "--can", "read", "--scope", "user=tomás")
    with MemoryHttpClient(stack.api_url, scoped, timeout=120) as client:
        items, ranked = client.ranked("which instrument does anyone play or learn?", k=10)
    theirs = {e["id"] for e in EVENTS if e["user"] == "tomás"}
    assert ranked and {r["item_id"] for r in ranked} <= theirs
    assert {i["item_id"] for i in items} <= theirs


def test_the_learned_preset_answers_and_says_so(stack: RunningStack, world: str) -> None:
    with MemoryHttpClient(stack.api_url, world, timeout=120) as client:
        packet = client.checkout("Which instrument is María José learning?", preset="learned")
        served = client.checkout("Which instrument is María José learning?")
    assert packet["meta"]["learned"] is True and packet["meta"]["rerank"] is True
    assert served["meta"]["learned"] is False
    assert packet["answerability"] == "answer_from_memory", packet
    assert "rk-01" in packet["answer_candidates"][0]["support_ids"]


def test_the_learned_preset_reads_answerability_from_the_shipped_probability(
    stack: RunningStack, world: str
) -> None:
    with MemoryHttpClient(stack.api_url, world, timeout=120) as client:
        told = client.checkout("what instrument is maria jose learning", preset="learned",
                               explain=True)  # fmt: skip
        unknown = client.checkout("Which film does Tomás like best?", preset="learned")
        served = client.checkout("Which film does Tomás like best?")
    judged = told["meta"]["answerable"]
    assert told["meta"]["calibrated"] is True and served["meta"]["calibrated"] is False
    assert judged["model"] == shipped().model_id and judged["threshold"] == THRESHOLD
    assert list(judged["features"]) == list(ANSWER_FEATURES)
    assert judged["probability"] >= THRESHOLD and told["answerability"] == "answer_from_memory"
    assert told["answer_candidates"][0]["confidence"] == pytest.approx(
        judged["probability"], abs=1e-3
    )
    assert unknown["answerability"] in ("ask_user", "no_memory"), unknown
    assert unknown["meta"]["answerable"]["probability"] < THRESHOLD
    assert "features" not in unknown["meta"]["answerable"]  # only when explained
    assert "answerable" not in served["meta"]


def test_explain_and_preset_are_checked_like_every_field(stack: RunningStack, world: str) -> None:
    headers = {"authorization": f"Bearer {world}"}
    for body in (
        {"query": "cello", "explain": "yes"},
        {"query": "cello", "preset": "learnt"},
        {"query": "cello", "explain": 1},
    ):
        got = httpx.post(f"{stack.api_url}/v1/recall", json=body, headers=headers, timeout=60)
        assert got.status_code == 422, (body, got.text)
    for body in (
        {"query": "cello", "explain": "\x00"},
        {"query": "cello", "calibrated": "on"},
        {"query": "cello", "calibrated": 0},
    ):
        got = httpx.post(f"{stack.api_url}/v1/checkout", json=body, headers=headers, timeout=60)
        assert got.status_code == 422, (body, got.text)
        assert next(iter(set(body) - {"query"})) in got.text
