"""The latent builder obeys memory.purge tombstones (pure, then the shell on a real broker)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from confluent_kafka import Message, Producer
from memstream.embed.hashing import HashingEmbedder
from memstream.kafka.clients import make_producer
from memstream.kafka.topics import LATENT_INPUTS, LATENTS, ensure_topics
from memstream.latent.builder import Built, LatentBuilder, Output, latent_input
from memstream.ledger.purge import purged_form, subject_digest
from memstream.records.latent import EpisodeDetails, LatentArtifact, LatentDeletion
from memstream.settings import Settings
from memstream_latents.main import LatentWorker
from test_latent_builder import NOW, T0, Ledger
from topicread import read_topic

# Every partition of the latent topics: a replica alone holds them all.
ALL_PARTITIONS = list(range(Settings().topic_partitions))

PERSON = "Éloïse Martin-Duval"


def run(entries: list[dict[str, Any]], b: LatentBuilder) -> list[Output]:
    out: list[Output] = []
    for e in entries:
        out += b.observe(latent_input(e), NOW)
    return out + b.flush(NOW)


def artifacts(out: list[Output]) -> list[LatentArtifact]:
    return [o.artifact for o in out if isinstance(o, Built)]


def deletions(out: list[Output]) -> list[LatentDeletion]:
    return [o for o in out if isinstance(o, LatentDeletion)]


def session() -> Ledger:
    """chat-1..3 about Éloïse (said by "the user"), chat-4 about the user's own pottery, then a
    preference of Éloïse (prefs-1) and one of Zoë Martin (prefs-2)."""
    ledger = Ledger()
    ledger.say(f"{PERSON} is moving to Lisbon in April.", T0, agent="the user")
    ledger.say(f"{PERSON} asked me to water her ferns.", T0 + timedelta(minutes=1))
    ledger.say(f"The new flat of {PERSON} has a balcony.", T0 + timedelta(minutes=2))
    ledger.say("My celadon bowl cracked in the kiln.", T0 + timedelta(minutes=3), agent="the user")
    ledger.add("preference.set", {"key": "tea", "value": "mint", "subject": PERSON}, T0,
               stream="prefs")  # fmt: skip
    ledger.add("preference.set", {"key": "tea", "value": "oolong", "subject": "Zoë Martin"}, T0,
               stream="prefs")  # fmt: skip
    return ledger


def tombstone(ledger: Ledger, ids: list[str], at: datetime) -> dict[str, Any]:
    payload = {
        "subject": subject_digest(b"secret", ledger.tenant, "eloise martin-duval"),
        "event_ids": ids,
    }
    return ledger.add("memory.purge", payload, at, stream="purges", agent="api")


def test_a_tombstone_deletes_exactly_the_artifacts_citing_purged_events() -> None:
    ledger, b = session(), LatentBuilder()
    before = {a.group_key: a for a in artifacts(run(ledger.entries, b))}
    assert {"preference:eloise martin-duval", "preference:zoe martin"} <= set(before)
    chat, prefs = (before[f"episode:{s}:{s}-1"] for s in ("chat", "prefs"))
    purge = tombstone(ledger, ["chat-1", "chat-2", "chat-3", "prefs-1"], T0 + timedelta(hours=1))
    out = b.observe(latent_input(purge), NOW)
    gone = {d.artifact_id for d in out if isinstance(d, LatentDeletion)}
    eloise = before["preference:eloise martin-duval"]
    assert gone == {chat.artifact_id, prefs.artifact_id, eloise.artifact_id}
    assert all(isinstance(d, LatentDeletion) and d.deleted_by == purge["id"] for d in out)
    assert before["preference:zoe martin"] in b.current.values()  # another person: untouched
    # What remains of the session is built again, never citing or naming the purged events.
    rebuilt = artifacts(b.flush(NOW))
    eps = {a.group_key: a for a in rebuilt if a.artifact_type == "episode_latent"}
    assert [r.event_id for r in eps["episode:chat:chat-4"].source_event_refs] == ["chat-4"]
    assert [r.event_id for r in eps["episode:prefs:prefs-2"].source_event_refs] == ["prefs-2"]
    for ep in eps.values():
        assert ep.supersedes == [] and "Lisbon" not in ep.summary
        assert isinstance(ep.details, EpisodeDetails) and "eloise" not in str(ep.details)
    assert not any(a.group_key == "preference:eloise martin-duval" for a in rebuilt)
    assert gone.isdisjoint(a.artifact_id for a in b.current.values())


def test_a_repeated_tombstone_and_later_turns_never_resend_a_deleted_artifact() -> None:
    ledger, b = session(), LatentBuilder()
    run(ledger.entries, b)
    first = tombstone(ledger, ["chat-1", "chat-2", "chat-3"], T0 + timedelta(minutes=5))
    assert len(deletions(run([first], b))) == 1
    again = tombstone(ledger, ["chat-1", "chat-2", "chat-3"], T0 + timedelta(minutes=6))
    assert run([again], b) == []
    # The session grows: its episode supersedes the rebuilt one, never the deleted one.
    ledger.say("The kiln needs a new thermocouple.", T0 + timedelta(minutes=7))
    out = run(ledger.entries[-1:], b)
    assert deletions(out) == []
    deleted = {aid for _, aid in b.deleted}
    assert all(not deleted & {a.artifact_id, *a.supersedes} for a in artifacts(out))


def test_purged_entries_and_ids_a_tombstone_names_are_never_folded_in() -> None:
    ledger = session()
    purge = tombstone(ledger, ["chat-1", "chat-2", "chat-3"], T0 + timedelta(hours=1))
    # After a restore from the archive: content-less entries read as None, nothing built.
    restored = [purged_form(e, purge["id"]) if e["id"] in purge["payload"]["event_ids"] else e
                for e in ledger.entries]  # fmt: skip
    assert [latent_input(e) for e in restored[:3]] == [None, None, None]
    from_archive = run(restored, LatentBuilder())
    # The broker still holding the content: the tombstone's ids are known before the fold.
    b = LatentBuilder()
    b.note_purge(ledger.tenant, purge["payload"]["event_ids"])
    from_broker = run(ledger.entries, b)
    for out in (from_archive, from_broker):
        assert deletions(out) == []
        cited = {r.event_id for a in artifacts(out) for r in a.source_event_refs}
        assert cited and not cited & {"chat-1", "chat-2", "chat-3"}
    assert {a.artifact_id for a in artifacts(from_archive)} == {
        a.artifact_id for a in artifacts(from_broker)
    }


def test_a_purged_step_leaves_the_run_and_a_purged_start_the_task() -> None:
    ledger, b = Ledger(), LatentBuilder()
    ledger.add("task.started", {"task_id": "t1", "goal": "Book the Lisbon movers"}, T0, stream="t1")
    ledger.add("message.user", {"text": f"Call {PERSON} about the keys."}, T0, stream="t1")
    ledger.add("message.user", {"text": "Compare three quotes."}, T0, stream="t1")
    run(ledger.entries, b)
    run([tombstone(ledger, ["t1-2"], T0 + timedelta(minutes=1))], b)
    ledger.add("task.outcome", {"task_id": "t1", "status": "success"},
               T0 + timedelta(minutes=2), stream="t1")  # fmt: skip
    [proc] = [a for a in artifacts(run(ledger.entries[-1:], b))
              if a.artifact_type == "procedure_latent"]  # fmt: skip
    assert PERSON not in proc.summary and "Compare three quotes" in proc.summary
    assert "t1-2" not in proc.source_ids


def test_a_purged_newest_preference_brings_the_one_before_back() -> None:
    ledger, b = Ledger(), LatentBuilder()
    ledger.add("preference.set", {"key": "tea", "value": "mint", "subject": PERSON}, T0)
    ledger.add("preference.set", {"key": "tea", "value": "sencha", "subject": PERSON},
               T0 + timedelta(days=1))  # fmt: skip
    run(ledger.entries, b)
    out = run([tombstone(ledger, ["chat-2"], T0 + timedelta(days=2))], b)
    assert len(deletions(out)) == 2  # the preference latent and the second turn's episode
    [pref] = [a for a in artifacts(out) if a.artifact_type == "preference_latent"]
    assert "mint" in pref.summary and "sencha" not in pref.summary


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


def test_a_live_tombstone_deletes_and_restore_honours_deletion_records(topics: str) -> None:
    ledger = Ledger(tenant=f"t-{uuid.uuid4().hex[:8]}")
    ledger.entries = session().entries
    for e in ledger.entries:
        e["tenant"] = ledger.tenant
    producer = Producer({"bootstrap.servers": topics})
    for e in ledger.entries:
        producer.produce(LATENT_INPUTS, orjson.dumps(e), key=ledger.tenant)
    assert producer.flush(10) == 0
    clock = lambda: datetime(2026, 1, 1, tzinfo=UTC)  # noqa: E731
    first = LatentWorker(topics, make_producer(topics), HashingEmbedder(), clock)
    first.rebuild(ALL_PARTITIONS)
    [episode] = [a for a in first.builder.current.values() if a.group_key == "episode:chat:chat-1"]
    # The purge: the tombstone on the ledger (the original entries stay in the broker).
    purge = tombstone(ledger, ["chat-1", "chat-2", "chat-3"], T0 + timedelta(hours=1))
    purge["tenant"] = ledger.tenant
    producer.produce(LATENT_INPUTS, orjson.dumps(purge), key=ledger.tenant)
    assert producer.flush(10) == 0
    [m] = [m for m in read_topic(topics, LATENT_INPUTS)
           if ledger.tenant.encode() in (m.value() or b"")
           and b"memory.purge" in (m.value() or b"")]  # fmt: skip
    first.process([m])  # live: the deletion, then the inputs folded again without the purge
    assert any(a.group_key == "episode:chat:chat-4" for a in first.builder.current.values())
    second = LatentWorker(topics, make_producer(topics), HashingEmbedder(), clock)
    second.rebuild(ALL_PARTITIONS)  # nothing left to delete or build
    third = LatentWorker(topics, make_producer(topics), HashingEmbedder(), clock)
    third.rebuild(ALL_PARTITIONS)
    mine = [m.value() or b"" for m in read_topic(topics, LATENTS) if ledger.tenant.encode()
            in (m.key() or b"")]  # fmt: skip
    dels = [r for r in mine if b'"deleted_by"' in r]
    assert len(dels) == 1 and episode.artifact_id.encode() in dels[0]
    assert sum(episode.artifact_id.encode() in r for r in mine) == 2  # built, then deleted
    assert sum(b'"group_key":"episode:chat:chat-4"' in r for r in mine) == 1  # rebuilt once
    for w in (second, third):
        ids = {a.artifact_id for a in w.builder.current.values()}
        assert episode.artifact_id not in ids
        assert (ledger.tenant, episode.artifact_id) in w.builder.deleted
        assert not any("chat-1" in a.source_ids for a in w.builder.current.values())


def _tenants_on_two_partitions(broker: str) -> dict[int, str]:
    """Two fresh tenants whose inputs land on different partitions: partition -> tenant."""
    producer = make_producer(broker)  # the partitioner the route and the builder use
    found: dict[int, str] = {}
    landed: list[tuple[str, int]] = []

    def note(tenant: str) -> Callable[[Any, Message], None]:
        return lambda _err, m: landed.append((tenant, m.partition() or 0))

    while len(found) < 2:
        tenant = f"t-{uuid.uuid4().hex[:8]}"
        # A malformed record (the fold skips it; the loop would dead-letter it).
        producer.produce(LATENT_INPUTS, b"{}", key=tenant, on_delivery=note(tenant))
        assert producer.flush(10) == 0
        for t, p in landed:
            found.setdefault(p, t)
    return found


def test_replicas_build_only_their_partitions_tenants_and_a_takeover_sends_nothing_twice(
    topics: str,
) -> None:
    by_part = _tenants_on_two_partitions(topics)
    (pa, ta), (pb, tb) = sorted(by_part.items())
    producer = make_producer(topics)
    for tenant in (ta, tb):
        for e in session().entries:
            producer.produce(LATENT_INPUTS, orjson.dumps({**e, "tenant": tenant}), key=tenant)
    assert producer.flush(10) == 0
    clock = lambda: datetime(2026, 1, 1, tzinfo=UTC)  # noqa: E731
    a = LatentWorker(topics, make_producer(topics), HashingEmbedder(), clock)
    b = LatentWorker(topics, make_producer(topics), HashingEmbedder(), clock)
    a.rebuild([pa])
    b.rebuild([pb])
    # Other tests' tenants share these partitions: each replica holds its own, never the other's.
    held_a = {x.tenant for x in a.builder.current.values()}
    held_b = {x.tenant for x in b.builder.current.values()}
    assert ta in held_a and tb not in held_a
    assert tb in held_b and ta not in held_b

    def built(tenant: str) -> list[bytes]:
        return [m.value() or b"" for m in read_topic(topics, LATENTS) if m.key() == tenant.encode()]

    before = {t: len(built(t)) for t in (ta, tb)}
    assert all(before.values())
    a.forget([pa])  # b died: a is given every partition of both
    a.rebuild([pa, pb])
    assert {ta, tb} <= {x.tenant for x in a.builder.current.values()}
    assert {t: len(built(t)) for t in (ta, tb)} == before  # equal inputs, equal ids: no resend
