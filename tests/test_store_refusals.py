"""Records a store refuses, against the real stores: FalkorDB refuses a NUL byte, Qdrant
Edge a string that is not UTF-8; every other record of the batch is written, the refused one
is dead-lettered with the store's reason and its offset, and the offsets commit."""

from __future__ import annotations

import base64
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Message, TopicPartition
from falkordb import FalkorDB
from memstream.embed.registry import get_embedder
from memstream.graph.falkor import FalkorGraphStore, refusal
from memstream.graph.port import GraphRefused, GraphUnavailable
from memstream.kafka.clients import make_consumer, make_producer
from memstream.kafka.loop import BatchLoop
from memstream.kafka.topics import DLQ, ensure_topics
from memstream.ledger.canonical import GENESIS_HASH
from memstream.ledger.entry import build_entry
from memstream.projection.extract import extract, graph_batch
from memstream.projection.projectors import GraphProjector, VectorProjector
from memstream.records.projected import VectorPoint
from memstream.settings import Settings
from memstream.stack.net import free_port
from memstream.stack.servers import Server, start_falkordb
from memstream.store_errors import LEFT_OUT, content_free
from memstream.vectors.edge import EdgeVectorIndex
from memstream.vectors.port import VectorRefused
from scratchtopics import scratch_topic
from topicread import read_topic

NOW = "2025-10-01T00:00:00Z"
NUL_TEXT, NUL_TARGET, MALFORMED = 7, 12, 15
N = 20


def chain(docs: list[dict[str, Any]]) -> list[bytes]:
    """Ledger entries as the sequencer writes them (hash-chained), built without the
    envelope check: what an archive written before the edge refused NUL holds."""
    out, prev = [], GENESIS_HASH
    for seq, doc in enumerate(docs, start=1):
        kafka = {"topic": "memory.events.raw", "partition": 0, "offset": seq}
        entry, value = build_entry(dict(doc), seq, prev, NOW, kafka)
        prev = entry["hash"]
        out.append(value)
    return out


def doc(i: int, tenant: str = "t") -> dict[str, Any]:
    return {
        "id": f"{tenant}-e{i}",
        "tenant": tenant,
        "stream": "s1",
        "agent": "Marta Lopez",
        "type": "message.user",
        "occurred_at": "2025-09-01T10:00:00Z",
        "payload": {"text": f"Met Tom Berg in Oslo ({i})"},
    }


def workload(tenant: str) -> list[bytes]:
    docs = [doc(i, tenant) for i in range(N)]
    docs[NUL_TEXT]["payload"] = {"text": "a\x00b met Tom Berg"}
    docs[NUL_TARGET]["type"] = "memory.feedback"
    docs[NUL_TARGET]["payload"] = {"target_ids": [f"{tenant}-e1", "x\x00y"], "signal": 1.0}
    values = chain(docs)
    values[MALFORMED] = b"\x00 not json \xff"
    return values


def dead_letters(bootstrap: str, topic: str) -> dict[int, dict[str, Any]]:
    out = {}
    for m in read_topic(bootstrap, DLQ):
        doc = orjson.loads(m.value() or b"{}")
        if doc["source"]["topic"] == topic:
            assert doc["source"]["offset"] not in out, "dead-lettered twice"
            out[doc["source"]["offset"]] = doc
    return out


def run_until(bootstrap: str, loop: BatchLoop, done: Callable[[], bool], topic: str) -> int:
    """Run ``loop`` on ``topic`` until ``done()`` after a batch; the committed offset."""
    inner = loop.process

    def process(msgs: list[Message]) -> None:
        inner(msgs)
        if done():
            loop.stop_event.set()  # checked after this batch is committed

    loop.process = process
    safety = threading.Timer(90, loop.stop_event.set)
    safety.start()
    try:
        loop.run()
    finally:
        safety.cancel()
    check = make_consumer(bootstrap, loop.group, Settings())
    try:
        [committed] = check.committed([TopicPartition(topic, 0)], timeout=10)
        return int(committed.offset)
    finally:
        check.close()


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


@pytest.fixture
def graph(falkordb_server: Server) -> Iterator[FalkorGraphStore]:
    client = FalkorDB(port=falkordb_server.port, password=falkordb_server.password)
    store = FalkorGraphStore(client, f"ref_{uuid.uuid4().hex[:8]}")
    try:
        yield store
    finally:
        store.drop()


def loop_for(bootstrap: str, topic: str, projector: GraphProjector | VectorProjector) -> BatchLoop:
    group = f"refusals-{uuid.uuid4().hex[:8]}"
    loop = BatchLoop(
        consumer=make_consumer(bootstrap, group, Settings()),
        topic=topic,
        group=group,
        component=projector.component,
        process=projector.process,
        dead_letters=projector.dead_letters,
    )
    return loop


def test_falkordb_refuses_the_nul_records_alone_and_the_rest_commits(
    topics: str, graph: FalkorGraphStore
) -> None:
    values = workload("t")
    topic, _ = scratch_topic(topics, values, prefix="refusals")
    projector = GraphProjector(graph, "vtest", make_producer(topics))
    good = N - 3
    loop = loop_for(topics, topic, projector)
    try:
        committed = run_until(topics, loop, lambda: graph.counts("t")["events"] >= good, topic)
    finally:
        projector.close()
    assert committed == N  # past the refused and the malformed records
    assert graph.counts("t")["events"] == good
    events = {e.event_id for e in graph.events("t", [f"t-e{i}" for i in range(N)])}
    assert events == {f"t-e{i}" for i in range(N)} - {f"t-e{NUL_TEXT}", f"t-e{NUL_TARGET}"} - {
        f"t-e{MALFORMED}"
    }
    dead = dead_letters(topics, topic)
    assert sorted(dead) == [NUL_TEXT, NUL_TARGET, MALFORMED]
    text = dead[NUL_TEXT]
    assert text["reason"] == (
        f"graph-projector ({loop.group}): graph refused: FalkorDB cannot hold a NUL "
        "character (U+0000) in a string: $rows[0].text"
    )
    assert text["source"] == {"topic": topic, "partition": 0, "offset": NUL_TEXT}
    assert base64.b64decode(text["raw_b64"]) == values[NUL_TEXT]
    # The extractor reads a feedback payload through its model, whose id rule refuses a NUL:
    # the record is dead-lettered as malformed before the store sees it.
    target = dead[NUL_TARGET]["reason"]
    assert "malformed ledger entry" in target and "ids take no control characters" in target
    assert (
        "malformed ledger entry" in dead[MALFORMED]["reason"]
        or "undecodable" in dead[MALFORMED]["reason"]
    )


def test_qdrant_edge_holds_nul_and_the_vector_projection_writes_every_record(
    topics: str, tmp_path: Path
) -> None:
    values = workload("v")
    topic, _ = scratch_topic(topics, values, prefix="refusals")
    index = EdgeVectorIndex(tmp_path / "edge", "refusals", 256)
    projector = VectorProjector(index, get_embedder(None), "vtest", make_producer(topics))
    loop = loop_for(topics, topic, projector)
    try:
        committed = run_until(topics, loop, lambda: index.count("v", ["event"]) >= N - 2, topic)
        assert committed == N
        # all but the malformed record and the feedback whose target id holds a NUL: the
        # payload model's id rule refuses that one before any store sees it
        assert index.count("v", ["event"]) == N - 2
        hits = index.query("v", None, "Tom Berg", limit=50, mode="sparse")
        assert any(h.payload["text"] == "a\x00b met Tom Berg" for h in hits)
    finally:
        projector.close()
    dead = dead_letters(topics, topic)
    assert sorted(dead) == [NUL_TARGET, MALFORMED]
    assert "ids take no control characters" in dead[NUL_TARGET]["reason"]


def test_qdrant_edge_refuses_a_lone_surrogate(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path / "edge", "surrogates", 4)
    payload = {"tenant": "t", "kind": "event", "event_id": "e1"}
    good = VectorPoint(point_key="ok", dense=[0.1] * 4, text="fine", payload=payload)
    try:
        for field in ("stream", "metadata"):  # a filtered field, and one the adapter packs
            bad = good.model_copy(
                update={"point_key": field, "payload": {**payload, field: "a\ud800b"}}
            )
            with pytest.raises(VectorRefused, match="not UTF-8"):
                index.upsert([bad])
        index.upsert([good])
        assert index.count("t") == 1
    finally:
        index.close()


def test_falkordb_refusals_are_found_before_the_round_trip() -> None:
    assert refusal({"rows": [{"text": "fine"}, {"text": "ok", "tags": ["a", "b\x00"]}]}) == (
        "FalkorDB cannot hold a NUL character (U+0000) in a string: $rows[1].tags[1]"
    )
    assert refusal({"rows": [{"text": "a\ud800"}]}) == (
        "a string is not valid UTF-8 (it holds a lone surrogate)"
    )
    # the six characters \u0000 are text like any other
    assert refusal({"rows": [{"text": "printf('\\u0000')"}]}) is None
    assert refusal({"n": 1, "rows": [{"text": "ünïcödé 😀", "c": "\x01\x1f\x7f"}]}) is None


def test_falkordb_refusals_say_whether_the_data_was_pointed_at(graph: FalkorGraphStore) -> None:
    with pytest.raises(
        GraphRefused, match="FalkorDB refused the query: errMsg: Invalid input"
    ) as server:
        graph._run("RETURN $x", {"x": float("nan")})  # rendered as text the server refuses
    assert server.value.in_data is False  # the server's answer: the data's, or our query's
    with pytest.raises(GraphRefused, match="backtick") as client:
        graph._run("UNWIND $rows AS r RETURN r", {"rows": [{"a`b": 1}]})
    assert client.value.in_data is True
    nul = graph_batch([extract(orjson.loads(chain([doc(0) | {"agent": "Ma\x00ria"}])[0]))])
    with pytest.raises(
        GraphRefused, match=r"NUL character \(U\+0000\) in a string: \$rows\[0\]"
    ) as early:
        graph.write(nul)
    assert early.value.in_data is True
    assert graph.counts()["events"] == 0  # refused before the first step


def test_a_falkordb_that_went_down_is_unavailable_not_refusing(tmp_path: Path) -> None:
    server = start_falkordb(free_port(), tmp_path / "data", tmp_path, password="refusals-pw")
    try:
        store = FalkorGraphStore(FalkorDB(port=server.port, password=server.password), "gone")
        store.ensure_schema()
    finally:
        server.stop()
    batch = graph_batch([extract(orjson.loads(chain([doc(0)])[0]))])
    with pytest.raises(GraphUnavailable, match="FalkorDB unreachable"):
        store.write(batch)
    with pytest.raises(GraphUnavailable):
        store.events("t", ["t-e0"])
    with pytest.raises(GraphUnavailable):
        store.compact()


def test_a_dead_letter_keeps_only_the_content_free_part_of_a_refusal(
    graph: FalkorGraphStore,
) -> None:
    with pytest.raises(GraphRefused) as server:
        graph._run("RETURN $s, $x", {"s": "Zoë Quist-Marlowe", "x": float("nan")})
    # FalkorDB echoes the query as rendered with its parameters (errCtx) ...
    assert "errCtx: CYPHER" in server.value.reason, server.value.reason
    kept = server.value.content_free
    # ... which a dead letter leaves out, keeping what the server found wrong.
    assert kept.startswith("FalkorDB refused the query: errMsg: Invalid input"), kept
    assert "CYPHER" not in kept and "errCtx" not in kept and kept.endswith(LEFT_OUT)
    # the same when the echo holds a record's words, or the message quotes them
    echoed = GraphRefused(
        "FalkorDB refused the query: errMsg: Invalid input 'Z': expected ... errCtx: "
        'CYPHER `s`="Zoë Quist-Marlowe" RETURN $s errCtxOffset: 9'
    )
    assert "Quist" not in echoed.content_free and "Z" not in echoed.content_free.split(":")[-1]
    assert content_free('Qdrant refused the write (400): {"status": "Quist"}') == (
        f"Qdrant refused the write (400) {LEFT_OUT}"
    )
    assert content_free("bad\nZoë Quist") == f"bad {LEFT_OUT}"
    # a reason our adapter wrote (a path, no content) is kept whole
    nul = GraphRefused("FalkorDB cannot hold a NUL character (U+0000) in a string: $rows[0].x")
    assert nul.content_free == nul.reason
