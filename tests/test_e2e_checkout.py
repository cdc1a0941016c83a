"""Checkout through the running stack: updates, sums, tenant isolation, lineage, budgets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memstream.client import MemoryHttpClient
from memstream.kafka.reading import read_to_end
from memstream.kafka.topics import CHECKOUTS
from memstream.projection.status import caught_up
from memstream.shred.sqlite import SqliteDataKeys
from memstream.shred.traces import TraceOpener
from stackproc import RunningStack, memstream, wait_until


def key_for(s: RunningStack, tenant: str) -> str:
    return memstream("keys", "create", "--tenant", tenant, data_dir=s.data_dir).stdout.strip()


def projected(s: RunningStack, n: int) -> bool:
    res = memstream("projections", "list", "--json", data_dir=s.data_dir, check=False)
    if res.returncode != 0:
        return False
    (v,) = [v for v in json.loads(res.stdout)["versions"] if v["live"]]
    return caught_up(v, n)


def emitted(s: RunningStack) -> int:
    res = memstream("ledger", "stats", "--json", data_dir=s.data_dir)
    return sum(t["events"] for t in json.loads(res.stdout)["tenants"].values())


def post_and_wait(s: RunningStack, client: MemoryHttpClient, events: list[dict[str, Any]]) -> None:
    before = emitted(s)
    client.emit(events)
    wait_until(lambda: emitted(s) >= before + len(events), 60, "ledger")
    wait_until(lambda: projected(s, before + len(events)), 60, "projections")


def cited(packet: dict[str, Any]) -> set[str]:
    ids = {i for a in packet["answer_candidates"] for i in a["support_ids"]}
    ids |= {f["fact_id"] for f in packet["facts"]}
    ids |= {r["support_id"] for r in packet["evidence"]}
    ids |= {sn["item_id"] for sn in packet["snippets"]}
    return ids


def refs(packet: dict[str, Any]) -> list[dict[str, Any]]:
    out = [f["ref"] for f in packet["facts"]] + [r["ref"] for r in packet["evidence"]]
    return out + [sn["ref"] for sn in packet["snippets"]]


@pytest.fixture(scope="module")
def alice(stack: RunningStack) -> Iterator[MemoryHttpClient]:
    with MemoryHttpClient(stack.api_url, key_for(stack, "alice")) as c:
        yield c


def test_knowledge_update_answers_newest_and_as_of_answers_older(
    stack: RunningStack, alice: MemoryHttpClient
) -> None:
    post_and_wait(
        stack,
        alice,
        [
            {
                "id": "home-1",
                "stream": "profile",
                "type": "fact.asserted",
                "occurred_at": "2024-01-02T09:00:00Z",
                "payload": {
                    "subject": "Marta",
                    "predicate": "lives_in",
                    "object": "Lisbon",
                    "valid_from": "2024-01-01T00:00:00Z",
                },
            },
            {
                "id": "home-2",
                "stream": "profile",
                "type": "fact.asserted",
                "occurred_at": "2024-06-02T09:00:00Z",
                "payload": {
                    "subject": "Marta",
                    "predicate": "lives_in",
                    "object": "Porto",
                    "valid_from": "2024-06-01T00:00:00Z",
                },
            },
        ],
    )
    now = alice.checkout("Where does Marta live now?")
    assert now["answerability"] == "answer_from_memory", now
    top = now["answer_candidates"][0]
    assert "Porto" in top["answer"] and "home-2#0" in top["support_ids"]
    excluded = {e["item_id"]: e["reason"] for e in top["excluded_ids"]}
    warned = any(w["kind"] == "superseded" for w in now["warnings"])
    assert excluded.get("home-1#0") == "superseded" or warned
    then = alice.checkout("Where does Marta live?", as_of="2024-03-01T00:00:00Z")
    assert "Lisbon" in then["answer_candidates"][0]["answer"], then
    assert "home-1#0" in then["answer_candidates"][0]["support_ids"]


def _fact(eid: str, at: str, subject: str, predicate: str, **payload: Any) -> dict[str, Any]:
    body = {"subject": subject, "predicate": predicate, **payload}
    return {"id": eid, "stream": "life", "type": "fact.asserted", "agent": "profile-bot",
            "occurred_at": at, "payload": body}  # fmt: skip


def _pref(eid: str, at: str, subject: str, key: str, value: str) -> dict[str, Any]:
    body = {"subject": subject, "key": key, "value": value}
    return {"id": eid, "stream": "life", "type": "preference.set", "agent": "profile-bot",
            "occurred_at": at, "payload": body}  # fmt: skip


def _said(eid: str, at: str, text: str) -> dict[str, Any]:
    return {"id": eid, "stream": "life", "type": "message.user", "agent": "sam",
            "occurred_at": at, "payload": {"text": text}}  # fmt: skip


# Facts about the user, a lower-case multi-word subject and an accented name; each changes
# once. Everything with an id ending in "-new" happened after AS_OF.
WHO = [
    _said("who-msg-old", "2023-04-30T18:00:00Z", "Unpacking boxes in our flat in Ghent."),
    _fact("who-home-old", "2023-05-01T09:00:00Z", "the user", "lives_in", object="Ghent"),
    _fact("who-run-old", "2023-05-02T09:00:00Z", "billing pipeline", "runs_in", value="eu-central"),
    _pref("who-tea-old", "2023-05-03T09:00:00Z", "Inès Moreau", "tea", "oolong"),
    _said("who-msg-new", "2024-08-10T18:00:00Z", "We relocated to Utrecht last week."),
    _fact("who-home-new", "2024-08-11T09:00:00Z", "user", "lives_in", object="Utrecht"),
    _fact("who-run-new", "2024-08-12T09:00:00Z", "billing pipeline", "runs_in", value="us-east"),
    _pref("who-tea-new", "2024-08-13T09:00:00Z", "Inès Moreau", "tea", "rooibos"),
]
AS_OF = "2024-01-15T00:00:00Z"


@pytest.fixture(scope="module")
def kim(stack: RunningStack) -> Iterator[MemoryHttpClient]:
    with MemoryHttpClient(stack.api_url, key_for(stack, "kim")) as c:
        post_and_wait(stack, c, WHO)
        yield c


@pytest.mark.parametrize(
    ("query", "current", "old"),
    [
        ("Where does the user live now?", "Utrecht", "who-home-old#0"),
        ("where do I live?", "Utrecht", "who-home-old#0"),
        ("which region does the billing pipeline run in", "us-east", "who-run-old#0"),
        ("What tea does ines prefer these days?", "rooibos", "who-tea-old#0"),
    ],
)
def test_current_value_of_whoever_the_question_names(
    kim: MemoryHttpClient, query: str, current: str, old: str
) -> None:
    packet = kim.checkout(query)
    assert packet["answerability"] == "answer_from_memory", packet
    top = packet["answer_candidates"][0]
    assert current in top["answer"], (query, top)
    assert top["support_ids"][0] == old.replace("old", "new"), top
    assert (old, "superseded") in {(e["item_id"], e["reason"]) for e in top["excluded_ids"]}
    assert old not in {f["fact_id"] for f in packet["facts"]}


LEVERS = {
    "time_lane": "time_lane", "second_hop": "second_hop", "rerank": "rerank",
    "top_votes": "top_votes", "text_rows": "text_rows", "expand": "expand",
    "coverage": "coverage",
}  # fmt: skip


def test_each_retrieval_lever_switches_per_request_and_the_answer_holds(
    stack: RunningStack, kim: MemoryHttpClient
) -> None:
    served = kim.checkout("Where does the user live now?")["meta"]
    assert {m: served[m] for m in LEVERS.values()} == {
        "time_lane": False, "second_hop": False, "rerank": True, "top_votes": True,
        "text_rows": False, "expand": False, "coverage": False,
    }  # fmt: skip
    for flag, meta in LEVERS.items():
        flipped = kim.checkout("where do I live?", **{flag: not served[meta]})
        assert flipped["meta"][meta] is not served[meta]
        assert "Utrecht" in flipped["answer_candidates"][0]["answer"], (flag, flipped)
    headers = {"Authorization": f"Bearer {key_for(stack, 'kim')}"}
    for flag in ("rerank", "top_votes", "text_rows", "expand", "coverage"):
        for bad in ("yes", 1, "\x00"):
            resp = httpx.post(
                f"{stack.api_url}/v1/checkout", json={"query": "x", flag: bad}, headers=headers
            )
            assert resp.status_code == 422 and flag in resp.text, resp.text


def test_a_preset_and_levers_named_at_run_time_reach_the_packet(kim: MemoryHttpClient) -> None:
    plain = kim.checkout("where do I live?", preset="plain")["meta"]
    assert not any(plain[m] for m in LEVERS.values()), plain
    # a lever by its request name over the preset, as a bench that picks it at run time
    picked = kim.checkout("where do I live?", preset="plain", levers={"episode_lane": True})
    assert picked["meta"]["episode_lane"] is True and picked["meta"]["rerank"] is False
    assert "Utrecht" in picked["answer_candidates"][0]["answer"], picked


def test_the_message_stating_a_fact_corroborates_it(kim: MemoryHttpClient) -> None:
    top = kim.checkout("Where does the user live now?")["answer_candidates"][0]
    assert "who-msg-new" in top["support_ids"], top


@pytest.mark.parametrize(
    ("query", "then"),
    [
        ("Where does the user live?", "Ghent"),
        ("Which region does the Billing Pipeline run in?", "eu-central"),
        ("what tea does Ines Moreau prefer", "oolong"),
    ],
)
def test_as_of_answers_what_was_true_then_and_quotes_nothing_later(
    kim: MemoryHttpClient, query: str, then: str
) -> None:
    packet = kim.checkout(query, as_of=AS_OF)
    top = packet["answer_candidates"][0]
    assert then in top["answer"], (query, packet)
    body = json.dumps(packet)
    for later in ("-new", "Utrecht", "us-east", "rooibos", "relocated"):
        assert later not in body, (later, query)
    for ref in refs(packet):
        assert ref["event_id"].endswith("-old"), ref
    for item in kim.recall(query, k=20, as_of=AS_OF):
        assert item["occurred_at"] <= AS_OF, item


def test_sum_counts_each_item_once_and_excludes_the_repeat(
    stack: RunningStack, alice: MemoryHttpClient
) -> None:
    texts = [
        ("buy-1", "I bought a desk lamp for $40 today."),
        ("buy-2", "The new rug cost $120."),
        ("buy-3", "Reminder to self: the desk lamp was $40."),
        ("buy-4", "Picked up a coffee table for $200."),
    ]
    post_and_wait(
        stack,
        alice,
        [
            {"id": i, "stream": "shopping", "type": "message.user", "payload": {"text": t}}
            for i, t in texts
        ],
    )
    packet = alice.checkout("How much did I spend in total on the desk lamp, rug and coffee table?")
    top = packet["answer_candidates"][0]
    assert top["value"] == pytest.approx(360.0), packet
    assert {"buy-1", "buy-2", "buy-4"} <= set(top["support_ids"]) or {
        "buy-3",
        "buy-2",
        "buy-4",
    } <= set(top["support_ids"])
    dup = [e for e in top["excluded_ids"] if e["reason"] == "duplicate"]
    assert [e["item_id"] for e in dup] in (["buy-3"], ["buy-1"])


def test_every_cited_id_resolves_through_lineage(
    stack: RunningStack, alice: MemoryHttpClient
) -> None:
    packet = alice.checkout("What did I buy and where does Marta live?")
    ids = cited(packet)
    assert ids
    for item_id in ids:
        doc = alice.lineage(item_id)
        assert doc["leaves"] and all(leaf["tenant"] == "alice" for leaf in doc["leaves"])
    whole = alice.lineage(packet["packet_id"])
    assert set(whole["sources"]) == ids
    traces = [orjson.loads(m.value() or b"{}") for m in read_to_end(stack.bootstrap, CHECKOUTS)]
    sealed = next(t for t in traces if t["packet_id"] == packet["packet_id"])
    # Sealed under the packet's key: only what routes it is clear.
    assert set(sealed) == {"tenant", "packet_id", "task_id", "sealed"}, sealed
    keys = SqliteDataKeys(stack.data_dir / "data-keys.sqlite")
    try:
        trace = TraceOpener(keys)(sealed)
    finally:
        keys.close()
    assert trace is not None and trace["tenant"] == "alice" and set(trace["cited_ids"]) == ids
    resp = httpx.get(
        f"{stack.api_url}/v1/lineage/no-such-event",
        headers={"Authorization": f"Bearer {key_for(stack, 'alice')}"},
    )
    assert resp.status_code == 404


def test_max_tokens_is_never_exceeded_and_dropped_says_what_went(
    alice: MemoryHttpClient,
) -> None:
    big = alice.checkout("What did I buy?", max_tokens=4000)
    assert big["budget"]["used"] <= 4000
    for limit in (64, 120, 250, 500):
        small = alice.checkout("What did I buy?", max_tokens=limit)
        assert small["budget"]["used"] <= limit
        assert small["budget"]["max_tokens"] == limit
        kept = len(small["snippets"]) + len(small["evidence"]) + len(small["facts"])
        if kept < len(big["snippets"]) + len(big["evidence"]) + len(big["facts"]):
            assert small["budget"]["dropped"], small["budget"]


def test_checkout_needs_a_key_and_validates_the_body(stack: RunningStack) -> None:
    assert httpx.post(f"{stack.api_url}/v1/checkout", json={"query": "x"}).status_code == 401
    bad = httpx.post(
        f"{stack.api_url}/v1/checkout",
        json={"query": "", "max_tokens": 1},
        headers={"Authorization": f"Bearer {key_for(stack, 'alice')}"},
    )
    assert bad.status_code == 422


def test_markdown_and_gathered_renderings(alice: MemoryHttpClient) -> None:
    md = alice.checkout("Where does Marta live now?", format="markdown")
    assert isinstance(md, str) and "Porto" in md
    gathered = alice.checkout("Where does Marta live now?", format="gathered")
    assert "_meta" in gathered and "Constraints" in gathered


WORDS = ["apple", "invoice", "Berlin", "meeting", "budget", "$25", "$90", "garden", "Nadia"]


@pytest.fixture(scope="module")
def two_tenants(stack: RunningStack) -> dict[str, MemoryHttpClient]:
    return {t: MemoryHttpClient(stack.api_url, key_for(stack, t)) for t in ("blue", "green")}


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(["blue", "green"]),
            st.lists(st.sampled_from(WORDS), min_size=2, max_size=6),
        ),
        min_size=1,
        max_size=6,
    ),
    queries=st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), min_size=1, max_size=3
    ),
)
def test_tenants_never_see_each_others_memory(
    stack: RunningStack,
    two_tenants: dict[str, MemoryHttpClient],
    events: list[tuple[str, list[str]]],
    queries: list[list[str]],
) -> None:
    before = emitted(stack)
    for tenant, words in events:
        two_tenants[tenant].emit(
            [{"stream": "s", "type": "observation", "payload": {"text": " ".join(words)}}]
        )
    wait_until(lambda: emitted(stack) >= before + len(events), 60, "ledger")
    wait_until(lambda: projected(stack, before + len(events)), 60, "projections")
    for tenant, client in two_tenants.items():
        for q in queries:
            packet = client.checkout(" ".join(q) + "?")
            assert packet["tenant"] == tenant
            for ref in refs(packet):
                assert ref["tenant"] == tenant, (tenant, ref)
            for item in client.recall(" ".join(q), k=20):
                assert item["ref"]["tenant"] == tenant
            for item_id in cited(packet):  # no packet cites an id that does not exist
                assert client.lineage(item_id)["leaves"]
