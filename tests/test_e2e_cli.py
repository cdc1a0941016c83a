"""The CLI's reading and correcting commands on a real stack, each on its success path:
``lineage``, ``invalidate``, ``invalidations list``, a proposal rejected over HTTP, and a real
``purge`` (not a dry run). One tenant of its own, written for this module."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from memstream.client import MemoryHttpClient
from stackproc import RunningStack, memstream, wait_until

TENANT = "cli-odile"
SUBJECT = "Odile Brandt-Ñúñez"
FORGOTTEN = "ysolde quill"  # purged as written: in lower case
EVENTS = [
    {"id": "od-1", "stream": "studio", "type": "message.user", "agent": "the user",
     "payload": {"text": f"{SUBJECT} moved her pottery studio to Ghent in May."}},
    {"id": "od-2", "stream": "facts", "type": "fact.asserted",
     "payload": {"subject": SUBJECT, "predicate": "lives_in", "object": "Ghent"}},
    {"id": "od-3", "stream": "facts", "type": "fact.asserted",
     "payload": {"subject": SUBJECT, "predicate": "favourite_glaze", "object": "celadon"}},
    {"id": "od-4", "stream": "review", "type": "memory.invalidate", "agent": "auditor",
     "payload": {"target_ids": ["od-3#0"], "reason": "a guess, never confirmed",
                 "review_status": "proposed"}},
    {"id": "ys-1", "stream": "studio", "type": "message.user", "agent": "the user",
     "payload": {"text": f"{FORGOTTEN} glazes her bowls in tenmoku."}},
    {"id": "ys-2", "stream": "facts", "type": "fact.asserted",
     "payload": {"subject": FORGOTTEN, "predicate": "kiln", "object": "gas kiln in Namur"}},
]  # fmt: skip


def cli(stack: RunningStack, *args: str) -> Any:
    return json.loads(memstream(*args, "--tenant", TENANT, data_dir=stack.data_dir).stdout)


@pytest.fixture(scope="module")
def key(stack: RunningStack) -> str:
    return memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir).stdout.strip()


@pytest.fixture(scope="module")
def position(stack: RunningStack, key: str) -> Iterator[str]:
    with MemoryHttpClient(stack.api_url, key) as client:
        _ids, written = client.emit_written(EVENTS)

        def projected() -> bool:
            listed = cli(stack, "invalidations", "list", "--status", "proposed", "--json")
            return any(p["id"] == "od-4" for p in listed)

        wait_until(projected, 90, "the events and the proposal projected")
        yield written


def test_lineage_names_the_facts_source_event(stack: RunningStack, position: str) -> None:
    doc = cli(stack, "lineage", "od-2#0")
    assert [leaf["event_id"] for leaf in doc["leaves"]] == ["od-2"]
    assert (doc["leaves"][0]["tenant"], doc["leaves"][0]["stream"]) == (TENANT, "facts")


def test_invalidate_closes_a_fact_and_the_list_shows_it(
    stack: RunningStack, key: str, position: str
) -> None:
    done = cli(stack, "invalidate", "od-2#0", "--reason", "she moved to Liège", "--after",
               position, "--json")  # fmt: skip
    assert done["target_ids"] == ["od-2#0"] and done["reason"] == "she moved to Liège"

    def listed() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = cli(stack, "invalidations", "list", "--status",
                                          "accepted", "--json")  # fmt: skip
        return [v for v in found if v["id"] == done["id"]]

    wait_until(lambda: bool(listed()), 60, "the invalidation listed")
    assert listed()[0]["target_ids"] == ["od-2#0"]


def test_a_proposal_rejected_over_http_changes_nothing_but_its_record(
    stack: RunningStack, key: str, position: str
) -> None:
    auth = {"Authorization": f"Bearer {key}"}
    resp = httpx.post(f"{stack.api_url}/v1/invalidations/od-4/reject", headers=auth,
                      json={"reason": "it was confirmed after all"}, timeout=60)  # fmt: skip
    assert resp.status_code == 202, resp.text
    decision = resp.json()["id"]

    def decided() -> bool:
        listed = cli(stack, "invalidations", "list", "--status", "proposed", "--json")
        return any(p["id"] == "od-4" and p["decisions"] for p in listed)

    wait_until(decided, 60, "the rejection recorded on the proposal")
    [proposal] = [p for p in cli(stack, "invalidations", "list", "--json") if p["id"] == "od-4"]
    assert proposal["decisions"] == [f"{decision} rejected"]
    again = httpx.post(f"{stack.api_url}/v1/invalidations/od-4/reject", headers=auth, timeout=60)
    assert again.status_code == 409  # decided once
    with MemoryHttpClient(stack.api_url, key) as client:
        packet = client.checkout(f"What is {SUBJECT}'s favourite glaze?")
    assert "od-3#0" in {f["fact_id"] for f in packet["facts"]}  # still valid


def test_purge_forgets_the_subject_and_keeps_the_rest(
    stack: RunningStack, key: str, position: str
) -> None:
    report = cli(stack, "purge", "--subject", FORGOTTEN, "--wait", "60", "--json")
    assert report["complete"] and report["tombstone_id"]
    assert report["removed"]["events"] == 2
    for event_id in ("ys-1", "ys-2"):
        gone = memstream("lineage", event_id, "--tenant", TENANT, data_dir=stack.data_dir,
                         check=False)  # fmt: skip
        assert gone.returncode == 1 and "404" in gone.stderr, gone
    kept = cli(stack, "lineage", "od-1")
    assert [leaf["event_id"] for leaf in kept["leaves"]] == ["od-1"]
