"""Feedback priors: decay, question families, the bound, and what synthesis does with them."""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.checkout.plan import plan_query
from memstream.checkout.synthesis import synthesize
from memstream.events.payloads import QuestionFamily
from memstream.learning.priors import (
    PriorPolicy,
    apply_priors,
    failure_warnings,
    priors,
    relevant_ids,
)
from memstream.learning.trace import family_of, family_similarity
from memstream.records.projected import FeedbackRecord
from synthdata import NOW, event

CLOCK = datetime(2024, 6, 12, 10, 0, tzinfo=UTC)
QUESTION = "Which port does the staging database listen on?"
# Two memories answer the question differently; the first is newer, so it wins on its own.
OLD_PORT = event("port-b", "The staging database listens on port 6432.", "2024-05-01T09:00:00Z")
NEW_PORT = event("port-a", "The staging database listens on port 5433.", "2024-05-20T09:00:00Z")
UNRELATED = event("lunch", "Lunch with the Ørsted team was at Café Noir.", "2024-05-21T09:00:00Z")
POOL = [
    NEW_PORT.model_copy(update={"score": 0.030}),
    OLD_PORT.model_copy(update={"score": 0.029}),
    UNRELATED.model_copy(update={"score": 0.010}),
]
FAMILY = family_of(plan_query(QUESTION, NOW))


def record(
    target: str,
    signal: float,
    n: int,
    *,
    at: str = "2024-06-10T10:00:00Z",
    outcome: str | None = None,
    family: QuestionFamily | None = FAMILY,
    certainty: float = 1.0,
) -> FeedbackRecord:
    return FeedbackRecord(
        tenant="t1",
        feedback_id=f"fb-{target}-{n}#0",
        event_id=f"fb-{target}-{n}",
        target_id=target,
        signal=signal,
        certainty=certainty,
        source="retrospective" if outcome else "explicit",
        task_id=f"task-{target}-{n}" if outcome else None,
        outcome=outcome,
        family=family,
        at=at,
    )


def learned(records: list[FeedbackRecord], query: str = QUESTION) -> list[str]:
    plan = plan_query(query, NOW)
    found = priors(records, family_of(plan), CLOCK)
    ranked, _ = apply_priors(POOL, found, relevant_ids(plan, POOL))
    result = synthesize(plan, ranked)
    return result.answer_candidates[0].support_ids if result.answer_candidates else []


def test_without_feedback_the_newest_matching_memory_answers() -> None:
    assert learned([]) == ["port-a"]


def test_failures_and_successes_turn_the_answer_and_the_failed_memory_is_flagged() -> None:
    blame = [record("port-a", -1.0, i, outcome="failure") for i in range(3)]
    credit = [record("port-b", 1.0, i, outcome="success") for i in range(3)]
    assert learned(blame + credit) == ["port-b"]
    found = priors(blame + credit, FAMILY, CLOCK)
    assert found["port-a"].value < -0.9 < 0.9 < found["port-b"].value
    (warning,) = failure_warnings(found, ["port-a", "port-b"])
    assert warning.kind == "failure_record" and warning.ids == ["port-a"]
    assert all(f"task-port-a-{i}" in warning.message for i in range(3))


def test_blame_alone_demotes_within_the_bound_and_keeps_the_memory() -> None:
    plan = plan_query(QUESTION, NOW)
    blame = [record("port-a", -1.0, i, outcome="failure") for i in range(50)]
    found = priors(blame, FAMILY, CLOCK)
    ranked, notes = apply_priors(POOL, found, relevant_ids(plan, POOL))
    assert {c.item_id for c in ranked} == {c.item_id for c in POOL}  # nothing removed
    demoted = next(c for c in ranked if c.item_id == "port-a")
    assert demoted.score >= POOL[0].score * (1 - PriorPolicy().score_drop)  # bounded
    (note,) = notes
    assert (note.effect, note.from_rank, note.to_rank) == ("lowered", 0, 1)
    assert note.records == 50 and note.failed_tasks[:2] == ["task-port-a-0", "task-port-a-1"]


def test_praise_however_often_does_not_lift_an_unrelated_memory() -> None:
    plan = plan_query(QUESTION, NOW)
    praise = [record("lunch", 1.0, i) for i in range(500)]
    found = priors(praise, FAMILY, CLOCK)
    assert found["lunch"].value > 0.99
    ranked, notes = apply_priors(POOL, found, relevant_ids(plan, POOL))
    assert [c.item_id for c in ranked] == [c.item_id for c in POOL]
    assert ranked[2].score == POOL[2].score and ranked[2].prior == 0.0
    assert [n.effect for n in notes] == ["not_relevant"]
    assert learned(praise) == ["port-a"]


def test_praise_moves_a_relevant_memory_by_at_most_the_bound() -> None:
    plan = plan_query(QUESTION, NOW)
    praise = [record("port-b", 1.0, i) for i in range(500)]
    found = priors(praise, FAMILY, CLOCK)
    ranked, _ = apply_priors(POOL, found, relevant_ids(plan, POOL))
    lifted = next(c for c in ranked if c.item_id == "port-b")
    assert lifted.score <= POOL[1].score * (1 + PriorPolicy().score_lift) + 1e-9
    assert lifted.prior <= 1.0


def test_old_feedback_decays_and_another_question_family_counts_less() -> None:
    fresh = priors([record("x", -1.0, 0)], FAMILY, CLOCK)["x"].value
    old = priors([record("x", -1.0, 0, at="2023-06-10T10:00:00Z")], FAMILY, CLOCK)["x"].value
    assert fresh < -0.5 and -0.05 <= old <= 0.0
    other = family_of(plan_query("When is the dentist appointment of anaïs?", NOW))
    assert family_similarity(FAMILY, FAMILY) == 1.0 and family_similarity(FAMILY, other) < 0.2
    elsewhere = priors([record("x", -1.0, 0, family=other)], FAMILY, CLOCK)["x"].value
    assert fresh < elsewhere < 0.0


def test_spread_credit_counts_by_its_certainty() -> None:
    sure = priors([record("x", 1.0, 0)], FAMILY, CLOCK)["x"].value
    spread = priors([record("x", 1.0, 0, certainty=0.25)], FAMILY, CLOCK)["x"].value
    assert 0.0 < spread < sure
