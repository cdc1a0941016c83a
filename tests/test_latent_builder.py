"""The deterministic latent builder on hand-written ledger entries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from memstream.latent.builder import BuilderConfig, Built, LatentBuilder, latent_input
from memstream.records.latent import (
    EpisodeDetails,
    LatentArtifact,
    PreferenceDetails,
    TaskDetails,
    is_artifact_id,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
T0 = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)


class Ledger:
    """Entries with per-stream seq numbers and unique hashes."""

    def __init__(self, tenant: str = "atelier") -> None:
        self.tenant = tenant
        self.seqs: dict[str, int] = {}
        self.entries: list[dict[str, Any]] = []

    def add(
        self,
        type_: str,
        payload: dict[str, Any],
        at: datetime,
        stream: str = "chat",
        agent: str = "Inès",
    ) -> dict[str, Any]:
        seq = self.seqs[stream] = self.seqs.get(stream, 0) + 1
        e = {
            "id": f"{stream}-{seq}",
            "tenant": self.tenant,
            "stream": stream,
            "agent": agent,
            "type": type_,
            "occurred_at": at.isoformat(),
            "payload": payload,
            "seq": seq,
            "prev_hash": "0" * 64,
            "hash": f"{stream}:{seq}:{hash(str(payload)) & 0xFFFF:x}".ljust(64, "0"),
            "ingested_at": at.isoformat(),
            "metadata": {},
        }
        self.entries.append(e)
        return e

    def say(self, text: str, at: datetime, stream: str = "chat", agent: str = "Inès") -> None:
        self.add("message.user", {"text": text}, at, stream, agent)


def run(entries: list[dict[str, Any]], builder: LatentBuilder | None = None) -> list[Built]:
    b = builder or LatentBuilder()
    out: list[Built] = []
    for e in entries:
        out += b.observe(latent_input(e), NOW)
    return out + b.flush(NOW)


def current(built: list[Built]) -> dict[str, LatentArtifact]:
    """The latest record per id, without the stale ones."""
    latest = {b.artifact.artifact_id: b.artifact for b in built}
    return {k: a for k, a in latest.items() if a.stale_at is None}


def two_sessions() -> Ledger:
    ledger = Ledger()
    ledger.say("We adopted a rescue greyhound named Biscuit from the shelter in Lyon.", T0)
    ledger.say(
        "Biscuit sleeps all day, the greyhound is lazy.",
        T0 + timedelta(minutes=2),
        agent="the user",
    )
    ledger.say("I paid 40 euros for the greyhound's new bed.", T0 + timedelta(minutes=4))
    later = T0 + timedelta(days=3)
    ledger.say("Started pottery lessons at the ceramics studio on Rue Oberkampf.", later)
    ledger.say(
        "The ceramics teacher, Zoë Martin, liked my first bowl.", later + timedelta(minutes=1)
    )
    return ledger


def test_one_episode_per_session_split_by_a_pause() -> None:
    ledger = two_sessions()
    eps = [a for a in current(run(ledger.entries)).values() if a.artifact_type == "episode_latent"]
    assert len(eps) == 2
    first, second = sorted(eps, key=lambda a: a.valid_from)
    assert [r.event_id for r in first.source_event_refs] == ["chat-1", "chat-2", "chat-3"]
    assert [r.event_id for r in second.source_event_refs] == ["chat-4", "chat-5"]
    d = first.details
    assert isinstance(d, EpisodeDetails)
    assert "greyhound" in d.key_terms and "biscuit" in d.key_entities
    assert d.speakers == ["Inès", "the user"]
    assert any("40" in v for v in d.values)
    assert first.altitude == "episode" and first.authority_status == "non_authoritative"
    assert "greyhound" in first.summary
    assert is_artifact_id(first.artifact_id)
    assert isinstance(second.details, EpisodeDetails)
    assert "ceramic" in " ".join(second.details.key_terms)


def test_same_ledger_same_ids_and_a_reread_creates_nothing() -> None:
    ledger = two_sessions()
    a = current(run(ledger.entries))
    b = current(run(ledger.entries))
    assert set(a) == set(b) and a
    # a restart: the builder knows what memory.latents holds, then re-reads the ledger
    restarted = LatentBuilder()
    for art in a.values():
        restarted.remember(art)
    assert run(ledger.entries, restarted) == []


def test_entries_seen_twice_count_once() -> None:
    ledger = two_sessions()
    once = current(run(ledger.entries))
    twice = current(run(ledger.entries + ledger.entries[:2]))
    assert set(once) == set(twice)


def test_a_growing_session_supersedes_its_episode() -> None:
    ledger = two_sessions()
    b = LatentBuilder()
    first = run(ledger.entries, b)
    ledger.say("Biscuit will come to the studio next week.", T0 + timedelta(days=3, minutes=5))
    second = run(ledger.entries[-1:], b)
    stale = [x.artifact for x in second if x.artifact.stale_at is not None]
    fresh = [x.artifact for x in second if x.artifact.stale_at is None]
    assert len(stale) == 1 and len(fresh) == 1
    assert fresh[0].supersedes == [stale[0].artifact_id]
    assert stale[0].artifact_id in {x.artifact.artifact_id for x in first}
    assert stale[0].stale_at == T0 + timedelta(days=3, minutes=5)
    assert len(fresh[0].source_event_refs) == 3


def test_a_new_preference_makes_the_old_preference_latent_stale() -> None:
    ledger = Ledger()
    b = LatentBuilder()
    ledger.add("preference.set", {"key": "tea", "value": "green", "subject": "Ana Lúcia"}, T0)
    ledger.add("preference.set", {"key": "seat", "value": "aisle", "subject": "Ana Lúcia"}, T0)
    out1 = run(ledger.entries, b)
    prefs = [x.artifact for x in out1 if x.artifact.artifact_type == "preference_latent"]
    assert len(prefs) == 1
    d = prefs[0].details
    assert isinstance(d, PreferenceDetails) and d.subject == "ana lucia"
    assert {(p.key, p.value) for p in d.preferences} == {("tea", "green"), ("seat", "aisle")}
    later = T0 + timedelta(days=30)
    ledger.add("preference.set", {"key": "tea", "value": "oolong", "subject": "ana lúcia"}, later)
    out2 = run(ledger.entries[-1:], b)
    by_state = {
        x.artifact.stale_at is None: x.artifact
        for x in out2
        if x.artifact.artifact_type == "preference_latent"
    }
    assert by_state[False].artifact_id == prefs[0].artifact_id and by_state[False].stale_at == later
    new = by_state[True]
    assert new.supersedes == [prefs[0].artifact_id]
    assert isinstance(new.details, PreferenceDetails)
    assert {(p.key, p.value) for p in new.details.preferences} == {
        ("tea", "oolong"),
        ("seat", "aisle"),
    }
    assert "oolong" in new.summary and "green" not in new.summary


def test_an_older_preference_arriving_late_changes_nothing() -> None:
    ledger = Ledger()
    b = LatentBuilder()
    ledger.add("preference.set", {"key": "tea", "value": "oolong"}, T0 + timedelta(days=1))
    run(ledger.entries, b)
    ledger.add("preference.set", {"key": "tea", "value": "green"}, T0)
    assert [
        x for x in run(ledger.entries[-1:], b) if x.artifact.artifact_type == "preference_latent"
    ] == []


def test_procedures_and_failures_from_task_outcomes() -> None:
    ledger = Ledger()
    at = T0
    for i, status in enumerate(["success", "failure", "failure"]):
        s = f"task-{i}"
        ledger.add(
            "task.started", {"task_id": s, "goal": "Deploy the billing service"}, at, stream=s
        )
        ledger.add(
            "tool.call", {"tool": "kubectl", "arguments": {"apply": "billing"}}, at, stream=s
        )
        ledger.add(
            "task.outcome",
            {
                "task_id": s,
                "status": status,
                "used_ids": ["ev-9"],
                "text": "image tag missing" if status == "failure" else None,
            },
            at + timedelta(minutes=5),
            stream=s,
        )
        at += timedelta(hours=1)
    arts = current(run(ledger.entries))
    by_type = {a.artifact_type: a for a in arts.values() if a.artifact_type != "episode_latent"}
    proc, fail = by_type["procedure_latent"], by_type["failure_latent"]
    assert isinstance(proc.details, TaskDetails) and isinstance(fail.details, TaskDetails)
    assert [r.task_id for r in proc.details.runs] == ["task-0"]
    assert proc.details.runs[0].steps[0].startswith("tool.call")
    assert [r.task_id for r in fail.details.runs] == ["task-1", "task-2"]
    assert "image tag missing" in fail.summary and fail.details.memories == ["ev-9"]
    assert fail.review_status == "proposed" and fail.confidence > proc.confidence
    assert {r.event_id for r in fail.source_event_refs} >= {"task-1-1", "task-1-3", "task-2-3"}


def test_retrieval_policy_from_feedback() -> None:
    ledger = Ledger()
    family = {"operation": "lookup", "entities": ["biscuit"], "terms": ["bed"]}
    ledger.add("memory.feedback", {"target_ids": ["chat-3"], "signal": 1.0, "family": family}, T0)
    ledger.add("memory.feedback", {"target_ids": ["chat-9"], "signal": -0.5, "family": family}, T0)
    arts = [a for a in current(run(ledger.entries)).values()]
    assert [a.artifact_type for a in arts] == ["retrieval_policy_latent"]  # no episode of feedback
    d = arts[0].details
    assert d.kind == "policy" and d.favoured == ["chat-3"] and d.disfavoured == ["chat-9"]


def test_config_change_changes_every_id() -> None:
    ledger = two_sessions()
    a = current(run(ledger.entries))
    b = current(run(ledger.entries, LatentBuilder(BuilderConfig(key_terms=5))))
    assert not set(a) & set(b)


def test_names_are_key_entities_not_key_terms() -> None:
    ledger = Ledger()
    ledger.say("Yesterday Zoé Dubois-Martin planted basil in the raised beds.", T0)
    ledger.say("The basil of Zoé Dubois-Martin needs water.", T0 + timedelta(minutes=1))
    [ep] = current(run(ledger.entries)).values()
    assert isinstance(ep.details, EpisodeDetails)
    assert "basil" in ep.details.key_terms
    assert not {"zoe", "zoé", "dubois", "martin"} & set(ep.details.key_terms)
    assert "zoe dubois-martin" in ep.details.key_entities


def test_a_long_session_without_pauses_closes_at_the_size_bound() -> None:
    ledger = Ledger()
    for i in range(25):  # one turn a minute: never a pause
        ledger.say(f"Turn {i} of the marathon planning call with Zoë.", T0 + timedelta(minutes=i))
    builder = LatentBuilder(BuilderConfig(episode_max_events=10))
    eps = [
        a
        for a in current(run(ledger.entries, builder)).values()
        if a.artifact_type == "episode_latent"
    ]
    sizes = sorted((a.valid_from, len(a.source_event_refs)) for a in eps)
    assert [n for _, n in sizes] == [10, 10, 5]
