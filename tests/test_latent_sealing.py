"""Latent artifacts sealed on ``memory.latents``; a purge shreds every artifact built from a
purged event (the rule, then the latent builder and a replayed projector on a real broker)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import latentdata
import orjson
import pytest
from confluent_kafka import Message, Producer
from falkordb import FalkorDB
from memstream.embed.hashing import HashingEmbedder
from memstream.graph.falkor import FalkorGraphStore
from memstream.kafka.clients import make_producer
from memstream.kafka.topics import DLQ, LATENT_INPUTS, LATENTS, LEDGER, ensure_topics
from memstream.ledger.opening import EntryOpener
from memstream.ledger.purge import subject_digest
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.metrics import PURGE_ITEMS_REMOVED
from memstream.projection.latents import decode_artifact, decode_artifacts
from memstream.projection.projectors import GraphProjector, VectorProjector
from memstream.records.latent import LatentArtifact, LatentDeletion
from memstream.settings import Settings
from memstream.shred.artifacts import CLEAR_FIELDS, open_artifact, seal_artifact
from memstream.shred.seal import SealBroken
from memstream.shred.sealer import ArtifactSealer
from memstream.shred.sqlite import SqliteDataKeys
from memstream.stack.servers import Server
from memstream.vectors.edge import EdgeVectorIndex
from memstream_latents.main import COMPONENT, STORE, LatentWorker
from topicread import read_topic

# Every partition of the latent topics: a replica alone holds them all.
ALL_PARTITIONS = list(range(Settings().topic_partitions))

PERSON = "Éloïse Martin-Duval"
# Words only the purged events hold (long enough never to occur by chance in base64).
MARKERS = ("lisbon", "balcony", "éloïse", "eloise", "martin-duval", "sencha")
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
EMB = HashingEmbedder(64)


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[SqliteDataKeys]:
    store = SqliteDataKeys(tmp_path / "data-keys.sqlite")
    try:
        yield store
    finally:
        store.close()


def _artifact(tenant: str = "atelier\x00nord") -> LatentArtifact:
    refs = [latentdata.ref(tenant, "e1", "chat", 1), latentdata.ref(tenant, "e2", "chat", 2)]
    return latentdata.episode(
        tenant, "chat", f"{PERSON} moves to Lisbon; the flat has a balcony\x01\x00", refs,
        key_terms=["Lisbon", "balcony"], speakers=[PERSON],
    )  # fmt: skip


def _sealed(a: LatentArtifact, keys: SqliteDataKeys) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(ArtifactSealer(keys).encode([a])[0])
    return doc


# -- the rule ---------------------------------------------------------------------------------


def test_an_artifact_round_trips_and_keeps_only_ids_and_type_clear(keys: SqliteDataKeys) -> None:
    a = _artifact()
    [raw] = ArtifactSealer(keys).encode([a])
    doc = orjson.loads(raw)
    assert set(doc) == {*CLEAR_FIELDS, "sealed"}
    assert doc["artifact_id"] == a.artifact_id and doc["tenant"] == a.tenant
    for word in (*MARKERS, '"summary"', '"group_key"', '"source_event_refs"', '"stale_at"'):
        assert word.encode() not in raw.lower(), word
    assert decode_artifact(raw, EntryOpener(keys)) == a
    # A stale re-send seals under the same key, with another nonce.
    [again] = ArtifactSealer(keys).encode([latentdata.stale(a)])
    assert orjson.loads(again)["sealed"]["n"] != doc["sealed"]["n"]
    opened = decode_artifact(again, EntryOpener(keys))
    assert isinstance(opened, LatentArtifact) and opened.stale_at is not None
    assert len(keys.get(a.tenant, "latent", [a.artifact_id])) == 1


def test_deletions_stay_clear_and_sealing_off_writes_plain_json(keys: SqliteDataKeys) -> None:
    a = _artifact("t1")
    gone = LatentDeletion(artifact_id=a.artifact_id, tenant="t1", deleted_by="p-1", deleted_at=T0)
    [sealed_a, deletion] = ArtifactSealer(keys).encode([a, gone])
    assert orjson.loads(deletion) == gone.model_dump(mode="json")
    assert decode_artifact(deletion) == gone  # no key store needed for ids
    assert b"sealed" in sealed_a
    [plain] = ArtifactSealer(None).encode([a])
    assert decode_artifact(plain) == a
    # A sealed record read without a key store is our bug: loud, never a dead letter.
    with pytest.raises(RuntimeError, match="without a data key store"):
        decode_artifact(sealed_a)


def test_tampered_or_moved_content_does_not_open(keys: SqliteDataKeys) -> None:
    a = _artifact("t1")
    doc = _sealed(a, keys)
    key = keys.get("t1", "latent", [a.artifact_id])[a.artifact_id]
    ct = bytearray(doc["sealed"]["c"].encode())
    ct[10] = ord("A") if ct[10] != ord("A") else ord("B")
    tampered = {**doc, "sealed": {**doc["sealed"], "c": ct.decode()}}
    with pytest.raises(SealBroken):
        open_artifact(tampered, key)
    # The same ciphertext under another id, tenant or type (same key): the AAD refuses it.
    for field, value in (("artifact_id", "lat-" + "0" * 24), ("tenant", "t2"),
                         ("artifact_type", "preference_latent")):  # fmt: skip
        with pytest.raises(SealBroken):
            open_artifact({**doc, field: value}, key)
    with pytest.raises(SealBroken, match="clear fields"):
        open_artifact({**doc, "summary": "smuggled"}, key)
    # Through the decoder: a reason for a dead letter, never an exception.
    opener = EntryOpener(keys)
    reasons = decode_artifacts([orjson.dumps(tampered), orjson.dumps({**doc, "tenant": 7})], opener)
    assert str(reasons[0]).startswith("sealed latent artifact does not open")
    assert reasons[1] == "sealed latent artifact without a string tenant and artifact_id"
    assert open_artifact(seal_artifact(a.model_dump(mode="json"), key), key) == a.model_dump(
        mode="json"
    )


def test_an_artifact_whose_key_is_gone_reads_as_nothing(keys: SqliteDataKeys) -> None:
    a, b = (
        _artifact("t1"),
        latentdata.preference("t1", "Zoë Martin", {"tea": "oolong"}, [latentdata.ref("t1", "e9")]),
    )
    raws = ArtifactSealer(keys).encode([a, b])
    assert keys.destroy("t1", "latent", [a.artifact_id]) == 1
    assert decode_artifacts(raws, EntryOpener(keys)) == [None, b]
    assert keys.destroy("t1", "latent", [a.artifact_id]) == 0
    # Another tenant's artifact of the same id keeps its own key.
    other = a.model_copy(update={"tenant": "t2"})
    assert decode_artifacts(ArtifactSealer(keys).encode([other]), EntryOpener(keys)) == [other]


def test_an_artifact_rebuilt_after_its_key_was_destroyed_is_not_written(
    keys: SqliteDataKeys,
) -> None:
    """The builder may rebuild an artifact before the tombstone reaches it: its key is gone,
    so it is not sealed under a new one (the older copies of the id would no longer open, and
    the purged content would be readable again)."""
    a = _artifact("t1")
    first = ArtifactSealer(keys).encode([a])
    keys.destroy("t1", "latent", [a.artifact_id])
    rebuilt = a.model_copy(update={"summary": "rebuilt from the same purged events"})
    gone = LatentDeletion(
        artifact_id=a.artifact_id, tenant="t1", deleted_by="tomb-1", deleted_at=T0
    )
    fresh = _artifact("t2")
    again, deletion, other = ArtifactSealer(keys).encode([rebuilt, gone, fresh])
    assert again is None
    assert deletion is not None and orjson.loads(deletion)["deleted_by"] == "tomb-1"
    assert other is not None and decode_artifacts([other], EntryOpener(keys)) == [fresh]
    assert keys.get("t1", "latent", [a.artifact_id]) == {}
    assert decode_artifacts([v for v in first if v], EntryOpener(keys)) == [None]
    # An id the purge reached before the builder made its key is forbidden as well.
    later = _artifact("t3")
    keys.destroy("t3", "latent", [later.artifact_id])
    assert ArtifactSealer(keys).encode([later]) == [None]


# -- on a real broker -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


class SealedLedger:
    """Events sealed under their data keys and sequenced as the pipeline does, on the ledger."""

    def __init__(self, bootstrap: str, tenant: str, keys: SqliteDataKeys) -> None:
        self.bootstrap, self.tenant, self.keys = bootstrap, tenant, keys
        self.state = SequencerState()
        self.seqs: dict[str, int] = {}
        self.producer = Producer({"bootstrap.servers": bootstrap})

    def add(self, type_: str, payload: dict[str, Any], at: datetime, stream: str) -> str:
        n = self.seqs[stream] = self.seqs.get(stream, 0) + 1
        doc = {"id": f"{stream}-{n}", "tenant": self.tenant, "stream": stream, "agent": "Inès",
               "type": type_, "occurred_at": at.isoformat(), "payload": payload}  # fmt: skip
        ekeys = self.keys.create_or_get(self.tenant, "event", [doc["id"]])
        key_map = {(self.tenant, i): k for i, k in ekeys.items()}
        raw = RawRecord(orjson.dumps(doc), 0, sum(self.seqs.values()), "raw")
        out = sequence(raw, self.state, at.isoformat(), key_map)
        assert isinstance(out, Sequenced), out
        self.producer.produce(LEDGER, out.value, key=f"{self.tenant}/{stream}".encode())
        # The latent builder's copy, as its route loop makes it: keyed by tenant alone.
        self.producer.produce(LATENT_INPUTS, out.value, key=self.tenant.encode())
        assert self.producer.flush(10) == 0
        return str(doc["id"])

    def say(self, text: str, at: datetime) -> str:
        return self.add("message.user", {"text": text}, at, "chat")

    def entry(self, event_id: str) -> Message:
        """The entry's copy the latent builder reads."""
        [m] = [m for m in self.messages(LATENT_INPUTS)
               if orjson.loads(m.value() or b"")["id"] == event_id]  # fmt: skip
        return m

    def messages(self, topic: str) -> list[Message]:
        mine = self.tenant.encode()
        return [m for m in read_topic(self.bootstrap, topic) if (m.key() or b"").startswith(mine)]


def _removed_keys() -> float:
    value: float = PURGE_ITEMS_REMOVED.labels(COMPONENT, STORE, "artifact_keys")._value.get()
    return value


@pytest.fixture
def graph(falkordb_server: Server) -> Iterator[FalkorGraphStore]:
    store = FalkorGraphStore(
        FalkorDB(port=falkordb_server.port, password=falkordb_server.password),
        f"seal_{uuid.uuid4().hex[:8]}",
    )
    try:
        yield store
    finally:
        store.drop()


def _build_then_purge(
    ledger: SealedLedger, worker: LatentWorker
) -> tuple[list[str], list[LatentArtifact]]:
    """Events about the person and about others, artifacts built from them (one preference
    superseded), then the purge of the person's events; (purged ids, every artifact record
    on the topic as it opened before the purge)."""
    ledger.say(f"{PERSON} is moving to Lisbon in April.", T0)
    ledger.say(f"{PERSON} asked me to water her ferns.", T0 + timedelta(minutes=1))
    ledger.say(f"The new flat of {PERSON} has a balcony.", T0 + timedelta(minutes=2))
    ledger.say("My celadon bowl cracked in the kiln.", T0 + timedelta(minutes=3))
    pref = {"key": "tea", "value": "mint", "subject": PERSON}
    ledger.add("preference.set", pref, T0, "prefs")
    ledger.add("preference.set", {"key": "tea", "value": "oolong", "subject": "Zoë Martin"},
               T0, "prefs")  # fmt: skip
    worker.rebuild(ALL_PARTITIONS)
    # The person's preference changes: the built one is re-sent stale, superseded.
    new = ledger.add("preference.set", {**pref, "value": "sencha"}, T0 + timedelta(days=1), "prefs")
    worker.process([ledger.entry(new)])
    worker.idle()
    raws = [m.value() for m in ledger.messages(LATENTS)]
    built = [a for a in decode_artifacts(raws, worker.opener) if isinstance(a, LatentArtifact)]
    purged = ["chat-1", "chat-2", "chat-3", "prefs-1", "prefs-3"]
    digest = subject_digest(b"secret", ledger.tenant, "eloise martin-duval")
    tomb = ledger.add("memory.purge", {"subject": digest, "event_ids": purged},
                      T0 + timedelta(days=2), "purges")  # fmt: skip
    ledger.keys.destroy(ledger.tenant, "event", purged)  # what the purge route does
    worker.process([ledger.entry(tomb)])
    return purged, built


def test_a_purge_shreds_every_artifact_built_from_its_events_and_a_replay_projects_none(
    topics: str, keys: SqliteDataKeys, graph: FalkorGraphStore, tmp_path: Path
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    ledger = SealedLedger(topics, tenant, keys)
    clock = lambda: datetime(2026, 1, 1, tzinfo=UTC)  # noqa: E731
    opener = EntryOpener(keys)

    def worker() -> LatentWorker:
        return LatentWorker(topics, make_producer(topics), EMB, clock, opener, ArtifactSealer(keys))

    before = _removed_keys()
    purged, built = _build_then_purge(ledger, worker())
    # Before the purge, the person was in artifacts of every kind, one of them stale.
    derived = {a.artifact_id for a in built if set(purged) & set(a.source_ids)}
    kept = {a.artifact_id for a in built} - derived
    assert any("lisbon" in a.summary for a in built)
    assert any(a.stale_at is not None and a.artifact_id in derived for a in built)
    assert {a.group_key for a in built if a.artifact_id in derived} >= {
        "preference:eloise martin-duval",
        "episode:chat:chat-1",
        "episode:prefs:prefs-1",
    }

    records = ledger.messages(LATENTS)
    docs = [orjson.loads(r.value() or b"") for r in records]
    assert all(set(d) == {*CLEAR_FIELDS, "sealed"} for d in docs if "deleted_by" not in d)
    for r in records:  # a plain consumer, from the beginning: nothing of the person
        for word in MARKERS:
            assert word.encode() not in (r.value() or b"").lower(), word
    # Every artifact ever built from a purged event is shredded, current, stale or
    # superseded; the others (and what was rebuilt without the purged events) open.
    ids = {d["artifact_id"] for d in docs}
    alive = set(keys.get(tenant, "latent", ids))
    assert derived.isdisjoint(alive) and kept <= alive
    deleted = {d["artifact_id"] for d in docs if "deleted_by" in d}
    assert deleted and deleted < derived  # stale ones are never deleted, yet shredded
    assert _removed_keys() - before == len(derived)
    rebuilt = [a for a in decode_artifacts([r.value() for r in records], opener)
               if isinstance(a, LatentArtifact) and a.artifact_id not in kept]  # fmt: skip
    assert {a.group_key for a in rebuilt} >= {"episode:chat:chat-4", "episode:prefs:prefs-2"}
    assert all(not set(purged) & set(a.source_ids) for a in rebuilt)

    # Restarted: the builder restores from the topic, applies the tombstone again, destroys
    # nothing more and holds nothing built from a purged event.
    again = worker()
    again.rebuild(ALL_PARTITIONS)
    assert _removed_keys() - before == len(derived)
    assert all(not set(purged) & set(a.source_ids) for a in again.builder.current.values()
               if a.tenant == tenant)  # fmt: skip

    # A replayed version: a fresh projector reads both topics from the start, the
    # artifacts after the tombstone (the order that used to bring them back).
    index = EdgeVectorIndex(tmp_path / "edge", "seal", EMB.dim)
    projectors = [
        GraphProjector(graph, "vrep", make_producer(topics), opener=opener),
        VectorProjector(index, EMB, "vrep", make_producer(topics), opener=opener),
    ]
    try:
        for p in projectors:
            p.process(ledger.messages(LEDGER))
            p.process(ledger.messages(LATENTS))
        in_graph = graph.latents(tenant, include_stale=True)
        assert {a.artifact_id for a in in_graph} == set(alive)
        assert "preference:zoe martin" in {a.group_key for a in in_graph}
        for a in in_graph:
            assert not set(purged) & set(a.source_ids)
            assert not any(w in a.model_dump_json().lower() for w in MARKERS)
        hits = index.query(tenant, EMB.embed(["Lisbon"])[0].tolist(), "Lisbon balcony",
                           limit=50, kinds=["latent"])  # fmt: skip
        assert hits and {h.payload["artifact_id"] for h in hits} <= set(alive)
        tea = index.query(tenant, EMB.embed(["tea"])[0].tolist(), "Zoë tea", kinds=["latent"])
        assert any("zoe martin" in str(h.payload["text"]) for h in tea)
    finally:
        for p in projectors:
            p.close()
    # Shredded artifacts are skipped, never dead letters.
    for m in read_topic(topics, DLQ):
        doc = orjson.loads(m.value() or b"{}")
        assert not (doc["source"]["topic"] == LATENTS and m.key() == tenant.encode()), doc
