"""Latent artifacts through the running stack: published to ``memory.latents`` by hand (as the
latent builder would), projected into graph and vectors, listed, searched at every altitude,
resolved by lineage, read from the command line, and rebuilt by a replayed version.

Assertions name the hand-built artifacts only: the latent builder running in the stack may add
its own about the same talk.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import latentdata
import numpy as np
import orjson
import pytest
from confluent_kafka import Producer
from fastapi.testclient import TestClient
from memstream.client import MemoryHttpClient, MemstreamHttpError
from memstream.embed.registry import get_embedder
from memstream.kafka.topics import LATENTS, LEDGER, ensure_topics
from memstream.keys import KeyStore
from memstream.projection.status import caught_up
from memstream.records.latent import LatentArtifact
from memstream.records.projected import SourceRef
from memstream.settings import Settings
from memstream_api.app import create_app
from stackproc import RunningStack, memstream, owned_stack, wait_until
from topicread import read_topic


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """This module owns its stack: it replays and promotes a projection version ("v2") for
    every tenant."""
    yield from owned_stack(tmp_path_factory, "latent-api")


TENANT = "ines"
STREAM = "atelier-du-lundi"  # streams allow no spaces: words joined by dashes
TALK = [
    ("Inès", "message.user", {"text": "I glazed four bowls in celadon at the atelier."}),
    ("Noé", "message.assistant", {"text": "The kiln reached cone 6; every bowl survived."}),
    ("Inès", "preference.set", {"subject": "Inès", "key": "glaze", "value": "celadon"}),
    ("Inès", "preference.set", {"subject": "Inès", "key": "glaze", "value": "tenmoku"}),
    ("Noé", "message.user", {"text": "Shopping list: leeks, lentils and a baguette."}),
]
T0 = datetime(2025, 3, 3, 10, tzinfo=UTC)


def _events() -> list[dict[str, Any]]:
    return [
        {"id": f"ines-{i}", "stream": STREAM, "agent": agent, "type": type_,
         "occurred_at": (T0 + timedelta(minutes=i)).isoformat(), "payload": payload}
        for i, (agent, type_, payload) in enumerate(TALK)
    ]  # fmt: skip


def _refs(stack: RunningStack) -> dict[str, SourceRef]:
    out = {}
    for m in read_topic(stack.bootstrap, LEDGER):
        e = orjson.loads(m.value() or b"{}")
        if e.get("tenant") == TENANT:
            out[e["id"]] = SourceRef(
                tenant=TENANT, stream=e["stream"], seq=e["seq"], hash=e["hash"], event_id=e["id"]
            )
    return out


def _projected(stack: RunningStack) -> bool:
    res = memstream("projections", "list", "--json", data_dir=stack.data_dir, check=False)
    if res.returncode != 0:
        return False
    (live,) = [v for v in json.loads(res.stdout)["versions"] if v["live"]]
    return bool(live["counts"]["ledger_events"] and caught_up(live))


def _publish(stack: RunningStack, artifacts: list[LatentArtifact]) -> None:
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    for a in artifacts:
        producer.produce(LATENTS, a.model_dump_json().encode(), key=a.key.encode())
    assert producer.flush(10) == 0


@pytest.fixture(scope="module")
def client(stack: RunningStack) -> Iterator[MemoryHttpClient]:
    key = memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir).stdout.strip()
    with MemoryHttpClient(stack.api_url, key) as c:
        yield c


@pytest.fixture(scope="module")
def world(stack: RunningStack, client: MemoryHttpClient) -> dict[str, LatentArtifact]:
    """The talk in the ledger, and four artifacts about it on ``memory.latents``."""
    client.emit(_events())
    wait_until(lambda: len(_refs(stack)) == len(TALK), 60, "ledger")
    wait_until(lambda: _projected(stack), 90, "projections")
    refs = [_refs(stack)[f"ines-{i}"] for i in range(len(TALK))]
    emb = get_embedder()  # the live version's: the centroid lives in its vector space
    turns = emb.embed([str(p.get("text")) for _a, _t, p in TALK[:2]]).mean(axis=0)
    centroid = [float(x) for x in turns / np.linalg.norm(turns)]
    pottery = latentdata.episode(
        TENANT, STREAM, "Inès glazed bowls in celadon and Noé fired them in the kiln",
        refs[:2], start=T0, key_terms=["glaze", "kiln", "bowls"], speakers=["Inès", "Noé"],
        entities=["inès", "noé"], centroid=centroid, payload_ref=f"centroid:{emb.name}",
    )  # fmt: skip
    shopping = latentdata.episode(
        TENANT, STREAM, "Noé wrote a shopping list", refs[4:], group="shopping",
        start=T0 + timedelta(minutes=4), key_terms=["leeks", "lentils"], speakers=["Noé"],
    )  # fmt: skip
    old = latentdata.preference(TENANT, "Inès", {"glaze": "celadon"}, refs[2:3], since=T0)
    new = latentdata.preference(
        TENANT, "Inès", {"glaze": "tenmoku"}, refs[3:4], since=T0 + timedelta(minutes=3),
        supersedes=[old.artifact_id],
    )  # fmt: skip
    _publish(stack, [pottery, old, shopping, new, latentdata.stale(old)])
    mine = {a.artifact_id for a in (pottery, shopping, old, new)}

    def arrived() -> bool:
        listed = {a["artifact_id"] for a in client.latents(include_stale=True, limit=1000)}
        return mine <= listed and _projected(stack)

    wait_until(arrived, 60, "artifacts projected")
    return {"pottery": pottery, "shopping": shopping, "old": old, "new": new}


def _ids(found: list[dict[str, Any]]) -> list[str]:
    return [a["artifact_id"] for a in found]


def test_latents_are_listed_newest_first_stale_ones_only_when_asked(
    client: MemoryHttpClient, world: dict[str, LatentArtifact]
) -> None:
    pottery, shopping, old, new = (world[k] for k in ("pottery", "shopping", "old", "new"))
    current = _ids(client.latents())
    assert old.artifact_id not in current
    mine = [i for i in current if i in {pottery.artifact_id, shopping.artifact_id, new.artifact_id}]
    assert mine == [shopping.artifact_id, new.artifact_id, pottery.artifact_id]  # by valid_from
    everything = client.latents(include_stale=True)
    [gone] = [a for a in everything if a["artifact_id"] == old.artifact_id]
    assert LatentArtifact.model_validate(gone) == latentdata.stale(old)  # reads back exactly
    prefs = client.latents(types=["preference_latent"], include_stale=True)
    assert {a["artifact_type"] for a in prefs} == {"preference_latent"}
    assert {old.artifact_id, new.artifact_id} <= set(_ids(prefs))
    both = _ids(client.latents(types=["preference_latent", "episode_latent"]))
    assert {pottery.artifact_id, new.artifact_id} <= set(both)
    # stream= is a scope: the artifacts resting on an event of the stream, citing only those
    in_stream = client.latents(stream=STREAM)
    assert pottery.artifact_id in _ids(in_stream)
    assert all({r["stream"] for r in a["source_event_refs"]} == {STREAM} for a in in_stream)
    assert client.latents(stream="no-such-stream") == []


def test_latents_refuses_an_unknown_type_and_a_missing_key(
    stack: RunningStack, client: MemoryHttpClient, world: dict[str, LatentArtifact]
) -> None:
    with pytest.raises(MemstreamHttpError) as info:
        client.latents(types=["dream_latent"])
    assert info.value.status == 422 and "type" in info.value.detail
    assert "episode_latent" in info.value.detail  # the reason names what is allowed
    resp = httpx.get(f"{stack.api_url}/v1/latents")
    assert resp.status_code == 401 and resp.json()["detail"]
    other = memstream("keys", "create", "--tenant", "zoe", data_dir=stack.data_dir).stdout.strip()
    with MemoryHttpClient(stack.api_url, other) as zoe:
        assert not set(_ids(zoe.latents(include_stale=True))) & {
            a.artifact_id for a in world.values()
        }


def test_search_at_every_altitude_names_the_events_beneath(
    client: MemoryHttpClient, world: dict[str, LatentArtifact]
) -> None:
    events = client.search("celadon bowls", altitude="event", k=3)
    assert events[0]["id"] == "ines-0" and events[0]["sources"] == ["ines-0"]
    assert {h["altitude"] for h in events} == {"event"}

    episodes = {h["id"]: h for h in client.search("glazing bowls in the kiln", "episode", k=3)}
    pottery = episodes[world["pottery"].artifact_id]  # a builder's episode of it may rank too
    assert pottery["kind"] == "episode_latent" and pottery["sources"] == ["ines-0", "ines-1"]
    assert {h["altitude"] for h in episodes.values()} == {"episode"}

    latents = client.search("which glaze does Inès prefer", altitude="latent")
    found = {h["id"]: h for h in latents}
    assert world["new"].artifact_id in found and world["old"].artifact_id not in found
    assert found[world["new"].artifact_id]["sources"] == ["ines-3"]

    facts = client.search("Inès glaze preference", altitude="fact")
    assert facts[0]["id"] == "ines-3#0" and facts[0]["sources"] == ["ines-3"]
    assert "tenmoku" in facts[0]["text"] and "ines-2#0" not in {h["id"] for h in facts}
    then = client.search("Inès glaze preference", altitude="fact", as_of=T0 + timedelta(minutes=2))
    assert [h["id"] for h in then][:1] == ["ines-2#0"]
    assert client.search("kiln", altitude="episode", as_of=T0 - timedelta(days=1)) == []


def test_search_validates_its_body(stack: RunningStack, world: dict[str, LatentArtifact]) -> None:
    url = f"{stack.api_url}/v1/search"
    key = {"Authorization": f"Bearer {stack.dev_key}"}
    for body in ({"query": ""}, {"query": "x", "altitude": "cloud"}, {"query": "x", "k": 51},
                 {"query": "x", "k": "3"}, {"query": "x" * 2001}):  # fmt: skip
        resp = httpx.post(url, json=body, headers=key)
        assert resp.status_code == 422 and resp.json()["detail"], resp.text
    assert httpx.post(url, json={"query": "kiln"}).status_code == 401


def test_lineage_resolves_an_artifact_to_its_ledger_events(
    stack: RunningStack, client: MemoryHttpClient, world: dict[str, LatentArtifact]
) -> None:
    pottery = world["pottery"]
    doc = client.lineage(pottery.artifact_id)
    assert doc["kind"] == "latent" and doc["sources"] == ["ines-0", "ines-1"]
    refs = {r.event_id: r for r in _refs(stack).values()}
    assert doc["leaves"] == [refs[i].model_dump() for i in ("ines-0", "ines-1")]
    assert LatentArtifact.model_validate(doc["artifact"]) == pottery
    stale = client.lineage(world["old"].artifact_id)  # a stale artifact still has its lineage
    assert stale["sources"] == ["ines-2"] and stale["artifact"]["stale_at"]
    fact = client.lineage("ines-3#0")  # a fact id's '#' reaches the server
    assert fact["kind"] == "fact" and fact["sources"] == ["ines-3"]
    event = client.lineage("ines-0")
    assert event["kind"] == "event" and event["artifact"] is None
    with pytest.raises(MemstreamHttpError) as info:
        client.lineage("lat-" + "0" * 24)
    assert info.value.status == 404


def test_the_command_line_prints_one_json_document_or_a_table(
    stack: RunningStack, world: dict[str, LatentArtifact]
) -> None:
    res = memstream("search", "--tenant", TENANT, "--altitude", "episode", "--k", "2", "--json",
                    "glazing bowls in the kiln", data_dir=stack.data_dir)  # fmt: skip
    hits = json.loads(res.stdout)["hits"]  # the whole of stdout is the document
    assert world["pottery"].artifact_id in {h["id"] for h in hits} and len(hits) <= 2
    res = memstream("latents", "list", "--tenant", TENANT, "--type", "preference_latent",
                    "--include-stale", "--json", data_dir=stack.data_dir)  # fmt: skip
    listed = json.loads(res.stdout)["artifacts"]
    assert {world["old"].artifact_id, world["new"].artifact_id} <= set(_ids(listed))
    assert {a["artifact_type"] for a in listed} == {"preference_latent"}
    table = memstream("latents", "list", "--tenant", TENANT, data_dir=stack.data_dir)
    assert world["pottery"].artifact_id in table.stdout  # ids never wrap: lineage takes them
    assert "episode_latent" in table.stdout and STREAM in table.stdout
    table = memstream("search", "--tenant", TENANT, "celadon", data_dir=stack.data_dir)
    assert "event hits" in table.stdout
    bad = memstream("search", "--tenant", TENANT, "--altitude", "cloud", "x",
                    data_dir=stack.data_dir, check=False)  # fmt: skip
    assert bad.returncode == 1 and "--altitude" in bad.stderr
    bad = memstream("latents", "list", "--tenant", TENANT, "--type", "dream",
                    data_dir=stack.data_dir, check=False)  # fmt: skip
    assert bad.returncode == 1 and "unknown --type" in bad.stderr


def test_a_replayed_version_gets_the_latents_too(
    stack: RunningStack, client: MemoryHttpClient, world: dict[str, LatentArtifact]
) -> None:
    before = client.latents(include_stale=True, limit=1000)
    res = memstream("replay", "--version", "v2", "--json", data_dir=stack.data_dir)
    v2 = json.loads(res.stdout)
    assert v2["lag"]["total"] == 0, v2  # ledger and latents read to the end by its own groups
    memstream("projections", "promote", "v2", data_dir=stack.data_dir)
    served = client.latents(include_stale=True, limit=1000)
    assert {a["artifact_id"] for a in before} <= {a["artifact_id"] for a in served}
    assert next(a for a in served if a["artifact_id"] == world["old"].artifact_id)["stale_at"]
    episodes = client.search("glazing bowls in the kiln", altitude="episode", k=3)
    assert world["pottery"].artifact_id in {h["id"] for h in episodes}
    latents = {h["id"] for h in client.search("which glaze does Inès prefer", altitude="latent")}
    assert world["new"].artifact_id in latents and world["old"].artifact_id not in latents


def test_latent_reads_are_503_while_no_projection_is_live(broker: str, tmp_path: Path) -> None:
    ensure_topics(broker, Settings())
    settings = Settings(data_dir=tmp_path)  # a data dir with no projection version at all
    key = KeyStore.from_settings(settings).create(TENANT)
    headers = {"Authorization": f"Bearer {key}"}
    with TestClient(create_app(settings, broker)) as api:
        for resp in (
            api.get("/v1/latents", headers=headers),
            api.post("/v1/search", json={"query": "kiln", "altitude": "episode"}, headers=headers),
            api.get("/v1/lineage/lat-" + "0" * 24, headers=headers),
        ):
            assert resp.status_code == 503, resp.text
            assert resp.headers["Retry-After"] and resp.json()["detail"]
