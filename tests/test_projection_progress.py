"""Projections publish what they applied: per (broker epoch, tenant, raw partition) the highest
raw offset of the tenant's ledger entries, read from each entry's ``raw`` header. The graph
keeps it in its own namespace, the vector projector in memory; both on real servers here."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from falkordb import FalkorDB
from memstream.embed.hashing import HashingEmbedder
from memstream.events.envelope import EventAdapter
from memstream.graph.falkor import FalkorGraphStore
from memstream.kafka.clients import make_consumer, make_producer
from memstream.kafka.loop import BatchLoop
from memstream.kafka.topics import LEDGER, ensure_topics
from memstream.ledger.purge import purged_form
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.position import RAW_HEADER, raw_header
from memstream.projection.embedded import default_config
from memstream.projection.progress import applied_in
from memstream.projection.projectors import GraphProjector, VectorProjector
from memstream.projection.runner import ProjectionManager
from memstream.projection.versions import FileProjectionRegistry, registry_path
from memstream.settings import Settings
from memstream.stack.servers import Server
from memstream.vectors.edge import EdgeVectorIndex
from proving import sequencer
from pydantic import ValidationError
from scratchtopics import raw_event, scratch_topic
from stackproc import wait_until
from topicread import read_topic

EPOCH = "1764090000000000000"
NOW = "2025-10-01T00:00:00Z"
PARTITIONS = 3

# A record to produce: (partition, ledger entry, raw header value or None for none).
Rec = tuple[int, dict[str, Any], bytes | None]


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


@pytest.fixture
def graph(falkordb_server: Server) -> Iterator[FalkorGraphStore]:
    client = FalkorDB(port=falkordb_server.port, password=falkordb_server.password)
    store = FalkorGraphStore(client, f"progress_{uuid.uuid4().hex[:8]}")
    try:
        yield store
    finally:
        store.drop()


def entry(tenant: str, text: str) -> dict[str, Any]:
    """A ledger entry of its own stream (so every entry is the first of its chain)."""
    doc = {
        "id": f"e{uuid.uuid4().hex[:12]}",
        "tenant": tenant,
        "stream": f"s{uuid.uuid4().hex[:6]}",
        "agent": "Noor Haddad",
        "type": "message.user",
        "occurred_at": "2025-09-01T10:00:00Z",
        "payload": {"text": text},
    }
    out = sequence(RawRecord(orjson.dumps(doc), 0, 0, "raw"), SequencerState(), NOW)
    assert isinstance(out, Sequenced)
    return out.entry


def rec(p: int, tenant: str, raw: int, epoch: str = EPOCH) -> Rec:
    return p, entry(tenant, f"the deploy key rotated at {raw}"), raw_header(epoch, raw)


def as_messages(bootstrap: str, recs: list[Rec]) -> list[Message]:
    """``recs`` in a ledger-like topic of their own, read back with their headers."""
    topic = f"ledger-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap})
    for p, e, header in recs:
        headers = [("event_id", e["id"].encode())]
        if header is not None:
            headers.append((RAW_HEADER, header))
        key = f"{e['tenant']}/{e['stream']}".encode()
        producer.produce(topic, orjson.dumps(e), key=key, partition=p, headers=headers)
    assert producer.flush(10) == 0
    msgs = read_topic(bootstrap, topic)
    assert len(msgs) == len(recs)
    return sorted(msgs, key=lambda m: (m.partition() or 0, m.offset() or 0))


def test_graph_progress_after_batch(topics: str, graph: FalkorGraphStore) -> None:
    a, b = f"acme-{uuid.uuid4().hex[:6]}", f"Globex.{uuid.uuid4().hex[:6]}"
    gp = GraphProjector(graph, "vprog", make_producer(topics))
    try:
        gp.process(as_messages(topics, [rec(0, a, 5), rec(0, a, 9), rec(1, a, 3), rec(2, b, 40)]))
        assert graph.applied_raw(a) == {(EPOCH, 0): 9, (EPOCH, 1): 3}
        assert graph.applied_raw(b) == {(EPOCH, 2): 40}
        # Higher offsets move it on; an older batch (a redelivery) does not lower it.
        gp.process(as_messages(topics, [rec(1, a, 12), rec(2, a, 7), rec(0, b, 2)]))
        gp.process(as_messages(topics, [rec(0, a, 1), rec(1, a, 4), rec(2, b, 39)]))
        assert graph.applied_raw(a) == {(EPOCH, 0): 9, (EPOCH, 1): 12, (EPOCH, 2): 7}
        assert graph.applied_raw(b) == {(EPOCH, 0): 2, (EPOCH, 2): 40}
        # Another broker epoch is another log: kept apart, not compared.
        gp.process(as_messages(topics, [rec(0, a, 0, epoch="1764099999000000000")]))
        assert graph.applied_raw(a)[("1764099999000000000", 0)] == 0
        assert graph.applied_raw(a)[(EPOCH, 0)] == 9
        assert graph.applied_raw("nobody") == {}
        assert graph.counts(a)["events"] == 8
    finally:
        gp.close()


def test_restored_entries_do_not_advance_progress(topics: str, graph: FalkorGraphStore) -> None:
    tenant = f"t-{uuid.uuid4().hex[:6]}"
    restored = entry(tenant, "restored from the archive")
    purged = purged_form(entry(tenant, "a purged turn"), "e-tombstone")
    gp = GraphProjector(graph, "vprog", make_producer(topics))
    try:
        gp.process(as_messages(topics, [(0, restored, None), (1, purged, None)]))
        assert graph.events(tenant, [restored["id"]])[0].event_id == restored["id"]
        assert graph.applied_raw(tenant) == {}
        # In a batch beside live entries, only the live ones count.
        gp.process(as_messages(topics, [(0, entry(tenant, "again"), None), rec(0, tenant, 6)]))
        assert graph.applied_raw(tenant) == {(EPOCH, 0): 6}
    finally:
        gp.close()


def test_replayed_version_progress_starts_at_zero(
    topics: str, graph: FalkorGraphStore, falkordb_server: Server
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:6]}"
    msgs = as_messages(topics, [rec(0, tenant, 10), rec(1, tenant, 20), rec(0, tenant, 30)])
    client = FalkorDB(port=falkordb_server.port, password=falkordb_server.password)
    replay = FalkorGraphStore(client, f"progress_{uuid.uuid4().hex[:8]}")
    live = GraphProjector(graph, "v1", make_producer(topics))
    again = GraphProjector(replay, "v2", make_producer(topics))
    try:
        live.process(msgs)
        assert replay.applied_raw(tenant) == {}
        again.process(msgs[:1])  # the replay has applied the first entry only
        assert replay.applied_raw(tenant) == {(EPOCH, 0): 10}
        assert graph.applied_raw(tenant) == {(EPOCH, 0): 30, (EPOCH, 1): 20}
        replay.drop()  # a dropped version takes its progress with it
        assert replay.applied_raw(tenant) == {}
        assert graph.applied_raw(tenant) == {(EPOCH, 0): 30, (EPOCH, 1): 20}
    finally:
        live.close()
        again.close()
        replay.drop()


def test_graph_progress_survives_a_projector_restart(
    topics: str, graph: FalkorGraphStore, falkordb_server: Server
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:6]}"
    first = GraphProjector(graph, "vprog", make_producer(topics))
    first.process(as_messages(topics, [rec(2, tenant, 77)]))
    first.close()
    client = FalkorDB(port=falkordb_server.port, password=falkordb_server.password)
    reopened = FalkorGraphStore(client, graph.namespace)  # a new process's connection
    second = GraphProjector(reopened, "vprog", make_producer(topics))
    try:
        assert reopened.applied_raw(tenant) == {(EPOCH, 2): 77}
        second.process(as_messages(topics, [rec(2, tenant, 70), rec(1, tenant, 1)]))
        assert reopened.applied_raw(tenant) == {(EPOCH, 2): 77, (EPOCH, 1): 1}
    finally:
        second.close()


def test_vector_progress_after_batch(topics: str, tmp_path: Path) -> None:
    a, b = f"acme-{uuid.uuid4().hex[:6]}", f"b{uuid.uuid4().hex[:6]}"
    emb = HashingEmbedder()
    vp = VectorProjector(EdgeVectorIndex(tmp_path / "edge", "v", emb.dim), emb, "v1",
                         make_producer(topics))  # fmt: skip
    try:
        assert vp.applied_raw(a) == {}
        vp.process(as_messages(topics, [rec(0, a, 5), rec(1, a, 8), rec(1, b, 3)]))
        vp.process(as_messages(topics, [rec(0, a, 2), rec(1, a, 9), (2, entry(a, "old"), None)]))
        assert vp.applied_raw(a) == {(EPOCH, 0): 5, (EPOCH, 1): 9}
        assert vp.applied_raw(b) == {(EPOCH, 1): 3}
        got = vp.applied_raw(a)
        got[(EPOCH, 0)] = 10**6  # a copy: the reader cannot change the projector's
        assert vp.applied_raw(a)[(EPOCH, 0)] == 5
        assert vp.index.count(kinds=["event"]) == 6
    finally:
        vp.close()


def test_vector_progress_reads_while_batches_apply(topics: str, tmp_path: Path) -> None:
    """A reader in another thread sees the progress only ever grow."""
    tenant = f"t-{uuid.uuid4().hex[:6]}"
    emb = HashingEmbedder()
    vp = VectorProjector(EdgeVectorIndex(tmp_path / "edge", "v", emb.dim), emb, "v1",
                         make_producer(topics))  # fmt: skip
    batches = [
        as_messages(topics, [rec(p, tenant, 10 * i + p) for p in range(3)]) for i in range(5)
    ]
    seen: list[dict[tuple[str, int], int]] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.append(vp.applied_raw(tenant))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for msgs in batches:
            vp.process(msgs)
    finally:
        done.set()
        reader.join(30)
        vp.close()
    assert vp.applied_raw(tenant) == {(EPOCH, p): 40 + p for p in range(3)}
    for before, after in itertools.pairwise(seen):
        assert all(after.get(k, -1) >= v for k, v in before.items())


def test_hostile_tenants_and_headers_advance_nothing() -> None:
    # Upstream, a tenant id is ASCII only: these never reach the ledger ...
    hostile = ["acme\n", "ac\x00me", "Zoë", "a b", "", "-acme", "a" * 65, "acme/x"]
    for tenant in hostile:
        doc = {"id": "e1", "tenant": tenant, "stream": "s", "type": "message.user",
               "agent": "Noor", "occurred_at": NOW, "payload": {"text": "hi"}}  # fmt: skip
        with pytest.raises(ValidationError):
            EventAdapter.validate_python(doc)
    # ... and a projector reading one anyway (or a header that is not one) skips it.
    good = raw_header(EPOCH, 4)
    seen: list[tuple[object, bytes | None, int]] = [(t, good, 0) for t in hostile]
    seen += [(None, good, 0), (7, good, 0), (["acme"], good, 0)]
    seen += [("acme", b"17:1\x00", 1), ("acme", b"\x00", 1), ("acme", b"17:-3", 1)]
    seen += [("acme", None, 1), ("acme", "17:3", 1)]  # type: ignore[list-item]
    assert applied_in(seen) == {}
    assert applied_in([*seen, ("acme", good, 2), ("acme", raw_header(EPOCH, 3), 2)]) == {
        (EPOCH, "acme", 2): 4
    }


def test_nul_in_a_header_is_ignored_not_fatal(topics: str, graph: FalkorGraphStore) -> None:
    tenant = f"t-{uuid.uuid4().hex[:6]}"
    bad = entry(tenant, "header with a NUL")
    gp = GraphProjector(graph, "vprog", make_producer(topics))
    try:
        gp.process(
            as_messages(topics, [(0, bad, b"\x00" + EPOCH.encode() + b":5"), rec(1, tenant, 2)])
        )
        assert graph.events(tenant, [bad["id"]])[0].event_id == bad["id"]
        assert graph.applied_raw(tenant) == {(EPOCH, 1): 2}
    finally:
        gp.close()


def test_the_loop_exposes_its_committed_ledger_offsets(
    topics: str, graph: FalkorGraphStore
) -> None:
    """The low mark: what the loop committed after the projector's writes, read-only."""
    tenant = f"t-{uuid.uuid4().hex[:6]}"
    msgs = as_messages(topics, [rec(0, tenant, 1), rec(0, tenant, 2), rec(2, tenant, 3)])
    topic = msgs[0].topic()
    assert topic is not None
    gp = GraphProjector(graph, "vprog", make_producer(topics))
    loop = BatchLoop(
        consumer=make_consumer(topics, f"progress-{uuid.uuid4().hex[:8]}", Settings()),
        topic=topic,
        group="progress",
        component="graph-projector",
        process=gp.process,
        dead_letters=gp.dead_letters,
    )
    thread = threading.Thread(target=loop.run)
    thread.start()
    try:
        deadline = time.monotonic() + 90
        while loop.committed_offsets(topic) != {0: 2, 2: 1}:
            assert time.monotonic() < deadline, loop.committed_offsets(topic)
            assert thread.is_alive()
            time.sleep(0.1)
        assert graph.applied_raw(tenant) == {(EPOCH, 0): 2, (EPOCH, 2): 3}
        view = loop.committed_offsets(topic)
        view[0] = 0
        assert loop.committed_offsets(topic) == {0: 2, 2: 1}
        assert loop.committed_offsets("some-other-topic") == {}
    finally:
        loop.stop_event.set()
        thread.join(60)
        gp.close()
    assert not thread.is_alive()


class Seen:
    """A projector that keeps the offsets it was given, per ledger partition."""

    dead_letters = None  # no store that could refuse a record

    def __init__(self) -> None:
        self.offsets: dict[int, int] = {}

    def process(self, msgs: list[Message]) -> None:
        for m in msgs:
            if m.topic() == LEDGER:
                self.offsets[m.partition() or 0] = m.offset() or 0

    def close(self) -> None:
        pass

    def discard(self) -> None:
        pass


def test_the_manager_gives_each_version_s_committed_ledger_offsets(
    topics: str, tmp_path: Path
) -> None:
    registry = FileProjectionRegistry(registry_path(tmp_path))
    registry.register("v1", default_config())
    seen = Seen()
    group = f"progress-{uuid.uuid4().hex[:8]}"
    m = ProjectionManager(
        settings=Settings(data_dir=tmp_path),
        bootstrap=topics,
        registry=registry,
        component="vector-projector",
        factory=lambda _info: seen,
        group_of=lambda _info: group,
    )
    assert m.committed("v1") is None  # not running here
    producer = Producer({"bootstrap.servers": topics})
    e = entry(f"t-{uuid.uuid4().hex[:6]}", "a real entry: other tests read this ledger too")
    key = f"{e['tenant']}/{e['stream']}".encode()
    producer.produce(LEDGER, orjson.dumps(e), key=key, partition=1)
    assert producer.flush(10) == 0
    m.sync()
    try:
        wait_until(lambda: 1 in seen.offsets, 90, "the ledger record")
        mine = seen.offsets[1]
        wait_until(lambda: (m.committed("v1") or {}).get(1, -1) > mine, 90, "the commit")
        assert m.committed("nope") is None
    finally:
        m.stop_all()


def test_sequenced_entries_advance_progress_to_their_raw_offsets(
    topics: str, graph: FalkorGraphStore
) -> None:
    """The path end to end: raw records -> sequencer (raw header) -> ledger -> graph."""
    tenant = f"seq{uuid.uuid4().hex[:6]}"
    values = [
        raw_event(tenant, 0),
        raw_event(tenant, 0),
        b"\x00 not an event",
        raw_event(tenant, 1),
    ]
    _, raw = scratch_topic(topics, values, key=f"{tenant}/s1".encode())
    sequencer(topics, make_producer(topics), epoch=EPOCH).process(raw)
    ledger = [
        m for m in read_topic(topics, LEDGER) if (m.key() or b"").startswith(tenant.encode() + b"/")
    ]
    assert len(ledger) == 2
    gp = GraphProjector(graph, "vprog", make_producer(topics))
    try:
        gp.process(ledger)
        # Offset 3 is the last raw record that became an entry: the duplicate (1) and the
        # dead letter (2) never reach the ledger, rule 2 of the read covers them.
        assert graph.applied_raw(tenant) == {(EPOCH, 0): 3}
    finally:
        gp.close()
