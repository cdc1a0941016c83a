"""Projectors obey memory.purge tombstones: live and when a new version replays the ledger."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from falkordb import FalkorDB
from memstream.embed.hashing import HashingEmbedder
from memstream.graph.falkor import FalkorGraphStore
from memstream.kafka.clients import make_producer
from memstream.kafka.topics import DLQ, ensure_topics
from memstream.ledger.purge import purged_form, subject_digest
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.metrics import PURGES_APPLIED
from memstream.projection.projectors import GraphProjector, VectorProjector
from memstream.settings import Settings
from memstream.stack.servers import Server
from memstream.vectors.edge import EdgeVectorIndex
from topicread import read_topic

NOW = "2025-10-01T00:00:00Z"
SECRET = "Éloïse Martin-Duval déménage à Lisbonne"


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


def entries(tenant: str, marker: str) -> list[dict[str, Any]]:
    """Éloïse's turn and fact (e1, e2), the user's turn (e3), then the tombstone (e4)."""
    docs: list[dict[str, Any]] = [
        {"type": "message.user", "payload": {"text": f"{SECRET} {marker}"}},
        {"type": "fact.asserted", "payload": {"subject": "Éloïse Martin-Duval",
                                              "predicate": "lives_in", "object": "Lisbonne"}},
        {"type": "message.user", "payload": {"text": "the user bought a celadon bowl"}},
        {"type": "memory.purge", "payload": {"subject": subject_digest(b"secret", tenant, "eloise"),
                                             "event_ids": ["e1", "e2"], "reason": "request"}},
    ]  # fmt: skip
    state, out = SequencerState(), []
    for i, d in enumerate(docs):
        doc = {"id": f"e{i + 1}", "tenant": tenant, "stream": "chat", "agent": "the user",
               "occurred_at": f"2025-03-01T09:0{i}:00Z", **d}  # fmt: skip
        o = sequence(RawRecord(orjson.dumps(doc), 0, i, "raw"), state, NOW)
        assert isinstance(o, Sequenced)
        out.append(o.entry)
    return out


def as_messages(bootstrap: str, values: list[bytes]) -> tuple[str, list[Message]]:
    topic = f"purge-ledger-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(10) == 0
    return topic, sorted(read_topic(bootstrap, topic), key=lambda m: m.offset() or 0)


def holding(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@pytest.mark.parametrize("batch", [1, 4])
def test_a_replayed_ledger_ends_without_the_purged_data(
    topics: str, falkordb_server: Server, tmp_path: Path, batch: int
) -> None:
    tenant, marker = f"t-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    _, msgs = as_messages(topics, [orjson.dumps(e) for e in entries(tenant, marker)])
    client = FalkorDB(port=falkordb_server.port, password=falkordb_server.password)
    graph = FalkorGraphStore(client, f"purge_{uuid.uuid4().hex[:8]}")
    emb = HashingEmbedder()
    index = EdgeVectorIndex(tmp_path / "edge", "v", emb.dim)
    gp = GraphProjector(graph, "vpurge", make_producer(topics))
    vp = VectorProjector(index, emb, "vpurge", make_producer(topics))
    applied = PURGES_APPLIED.labels("graph-projector", "graph")._value.get()
    try:
        for i in range(0, len(msgs), batch):  # the tombstone comes after what it purges
            gp.process(msgs[i : i + batch])
            vp.process(msgs[i : i + batch])
        assert graph.events(tenant, ["e1", "e2", "e3"])[0].event_id == "e3"
        assert len(graph.events(tenant, ["e1", "e2"])) == 0 and graph.facts(tenant) == []
        assert "eloise martin-duval" not in {e.key for e in graph.entities(tenant)}
        q = emb.embed([SECRET])[0].tolist()
        hits = index.query(tenant, q, SECRET, limit=10)
        assert {h.payload["event_id"] for h in hits} <= {"e3", "e4"}
        data_dir = Path(str(client.connection.config_get("dir")["dir"]))
        assert holding(data_dir, marker) == [] and holding(tmp_path / "edge", marker) == []
        assert PURGES_APPLIED.labels("graph-projector", "graph")._value.get() == applied + 1
    finally:
        gp.close()
        vp.close()
        graph.drop()


def test_purged_entries_are_skipped_not_dead_lettered(
    topics: str, falkordb_server: Server, tmp_path: Path
) -> None:
    tenant, marker = f"t-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    ledger = entries(tenant, marker)
    restored = [purged_form(e, "e4") if e["id"] in ("e1", "e2") else e for e in ledger]
    topic, msgs = as_messages(topics, [orjson.dumps(e) for e in restored])
    graph = FalkorGraphStore(
        FalkorDB(port=falkordb_server.port, password=falkordb_server.password),
        f"p_{uuid.uuid4().hex[:8]}",
    )
    gp = GraphProjector(graph, "vpurge", make_producer(topics))
    try:
        gp.process(msgs)
        assert [e.event_id for e in graph.recent(tenant)] == ["e4", "e3"]
    finally:
        gp.close()
        graph.drop()
    dead = [m for m in read_topic(topics, DLQ) if topic.encode() in (m.value() or b"")]
    assert dead == []
