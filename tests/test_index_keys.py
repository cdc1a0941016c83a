"""Context keys: what an event point is found by (speaker, day, the message it follows),
apart from the text checkout shows; the same keys live, in batches, after a restart and in a
replay; a purge of a message takes its words out of the next message's key."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from memstream.embed.hashing import HashingEmbedder
from memstream.kafka.clients import make_producer
from memstream.kafka.topics import ensure_topics
from memstream.ledger.purge import purged_form, subject_digest
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.projection.extract import extract
from memstream.projection.keys import KeyParts, Turn, context_key, index_keys, plain_key
from memstream.projection.previous import Slot, follows, in_batch, last_of_streams, missing, said_in
from memstream.projection.projectors import VectorProjector, event_point
from memstream.settings import Settings
from memstream.vectors.edge import EdgeVectorIndex
from topicread import read_topic

DAY = datetime(2031, 3, 7, 18, 5, tzinfo=UTC)
ASKED = Turn("Ọ̀kàfor", "Did the kiln firing at the ceramics studio work out?", "message.user",
             DAY, {})  # fmt: skip
REPLY = Turn("léa", "Yes, last week! It came out glossy.", "message.user", DAY, {})


def test_a_reply_is_keyed_with_the_message_it_answers_and_its_day() -> None:
    keys = index_keys(REPLY, ASKED, "context")
    assert keys.sparse == (
        "léa on 7 March 2031: Yes, last week! It came out glossy. "
        "after Ọ̀kàfor: Did the kiln firing at the ceramics studio work out?"
    )
    # the dense key has the day but not the previous message's words
    assert keys.dense == "léa on 7 March 2031: Yes, last week! It came out glossy."
    assert index_keys(REPLY, ASKED, "plain").sparse == "léa: Yes, last week! It came out glossy."
    assert index_keys(REPLY, None, "context").sparse == keys.dense


def test_the_plain_key_is_the_event_alone_with_its_caption() -> None:
    shared = Turn("the user", "", "message.user", DAY, {"caption": "a blue heron on a dock"})
    assert plain_key(shared) == "the user: message.user a blue heron on a dock"
    key = context_key(shared, ASKED, KeyParts(previous=True))
    assert key.startswith("the user: message.user a blue heron on a dock after Ọ̀kàfor: Did")


def test_the_previous_message_is_cut_and_its_caption_kept() -> None:
    long = Turn("Sam", " ".join(f"w{i}" for i in range(500)), "message.user", DAY,
                {"image_caption": "a tent under pine trees"})  # fmt: skip
    key = context_key(REPLY, long, KeyParts(previous=True))
    assert "w59" in key and "w60" not in key and key.endswith("a tent under pine trees")


def test_control_characters_and_nul_do_not_break_a_key() -> None:
    hostile = Turn("x\x00y", "a\x00b\tc\u0007 d", "message.user", DAY, {})
    keys = index_keys(hostile, Turn("z\x07", "\x00", "message.user", DAY, {}), "context")
    assert keys.sparse == "x\x00y on 7 March 2031: a\x00b c\u0007 d after z\x07: \x00"


def test_pronouns_name_the_addressee_and_a_single_person_named_before() -> None:
    parts = KeyParts(pronouns=True)
    asked = Turn("María José", "How is Dana Whitfield doing?", "message.user", DAY, {})
    said = Turn("tomás", "She moved, and you would love her flat.", "message.user", DAY, {})
    assert context_key(said, asked, parts) == (
        "tomás to María José: She moved, and you would love her flat. (Dana Whitfield)"
    )
    two = Turn("María José", "We saw Dana and Priya yesterday.", "message.user", DAY, {})
    assert "(" not in context_key(said, two, parts)  # "she" is not clear between two names
    own = Turn("tomás", "I think so, yes.", "message.user", DAY, {})
    assert context_key(own, asked, parts) == "tomás: I think so, yes."
    # the same speaker twice in a row addresses nobody new
    again = Turn("María José", "Did you see her?", "message.user", DAY, {})
    assert "to María" not in context_key(again, asked, parts)


def ledger(tenant: str, secret: str) -> list[dict[str, Any]]:
    """Four messages in one stream (the second answers the first), a tool call, and a
    tombstone purging the first message; all written in the same second, as a burst is."""
    docs: list[dict[str, Any]] = [
        {"agent": "Ọ̀kàfor", "type": "message.user", "payload": {"text": f"Is {secret} ready?"}},
        {"agent": "léa", "type": "message.assistant",
         "payload": {"text": "Yes, last week! It came out glossy."}},
        {"agent": "Ọ̀kàfor", "type": "tool.call", "payload": {"tool": "maps", "arguments": {}}},
        {"agent": "léa", "type": "message.user", "payload": {"text": "Anything else?"}},
        {"agent": "Ọ̀kàfor", "type": "message.user", "payload": {"text": "No, thanks a lot."}},
        {"agent": "the user", "type": "memory.purge",
         "payload": {"subject": subject_digest(b"k", tenant, "okafor"), "event_ids": ["e1"],
                     "reason": "request"}},
    ]  # fmt: skip
    state, out = SequencerState(), []
    for i, d in enumerate(docs):
        doc = {"id": f"e{i + 1}", "tenant": tenant, "stream": "studio",
               "occurred_at": "2031-03-07T18:00:00Z", **d}  # fmt: skip
        o = sequence(RawRecord(orjson.dumps(doc), 0, i, "raw"), state, "2031-03-08T00:00:00Z")
        assert isinstance(o, Sequenced)
        out.append(o.entry)
    return out


def test_only_a_message_after_a_message_follows_one() -> None:
    entries = [extract(e) for e in ledger("t", "the glaze")]
    slots = [follows(x) for x in entries]
    assert slots[0] is None  # first of its stream
    assert slots[1] is not None and slots[1].seq == 1
    assert slots[2] is None  # a tool call follows nothing
    assert slots[3] is not None and slots[3].seq == 3  # follows the tool call: not a message
    assert event_point(entries[1]).payload["text"] == "Yes, last week! It came out glossy."


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


def as_messages(bootstrap: str, values: list[bytes]) -> list[Message]:
    topic = f"keys-ledger-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(10) == 0
    return sorted(read_topic(bootstrap, topic), key=lambda m: m.offset() or 0)


def sparse_ids(index: EdgeVectorIndex, tenant: str, words: str) -> set[str]:
    return {h.payload["event_id"] for h in index.query(tenant, None, words, 10, mode="sparse")}


def scores(index: EdgeVectorIndex, tenant: str, words: str) -> list[tuple[str, float]]:
    hits = index.query(tenant, None, words, 10, mode="sparse")
    return sorted((h.payload["event_id"], round(h.score, 5)) for h in hits)


@pytest.mark.parametrize("batch", [1, 2, 6])
def test_keys_are_the_same_in_any_batching_and_a_purge_takes_the_words_out(
    topics: str, tmp_path: Path, batch: int
) -> None:
    tenant, secret = f"t-{uuid.uuid4().hex[:6]}", f"glaze{uuid.uuid4().hex[:8]}"
    entries = ledger(tenant, secret)
    msgs = as_messages(topics, [orjson.dumps(e) for e in entries])
    emb = HashingEmbedder()
    index = EdgeVectorIndex(tmp_path / "live", "v", emb.dim)
    vp = VectorProjector(index, emb, "vkeys", make_producer(topics))
    try:
        for i in range(0, 5, batch):  # the messages, the tombstone held back
            vp.process(msgs[i : min(i + batch, 5)])
        # the reply is found by the words of the message it answers, and its day
        assert sparse_ids(index, tenant, secret) == {"e1", "e2"}
        assert sparse_ids(index, tenant, "7 March 2031 glossy") >= {"e2"}
        assert "e4" not in sparse_ids(index, tenant, "maps")  # a tool call is no message
        assert index.holding(tenant, ["e1"]) == 2  # its point and the reply's key
        # "Anything else?" (e4) is found by its words, and so is the answer to it (e5)
        assert sparse_ids(index, tenant, "glossy anything") == {"e2", "e4", "e5"}
        vp.process(msgs[5:])
        assert sparse_ids(index, tenant, secret) == set()
        assert index.holding(tenant, ["e1"]) == 0
        assert sparse_ids(index, tenant, "glossy anything") == {"e2", "e4", "e5"}
        live = scores(index, tenant, "Yes last week glossy ready")
    finally:
        vp.close()
    # a replay of the ledger as it stands after the purge keys every point the same way
    restored = [purged_form(e, "e6") if e["id"] == "e1" else e for e in entries]
    msgs = as_messages(topics, [orjson.dumps(e) for e in restored])
    index = EdgeVectorIndex(tmp_path / "replay", "v", emb.dim)
    vp = VectorProjector(index, emb, "vkeys", make_producer(topics))
    try:
        for i in range(0, len(msgs), batch):
            vp.process(msgs[i : i + batch])
        assert scores(index, tenant, "Yes last week glossy ready") == live
    finally:
        vp.close()


def test_a_restarted_projector_finds_the_previous_message_in_its_index(
    topics: str, tmp_path: Path
) -> None:
    tenant, secret = f"t-{uuid.uuid4().hex[:6]}", f"glaze{uuid.uuid4().hex[:8]}"
    msgs = as_messages(topics, [orjson.dumps(e) for e in ledger(tenant, secret)])
    emb = HashingEmbedder()
    first = VectorProjector(
        EdgeVectorIndex(tmp_path / "i", "v", emb.dim), emb, "k", make_producer(topics)
    )
    first.process(msgs[:1])
    first.close()
    index = EdgeVectorIndex(tmp_path / "i", "v", emb.dim)
    again = VectorProjector(index, emb, "k", make_producer(topics))
    try:
        again.process(msgs[1:2])
        assert sparse_ids(index, tenant, secret) == {"e1", "e2"}
        read_back = scores(index, tenant, f"{secret} glossy 7 March")
    finally:
        again.close()
    # the key read back from the index is the key built from the batch
    index = EdgeVectorIndex(tmp_path / "one", "v", emb.dim)
    once = VectorProjector(index, emb, "k", make_producer(topics))
    try:
        once.process(msgs[:2])
        assert scores(index, tenant, f"{secret} glossy 7 March") == read_back
    finally:
        once.close()


def test_plain_keys_copy_nothing_from_other_events(topics: str, tmp_path: Path) -> None:
    tenant, secret = f"t-{uuid.uuid4().hex[:6]}", f"glaze{uuid.uuid4().hex[:8]}"
    msgs = as_messages(topics, [orjson.dumps(e) for e in ledger(tenant, secret)])
    emb = HashingEmbedder()
    index = EdgeVectorIndex(tmp_path / "p", "v", emb.dim)
    vp = VectorProjector(index, emb, "plain", make_producer(topics), keys="plain")
    try:
        vp.process(msgs[:5])
        assert sparse_ids(index, tenant, secret) == {"e1"}
        assert sparse_ids(index, tenant, "March 2031") == set()
    finally:
        vp.close()


def test_positions_the_batch_holds_are_not_read_from_the_index() -> None:
    xs = [extract(e) for e in ledger("t", "the glaze")]
    known = in_batch(xs[2:5])  # the tool call (seq 3) and two messages
    assert known[Slot("t", "studio", 3)] is None  # held, and not a message
    assert missing(xs[2:5], known) == {}
    assert missing(xs[1:2], in_batch(xs[1:2])) == {("t", "studio"): [1]}
    assert last_of_streams(known) == {("t", "studio"): (5, known[Slot("t", "studio", 5)])}
    payloads = [event_point(x).payload for x in xs[:3]]
    payloads.append({**payloads[0], "kind": "latent", "seq": 9})
    read = said_in(payloads)
    assert set(read) == {Slot("t", "studio", 1), Slot("t", "studio", 2), Slot("t", "studio", 3)}
    said = read[Slot("t", "studio", 1)]
    assert said is not None and said.event_id == "e1" and read[Slot("t", "studio", 3)] is None
