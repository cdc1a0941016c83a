"""Latent artifacts through the running stack: episodes, altitude search, the memory weave.

A conversation of three sessions (two in one multi-word stream, days apart, one in another),
told by "Zoë" and "the user", plus a preference that changes. The latent builder turns each
session into one cited, non-authoritative episode; searching at the episode altitude finds
the session a question is about and drills down to its ledger events; a checkout with a
purpose carries a weave citing that session; the newer preference makes the older preference
latent stale; a replay and a re-build from the ledger give the same artifact ids.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from memstream.client import MemoryHttpClient
from memstream.kafka.topics import LATENTS
from memstream.latent.builder import LatentBuilder, latent_input
from memstream.ledger.opening import EntryOpener
from memstream.projection.latents import decode_artifacts
from memstream.projection.status import caught_up
from memstream.records.latent import LatentArtifact
from memstream.shred.sqlite import SqliteDataKeys
from stackproc import RunningStack, memstream, owned_stack, wait_until
from test_e2e_learning import settled
from topicread import read_topic


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """This module owns its stack: it kills the latent builder and replays and promotes a
    version for every tenant."""
    yield from owned_stack(tmp_path_factory, "latents")


TENANT = "carnet"
STREAM = "journal-de-bord"


def turn(i: str, stream: str, at: str, agent: str, text: str) -> dict[str, Any]:
    return {"id": i, "stream": stream, "type": "message.user", "agent": agent,
            "occurred_at": at, "payload": {"text": text}}  # fmt: skip


BAKING = [
    turn("bake-1", STREAM, "2026-03-02T18:00:00Z", "Zoë",
         "I finally baked a rye sourdough loaf with the starter from Mireille."),
    turn("bake-2", STREAM, "2026-03-02T18:03:00Z", "the user",
         "How long did the rye sourdough proof before baking?"),
    turn("bake-3", STREAM, "2026-03-02T18:05:00Z", "Zoë",
         "Fourteen hours of proofing in the fridge, then 45 minutes in the dutch oven."),
]  # fmt: skip
KAYAK = [
    turn("kayak-1", STREAM, "2026-03-09T10:00:00Z", "the user",
         "We should plan the kayak trip down the Loire river for the long weekend."),
    turn("kayak-2", STREAM, "2026-03-09T10:02:00Z", "Zoë",
         "Let's rent two kayaks in Amboise and paddle to Chaumont, about 18 km."),
    turn("kayak-3", STREAM, "2026-03-09T10:04:00Z", "the user",
         "Book the campsite near Chaumont, the kayak rental closes at 6 pm."),
]  # fmt: skip
TAXES = [
    turn("tax-1", "calls", "2026-03-05T15:00:00Z", "the user",
         "The accountant needs the tax forms for the flat before April."),
    turn("tax-2", "calls", "2026-03-05T15:01:00Z", "Zoë",
         "I will scan the tax forms and the rent receipts tonight."),
]  # fmt: skip
SESSIONS = {"baking": BAKING, "kayak": KAYAK, "taxes": TAXES}


def preference(i: str, at: str, value: str) -> dict[str, Any]:
    return {"id": i, "stream": "settings", "type": "preference.set", "agent": "Zoë",
            "occurred_at": at, "payload": {"key": "coffee", "value": value}}  # fmt: skip


OLD_PREF = preference("pref-1", "2026-03-01T08:00:00Z", "flat white")
NEW_PREF = preference("pref-2", "2026-03-20T08:00:00Z", "oat cortado")


def latents(stack: RunningStack) -> list[LatentArtifact]:
    """Every record on memory.latents of the tenant, in topic order, opened with the stack's
    data keys (the builder seals them)."""
    records = read_topic(stack.bootstrap, LATENTS)
    assert all(b'"sealed"' in (m.value() or b"") for m in records)
    keys = SqliteDataKeys(stack.data_dir / "data-keys.sqlite")
    try:
        found = decode_artifacts([m.value() for m in records], EntryOpener(keys))
    finally:
        keys.close()
    assert all(isinstance(a, LatentArtifact) for a in found), found
    return [a for a in found if isinstance(a, LatentArtifact) and a.tenant == TENANT]


def builder_settled(stack: RunningStack, n_records: int) -> bool:
    return len(latents(stack)) >= n_records and settled(stack)


def listed(http: httpx.Client, **params: str) -> list[dict[str, Any]]:
    resp = http.get("/v1/latents", params=params)
    assert resp.status_code == 200, resp.text
    artifacts: list[dict[str, Any]] = resp.json()["artifacts"]
    return artifacts


def current_episodes(http: httpx.Client) -> list[dict[str, Any]]:
    return listed(http, type="episode_latent")


@pytest.fixture(scope="module")
def key(stack: RunningStack) -> str:
    return memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir).stdout.strip()


@pytest.fixture(scope="module")
def http(stack: RunningStack, key: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=stack.api_url, headers=headers, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def built(stack: RunningStack, key: str, http: httpx.Client) -> MemoryHttpClient:
    client = MemoryHttpClient(stack.api_url, key)
    client.emit([*BAKING, *TAXES, *KAYAK, OLD_PREF])
    wait_until(
        lambda: len(current_episodes(http)) == 4 and settled(stack), 120, "episodes projected"
    )
    return client


def test_one_cited_non_authoritative_episode_per_session(
    built: MemoryHttpClient, http: httpx.Client
) -> None:
    episodes = current_episodes(http)
    by_sources = {tuple(r["event_id"] for r in a["source_event_refs"]): a for a in episodes}
    for session in SESSIONS.values():
        ids = tuple(t["id"] for t in session)
        assert ids in by_sources, (ids, list(by_sources))
        a = by_sources[ids]
        assert a["authority_status"] == "non_authoritative" and a["stale_at"] is None
        assert a["altitude"] == "episode" and a["artifact_id"].startswith("lat-")
        for r in a["source_event_refs"]:
            assert r["tenant"] == TENANT and len(r["hash"]) == 64 and r["seq"] >= 1
    kayak = by_sources[tuple(t["id"] for t in KAYAK)]
    assert "kayak" in kayak["summary"].lower()
    assert kayak["details"]["stream"] == STREAM


def kayak_episode(http: httpx.Client) -> dict[str, Any]:
    want = [t["id"] for t in KAYAK]
    [a] = [
        a for a in current_episodes(http) if [r["event_id"] for r in a["source_event_refs"]] == want
    ]
    return a


def test_search_at_the_episode_altitude_then_drill_down(
    built: MemoryHttpClient, http: httpx.Client
) -> None:
    resp = http.post(
        "/v1/search",
        json={"query": "which session was about paddling on the river?", "altitude": "episode"},
    )
    assert resp.status_code == 200, resp.text
    hits = resp.json()["hits"]
    assert hits and all(h["altitude"] == "episode" for h in hits)
    top = hits[0]
    assert top["id"] == kayak_episode(http)["artifact_id"], hits
    assert top["sources"] == [t["id"] for t in KAYAK]
    lineage = http.get(f"/v1/lineage/{top['id']}")
    assert lineage.status_code == 200, lineage.text
    assert [leaf["event_id"] for leaf in lineage.json()["leaves"]] == [t["id"] for t in KAYAK]
    events = http.post("/v1/search", json={"query": "kayak rental hours", "altitude": "event"})
    assert events.json()["hits"][0]["id"] == "kayak-3"


def test_a_checkout_with_a_purpose_carries_a_weave_citing_that_session(
    built: MemoryHttpClient, http: httpx.Client
) -> None:
    episode = kayak_episode(http)["artifact_id"]
    # room for the episode and a cited turn: cites carry hash prefixes, whose token count
    # differs from run to run
    packet = built.checkout(
        "What did we plan for the kayak trip on the Loire?", purpose="planning", max_tokens=1000
    )
    weave = packet["memory_weave"]
    assert weave["purpose_profile"] == "planning" and episode in weave["artifact_ids"]
    assert {r["event_id"] for r in weave["source_event_refs"]} >= {t["id"] for t in KAYAK}
    assert {c["label"] for c in weave["inferred_context"]} == {"suggestive"}
    cited = {e["item_id"].split("#")[0] for e in weave["accepted_evidence"]}
    assert cited & {t["id"] for t in KAYAK}, weave["accepted_evidence"]
    assert weave["prohibited_use"] and weave["expected_use"]
    assert weave["token_budget"]["used"] <= weave["token_budget"]["allowed"]
    assert packet["budget"]["used"] <= 1000
    # no purpose, no weave; the latent context names the session, suggestive
    plain = built.checkout("What did we plan for the kayak trip on the Loire?", max_tokens=3000)
    assert plain.get("memory_weave") is None
    latent = {x["artifact_id"]: x for x in plain["latent_context"]}
    assert latent[episode]["label"] == "suggestive", plain["latent_context"]
    assert [r["event_id"] for r in latent[episode]["source_event_refs"]] == [t["id"] for t in KAYAK]


def test_the_cli_asks_for_a_weave_and_refuses_an_unknown_purpose(
    stack: RunningStack, built: MemoryHttpClient
) -> None:
    args = ("checkout", "--tenant", TENANT, "--format", "markdown")
    shown = memstream(*args, "--purpose", "review", "kayak trip", data_dir=stack.data_dir)
    assert "## Memory weave (review, phase review)" in shown.stdout
    bad = memstream(*args, "--purpose", "daydream", "kayak", data_dir=stack.data_dir, check=False)
    assert bad.returncode != 0 and "purpose" in (bad.stdout + bad.stderr)


def test_a_newer_preference_makes_the_old_preference_latent_stale(
    stack: RunningStack, built: MemoryHttpClient, http: httpx.Client
) -> None:
    [old] = listed(http, type="preference_latent")
    assert "flat white" in old["summary"]
    built.emit([NEW_PREF])

    def replaced() -> bool:
        now = listed(http, type="preference_latent")
        return len(now) == 1 and now[0]["artifact_id"] != old["artifact_id"]

    wait_until(replaced, 90, "the new preference latent")
    [new] = listed(http, type="preference_latent")
    assert "oat cortado" in new["summary"] and "flat white" not in new["summary"]
    assert new["supersedes"] == [old["artifact_id"]]
    every = {
        a["artifact_id"]: a for a in listed(http, type="preference_latent", include_stale="true")
    }
    assert every[old["artifact_id"]]["stale_at"].startswith("2026-03-20T08:00:00")
    assert every[new["artifact_id"]]["stale_at"] is None


def served_ids(http: httpx.Client) -> set[str]:
    return {a["artifact_id"] for a in listed(http, include_stale="true")}


def test_the_ledger_rebuilt_gives_the_same_ids_and_a_restart_adds_nothing(
    stack: RunningStack, built: MemoryHttpClient, http: httpx.Client
) -> None:
    wait_until(lambda: settled(stack), 60, "settled")
    current = {a["artifact_id"] for a in listed(http)}
    builder = LatentBuilder()
    now = datetime.now(UTC)
    keys = SqliteDataKeys(stack.data_dir / "data-keys.sqlite")
    try:
        opener = EntryOpener(keys)  # the sequencer seals every entry
        for entry in stack.ledger():
            if entry["tenant"] == TENANT:
                builder.observe(latent_input(opener(entry)), now)
    finally:
        keys.close()
    builder.flush(now)
    assert {a.artifact_id for a in builder.current.values()} == current
    records = len(latents(stack))
    os.kill(stack.pid("latent-builder"), signal.SIGKILL)
    wait_until(lambda: _restarted(stack), 60, "the latent builder restarted")
    wait_until(lambda: settled(stack), 60, "settled after the restart")
    assert len(latents(stack)) == records


def test_a_replayed_version_holds_the_same_artifacts(
    stack: RunningStack, built: MemoryHttpClient, http: httpx.Client
) -> None:
    before = served_ids(http)
    memstream("replay", "--version", "v2", data_dir=stack.data_dir)
    wait_until(lambda: _ready(stack, "v2"), 120, "v2 built")
    memstream("projections", "promote", "v2", data_dir=stack.data_dir)
    wait_until(lambda: served_ids(http) == before, 60, "v2 serves the same artifacts")
    hits = http.post("/v1/search", json={"query": "kayak trip", "altitude": "episode"})
    assert hits.json()["hits"][0]["id"] == kayak_episode(http)["artifact_id"]


def _restarted(stack: RunningStack) -> bool:
    log = (stack.data_dir / "logs" / "latent-builder.log").read_text()
    return log.count("inputs folded again") >= 2  # one per assignment: a start and a restart


def _ready(stack: RunningStack, version: str) -> bool:
    res = memstream("projections", "list", "--json", data_dir=stack.data_dir, check=False)
    if res.returncode != 0:
        return False
    doc = json.loads(res.stdout)
    [v] = [v for v in doc["versions"] if v["name"] == version]
    return bool(v["status"] == "ready" and caught_up(v, 0))
