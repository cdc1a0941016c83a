"""Latent artifacts from ``memory.latents`` into the graph (FalkorDB) and the index (Qdrant
Edge), beside ledger records in the same batch; bad records are dead letters, bugs raise."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import latentdata
import numpy as np
import orjson
import pytest
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from falkordb import FalkorDB
from memstream.embed.hashing import HashingEmbedder
from memstream.graph.falkor import FalkorGraphStore
from memstream.kafka.clients import make_producer
from memstream.kafka.topics import DLQ, LATENTS, ensure_topics
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.projection.latents import (
    decode_artifact,
    latent_changes,
    search_text,
    usable_centroid,
)
from memstream.projection.projectors import POINTS_EVERY_S, GraphProjector, VectorProjector
from memstream.records.latent import LatentArtifact
from memstream.records.projected import SourceRef
from memstream.settings import Settings
from memstream.stack.servers import Server
from memstream.vectors.edge import EdgeVectorIndex
from prometheus_client import REGISTRY
from topicread import read_topic

EMB = HashingEmbedder(64)
STREAM = "atelier-de-ceramique:lundi"  # the ledger allows no spaces or accents here


# -- pure parts -------------------------------------------------------------------------------


def _refs(tenant: str, *event_ids: str) -> list[SourceRef]:
    return [latentdata.ref(tenant, e, STREAM, i + 1) for i, e in enumerate(event_ids)]


def test_decode_gives_the_artifact_or_the_reason() -> None:
    a = latentdata.episode("inès", STREAM, "Inès glazed bowls", _refs("inès", "e1"))
    assert decode_artifact(a.model_dump_json().encode()) == a
    assert decode_artifact(None) == "empty record (no value)"
    assert "not a latent artifact" in str(decode_artifact(b"\xff not json"))
    wrong = orjson.dumps({**orjson.loads(a.model_dump_json()), "artifact_type": "dream"})
    reason = str(decode_artifact(wrong))
    assert reason.startswith("not a latent artifact (1 error(s)): artifact_type:"), reason


def test_search_text_adds_what_the_details_name() -> None:
    ep = latentdata.episode(
        "t", STREAM, "Glazing session", _refs("t", "e1"), key_terms=["kiln"], speakers=["Inès"]
    )
    assert search_text(ep) == "Glazing session Inès kiln"
    pref = latentdata.preference("t", "Zoë", {"clay": "grès"}, _refs("t", "e2"))
    assert search_text(pref) == "Zoë prefers clay: grès"  # nothing the summary lacks


def test_a_centroid_is_used_only_in_the_versions_vector_space() -> None:
    vec = [1.0] + [0.0] * (EMB.dim - 1)
    refs = _refs("t", "e1")
    ok = latentdata.episode("t", STREAM, "s", refs, centroid=vec, payload_ref="centroid:hash-64")
    assert usable_centroid(ok, EMB) == vec
    other = ok.model_copy(update={"payload_ref": "centroid:minilm-static-256"})
    short = ok.model_copy(update={"centroid": vec[:8]})
    bare = latentdata.episode("t", STREAM, "s", _refs("t", "e1"))
    assert usable_centroid(other, EMB) is None
    assert usable_centroid(short, EMB) is None
    assert usable_centroid(bare, EMB) is None


def test_changes_upsert_current_artifacts_and_delete_stale_ones() -> None:
    vec = [0.0, 1.0] + [0.0] * (EMB.dim - 2)
    ep = latentdata.episode(
        "t", STREAM, "Inès fired the kiln", _refs("t", "e1", "e2"), centroid=vec,
        payload_ref="centroid:hash-64", entities=["inès"],
    )  # fmt: skip
    pref = latentdata.preference("t", "Zoë", {"tea": "oolong"}, _refs("t", "e3"))
    gone = latentdata.preference("t", "Zoë", {"tea": "sencha"}, _refs("t", "e4"))
    changes = latent_changes([ep, pref, gone, latentdata.stale(gone)], EMB)
    assert changes.deletes == [f"latent:t:{gone.artifact_id}"]
    by_key = {p.point_key: p for p in changes.upserts}
    assert set(by_key) == {f"latent:t:{ep.artifact_id}", f"latent:t:{pref.artifact_id}"}
    point = by_key[f"latent:t:{ep.artifact_id}"]
    assert point.dense == vec
    assert point.payload == {
        "tenant": "t",
        "kind": "latent",
        "altitude": "episode",
        "artifact_id": ep.artifact_id,
        "artifact_type": "episode_latent",
        "stream": STREAM,
        "occurred_at": "2025-03-01T09:00:00.000000Z",
        "valid_to": None,
        "entity_keys": ["inès"],
        "source_ids": ["e1", "e2"],
        "confidence": 0.7,
        "review_status": "accepted",
        "text": "Inès fired the kiln",
    }
    embedded = EMB.embed([pref.summary])[0]
    assert np.allclose(by_key[f"latent:t:{pref.artifact_id}"].dense, embedded)
    assert by_key[f"latent:t:{pref.artifact_id}"].payload["altitude"] == "latent"


# -- projectors against a real broker, FalkorDB and Qdrant Edge -------------------------------

NOW = "2025-10-01T00:00:00Z"


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


@pytest.fixture
def tenant() -> str:
    return f"ines-{uuid.uuid4().hex[:6]}"


def ledger_messages(bootstrap: str, tenant: str, n: int) -> list[Message]:
    """``n`` ledger entries of ``tenant`` on a scratch topic, read back (offsets 0..n-1)."""
    topic = f"latproj-ledger-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap})
    state = SequencerState()
    for i in range(n):
        doc = {
            "id": f"e{i + 1}", "tenant": tenant, "stream": STREAM, "agent": "Inès",
            "type": "message.user", "occurred_at": f"2025-03-01T09:0{i}:00Z",
            "payload": {"text": f"Glazed bowl number {i + 1} in celadon"},
        }  # fmt: skip
        out = sequence(RawRecord(orjson.dumps(doc), 0, i, "raw"), state, NOW)
        assert isinstance(out, Sequenced)
        producer.produce(topic, orjson.dumps(out.entry), key=f"{tenant}/{STREAM}".encode())
    assert producer.flush(10) == 0
    return sorted(read_topic(bootstrap, topic), key=lambda m: m.offset() or 0)


def latent_messages(bootstrap: str, tenant: str, values: list[bytes]) -> list[Message]:
    """``values`` produced to ``memory.latents`` keyed by the tenant, read back in order (a
    tenant's records share one partition)."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        producer.produce(LATENTS, v, key=tenant.encode())
    assert producer.flush(10) == 0
    mine = [m for m in read_topic(bootstrap, LATENTS) if m.key() == tenant.encode()]
    new = sorted(mine, key=lambda m: m.offset() or 0)[-len(values) :]
    assert [m.value() for m in new] == values
    return new


def dead_letters_of(bootstrap: str, tenant: str) -> list[dict[str, Any]]:
    out = []
    for m in read_topic(bootstrap, DLQ):
        doc = orjson.loads(m.value() or b"{}")
        if doc["source"]["topic"] == LATENTS and m.key() == tenant.encode():
            out.append(doc)
    return out


def artifacts(tenant: str) -> tuple[LatentArtifact, LatentArtifact]:
    ep = latentdata.episode(
        tenant, STREAM, "Inès glazed two celadon bowls", _refs(tenant, "e1", "e2"),
        key_terms=["celadon", "bowls"],
    )  # fmt: skip
    pref = latentdata.preference(tenant, "Inès", {"glaze": "celadon"}, _refs(tenant, "e2"))
    return ep, pref


@pytest.fixture
def graph(falkordb_server: Server) -> Iterator[FalkorGraphStore]:
    store = FalkorGraphStore(
        FalkorDB(port=falkordb_server.port, password=falkordb_server.password),
        f"lat_{uuid.uuid4().hex[:8]}",
    )
    try:
        yield store
    finally:
        store.drop()


def test_graph_projector_writes_latents_beside_events_and_dead_letters_bad_records(
    topics: str, tenant: str, graph: FalkorGraphStore
) -> None:
    ep, pref = artifacts(tenant)
    bad = [b"\x00 garbage", orjson.dumps({"artifact_id": "lat-x", "tenant": tenant})]
    latent = latent_messages(topics, tenant, [ep.model_dump_json().encode(), *bad])
    ledger = ledger_messages(topics, tenant, 3)
    projector = GraphProjector(graph, "vlat", make_producer(topics))
    try:
        # artifacts first: their source events arrive later in the batch, or in the next one
        projector.process([latent[0], *ledger[:1]])
        projector.process([*latent[1:], *ledger[1:]])
        projector.process(latent_messages(topics, tenant, [pref.model_dump_json().encode()]))
    finally:
        projector.close()
    assert graph.counts(tenant)["events"] == 3
    assert graph.latents(tenant) == [*sorted([ep, pref], key=lambda a: a.artifact_id)]
    assert graph.event(tenant, "e2") is not None
    dead = dead_letters_of(topics, tenant)
    assert [d["source"]["offset"] for d in dead] == [m.offset() for m in latent[1:]]
    assert [base64.b64decode(d["raw_b64"]) for d in dead] == bad
    for d in dead:
        assert d["component"] == "graph-projector"
        assert d["reason"].startswith("graph-projector vlat: not a latent artifact")


def test_a_bug_writing_latents_raises_and_dead_letters_nothing(
    topics: str, tenant: str, graph: FalkorGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ep, _ = artifacts(tenant)
    msgs = latent_messages(topics, tenant, [ep.model_dump_json().encode()])

    def broken(_artifacts: list[LatentArtifact]) -> None:
        raise KeyError("typo")  # the record is fine: the failure is ours

    monkeypatch.setattr(graph, "write_latents", broken)
    projector = GraphProjector(graph, "vlat", make_producer(topics))
    try:
        with pytest.raises(KeyError):
            projector.process(msgs)
    finally:
        projector.close()
    assert dead_letters_of(topics, tenant) == []


def test_vector_projector_indexes_current_artifacts_and_drops_stale_ones(
    topics: str, tenant: str, tmp_path: Path
) -> None:
    ep, pref = artifacts(tenant)
    index = EdgeVectorIndex(tmp_path / "edge", "lat", EMB.dim)
    projector = VectorProjector(index, EMB, "vlat", make_producer(topics))
    try:
        projector.process(ledger_messages(topics, tenant, 3))
        records = [ep.model_dump_json().encode(), pref.model_dump_json().encode()]
        projector.process(latent_messages(topics, tenant, records))
        assert index.count(tenant) == 5 and index.count(tenant, kinds=["event"]) == 3
        # the points gauge counts events, one per ledger entry
        assert points_gauge("vlat") == 3
        q = EMB.embed(["celadon bowls"])[0].tolist()
        episodes = index.query(tenant, q, "celadon bowls", kinds=["latent"], altitudes=["episode"])
        assert [h.payload["artifact_id"] for h in episodes] == [ep.artifact_id]
        assert episodes[0].payload["source_ids"] == ["e1", "e2"]
        events = index.query(tenant, q, "celadon bowls", kinds=["event"], limit=10)
        assert {h.payload["event_id"] for h in events} == {"e1", "e2", "e3"}

        stale = latentdata.stale(pref).model_dump_json().encode()
        projector.process(latent_messages(topics, tenant, [stale]))
        left = index.query(tenant, q, "celadon", kinds=["latent"], limit=10)
        assert [h.payload["artifact_id"] for h in left] == [ep.artifact_id]
        assert index.count(tenant, kinds=["event"]) == 3
    finally:
        projector.close()


def points_gauge(version: str) -> float | None:
    """``memstream_projection_points`` as a scrape reads it."""
    labels = {"component": "vector-projector", "version": version}
    return REGISTRY.get_sample_value("memstream_projection_points", labels)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_points_gauge_counts_at_most_every_five_seconds_and_converges(
    topics: str, tenant: str, tmp_path: Path
) -> None:
    index = EdgeVectorIndex(tmp_path / "edge", "pts", EMB.dim)
    counts = 0
    real_count = index.count

    def counting(*args: Any, **kw: Any) -> int:
        nonlocal counts
        counts += 1
        return real_count(*args, **kw)

    index.count = counting  # type: ignore[method-assign]
    clock = FakeClock()
    projector = VectorProjector(index, EMB, "vpts", make_producer(topics), clock=clock)
    try:
        assert points_gauge("vpts") == 0.0
        before = counts
        projector.process(ledger_messages(topics, tenant, 3))
        assert counts == before  # a batch counts nothing
        clock.now += POINTS_EVERY_S - 0.5
        assert points_gauge("vpts") == 0.0  # read within 5 s: the earlier count
        assert counts == before
        clock.now += 0.5
        # no batch came since, and the gauge still reaches the index's count
        assert points_gauge("vpts") == 3 == real_count(tenant, kinds=["event"])
        assert counts == before + 1
        for _ in range(3):
            assert points_gauge("vpts") == 3
        assert counts == before + 1  # repeated scrapes within 5 s count once
    finally:
        projector.close()
    clock.now += POINTS_EVERY_S
    assert points_gauge("vpts") == 3  # a closed index is not counted; the last count stays
    assert counts == before + 1
