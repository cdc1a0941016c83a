"""The memory weave (prospective pass) and the packet's latent context, on hand-built data."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from memstream.checkout.latents import latent_item, relevant_artifacts
from memstream.checkout.packet import render_json, render_markdown
from memstream.checkout.packet.budget import measure, weave_tokens
from memstream.checkout.plan import plan_query
from memstream.latent.weave import build_weave
from memstream.records.latent import (
    EpisodeDetails,
    LatentArtifact,
    PreferenceDetails,
    PreferenceValue,
    TaskDetails,
    TaskRun,
)
from memstream.records.packet import CheckoutPacket, MemoryWeave
from memstream.records.projected import SourceRef
from test_packet import build, words_counter

T = datetime(2026, 3, 9, 10, tzinfo=UTC)


def ref(i: str, seq: int) -> SourceRef:
    return SourceRef(tenant="acme", stream="journal", seq=seq, hash=f"{seq:064x}", event_id=i)


def artifact(aid: str, kind: str, summary: str, **kw: object) -> LatentArtifact:
    details: object
    if kind == "episode_latent":
        details = EpisodeDetails(
            stream="journal", events=2, speakers=["Zoë"], key_entities=["loire"],
            key_terms=["kayak", "campsite"], values=[], start=T, end=T,
        )  # fmt: skip
    elif kind == "preference_latent":
        details = PreferenceDetails(
            subject="zoe",
            preferences=[PreferenceValue(key="coffee", value="oat", fact_id="p#0", since=T)],
        )
    else:
        details = TaskDetails(
            goal="book campsite", goal_terms=["book", "campsite"],
            runs=[TaskRun(task_id="t", status="failure", outcome_event_id="o", steps=[])],
            memories=[],
        )  # fmt: skip
    fields: dict[str, object] = dict(
        artifact_id=aid, artifact_type=kind, tenant="acme", group_key=aid, altitude="latent",
        summary=summary, source_event_refs=[ref(f"{aid}-src", 1), ref(f"{aid}-src2", 2)],
        valid_from=T, created_at=T, projection_version="lb-1", config_hash="c",
        input_fingerprint="f", confidence=0.8, details=details,
    )  # fmt: skip
    fields.update(kw)
    return LatentArtifact.model_validate(fields)


EPISODE = artifact("lat-ep", "episode_latent", "3 events in journal: kayak trip on the Loire")
FAILURE = artifact(
    "lat-fail", "failure_latent", "failure mode of 'book campsite': closed at 6 pm",
    review_status="proposed", confidence=0.4,
)  # fmt: skip
PREF = artifact("lat-pref", "preference_latent", "current preferences of zoe: coffee: oat")


def words_measure(w: MemoryWeave) -> int:
    return weave_tokens(w, words_counter)


def packet() -> CheckoutPacket:
    return build()


def test_a_weave_cites_its_artifacts_and_the_packets_evidence() -> None:
    p = packet()
    w = build_weave(
        goal="plan the kayak trip", purpose="planning", packet=p, artifacts=[EPISODE, FAILURE],
        allowed=2000, measure=words_measure, created_at="2026-03-10T00:00:00Z", version="v1",
    )  # fmt: skip
    # planning puts failure modes before episodes
    assert w.artifact_ids == ["lat-fail", "lat-ep"]
    assert {r.event_id for r in w.source_event_refs} == {
        "lat-fail-src", "lat-fail-src2", "lat-ep-src", "lat-ep-src2"
    }  # fmt: skip
    fail = w.inferred_context[0]
    assert fail.label == "suggestive" and "review_pending" in fail.flags
    assert "low_confidence" in fail.flags
    cited = {e.item_id for e in w.accepted_evidence}
    support = {i for a in p.answer_candidates for i in a.support_ids}
    assert support and support <= cited
    assert w.reasoning_phase == "planning" and w.expected_use and w.prohibited_use
    assert w.token_budget.used <= w.token_budget.allowed == 2000


def test_a_weave_fits_a_small_budget_by_dropping_from_the_end() -> None:
    p = packet()
    kwargs = dict(goal="plan", purpose="review", packet=p, artifacts=[EPISODE, FAILURE, PREF],
                  measure=words_measure, created_at="x", version="v1")  # fmt: skip
    big = build_weave(allowed=5000, **kwargs)  # type: ignore[arg-type]
    small = build_weave(allowed=big.token_budget.used // 2, **kwargs)  # type: ignore[arg-type]
    assert small.token_budget.used <= small.token_budget.allowed
    assert len(small.artifact_ids) + len(small.accepted_evidence) < len(big.artifact_ids) + len(
        big.accepted_evidence
    )
    assert small.artifact_ids == big.artifact_ids[: len(small.artifact_ids)]


def test_a_tight_budget_drops_the_weaves_evidence_before_its_last_artifact() -> None:
    # the packet already cites the evidence; the artifact is what only the weave carries
    kwargs = dict(goal="plan", purpose="planning", packet=packet(), artifacts=[EPISODE],
                  measure=words_measure, created_at="x", version="v1")  # fmt: skip
    full = build_weave(allowed=5000, **kwargs)  # type: ignore[arg-type]
    assert full.artifact_ids == ["lat-ep"] and len(full.accepted_evidence) > 1
    fitted = [
        build_weave(allowed=n, **kwargs)  # type: ignore[arg-type]
        for n in range(full.token_budget.used, 0, -1)
    ]
    assert all(w.artifact_ids == ["lat-ep"] for w in fitted if w.accepted_evidence)
    assert any(w.artifact_ids == ["lat-ep"] and not w.accepted_evidence for w in fitted)
    assert all(w.token_budget.used <= w.token_budget.allowed for w in fitted if w.artifact_ids)


def test_stale_artifacts_never_enter_a_weave() -> None:
    stale = EPISODE.model_copy(update={"stale_at": T})
    w = build_weave(
        goal="g", purpose="general", packet=packet(), artifacts=[stale], allowed=900,
        measure=words_measure, created_at="x", version="v1",
    )  # fmt: skip
    assert w.artifact_ids == [] and w.inferred_context == []


def test_the_weave_is_part_of_the_packet_and_its_budget() -> None:
    p = packet()
    w = build_weave(
        goal="plan", purpose="execution", packet=p, artifacts=[PREF], allowed=900,
        measure=words_measure, created_at="x", version="v1",
    )  # fmt: skip
    woven = p.model_copy(update={"memory_weave": w})
    md = render_markdown(woven)
    assert "## Memory weave (execution" in md and "suggestive `lat-pref`" in md
    assert measure(woven, words_counter) > measure(p, words_counter)
    doc = json.loads(render_json(woven))
    assert doc["memory_weave"]["artifact_ids"] == ["lat-pref"]
    assert CheckoutPacket.model_validate_json(render_json(woven)) == woven


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did we plan for the KAYAK trip?", ["lat-ep"]),
        ("which coffee does zoë like?", ["lat-pref"]),
        ("What is the capital of Peru?", []),
    ],
)
def test_latent_context_holds_only_artifacts_the_question_is_about(
    query: str, expected: list[str]
) -> None:
    plan = plan_query(query, "2026-03-10T00:00:00Z")
    found = relevant_artifacts(plan, [EPISODE, PREF])
    assert [a.artifact_id for a in found] == expected
    for a in found:
        item = latent_item(a)
        assert item.label == "suggestive" and item.source_event_refs == a.source_event_refs


def test_a_small_weave_keeps_one_artifact_of_each_kind_first() -> None:
    second = artifact("lat-ep2", "episode_latent", "2 events in journal: the campsite booking")
    w = build_weave(
        goal="g", purpose="synthesis", packet=packet(), artifacts=[EPISODE, second, PREF],
        allowed=5000, measure=words_measure, created_at="x", version="v1",
    )  # fmt: skip
    # synthesis: episodes before preferences, but the second episode after the preference
    assert w.artifact_ids == ["lat-ep", "lat-pref", "lat-ep2"]


def test_a_weave_for_a_goal_about_the_world_cites_no_record_of_work() -> None:
    """A snippet of a task record in the packet (an older client's, say) is not evidence for
    a goal about the world; for a goal about the work it is."""
    p = packet()
    task = p.snippets[0].model_copy(update={"item_id": "task-9-start", "type": "task.started"})
    p = p.model_copy(update={"snippets": [*p.snippets, task]})

    def cited(goal: str) -> set[str]:
        plan = plan_query(goal, "2026-03-10T00:00:00Z")
        shown = p.model_copy(update={"synthesis_plan": plan})
        w = build_weave(
            goal=goal, purpose="planning", packet=shown, artifacts=[], allowed=2000,
            measure=words_measure, created_at="2026-03-10T00:00:00Z", version="v1",
        )  # fmt: skip
        return {e.item_id for e in w.accepted_evidence}

    assert "task-9-start" not in cited("plan the kayak trip") and cited("plan the kayak trip")
    assert "task-9-start" in cited("why did the kayak booking task fail?")
