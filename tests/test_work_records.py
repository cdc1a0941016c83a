"""Records of work (task.*, feedback, proposals) answer questions about the work, never a
question about the world: the plan says which a question is, and synthesis, the weave and
summarize_recall's pool keep to it."""

from __future__ import annotations

import pytest
from memstream.checkout.plan import plan_query
from memstream.checkout.synthesis import synthesize
from memstream.events.envelope import EVENT_TYPES, WORK_EVENT_TYPES
from synthdata import NOW, event

GOAL = "task sauna-7 started: descale the sauna heater of the chalet in Zermatt"
HOW_TO = event("howto", "To descale the sauna heater, run citric acid through it for an hour.")
STARTED = event("t-start", GOAL, "2024-06-07T09:00:00Z", agent="agent-ø", type="task.started")
OUTCOME = event(
    "t-out",
    "task sauna-7 failure: the heater of the chalet still scales",
    "2024-06-08T15:00:00Z",
    type="task.outcome",
)
PROPOSAL = event("p-1", "proposed: the descaling memory may be wrong", type="memory.invalidate")


@pytest.mark.parametrize(
    "question",
    [
        "How do I descale the sauna heater of the chalet in Zermatt?",
        "what does one use to descale a sauna heater",
        "DESCALE THE SAUNA HEATER: WHICH ACID?",
        "Is Ana's job at the chalet still open?",
        "what did the user say about the heater?",
    ],
)
def test_a_question_about_the_world_is_never_answered_by_a_record_of_work(question: str) -> None:
    plan = plan_query(question, NOW)
    assert not plan.about_work
    result = synthesize(plan, [STARTED, OUTCOME, PROPOSAL, HOW_TO])
    support = {i for a in result.answer_candidates for i in a.support_ids}
    assert support <= {"howto"}, result.answer_candidates
    assert {r.support_id for r in result.evidence} <= {"howto"}


def test_only_records_of_work_and_a_world_question_is_no_memory() -> None:
    """Task records that repeat the question are not memory of how to do it."""
    plan = plan_query("How do I descale the sauna heater of the chalet in Zermatt?", NOW)
    result = synthesize(plan, [STARTED, OUTCOME])
    assert result.answerability == "no_memory" and result.answer_candidates == []


@pytest.mark.parametrize(
    "question",
    [
        "Did the sauna descaling task succeed?",
        "what failed at the chalet last week?",
        "Which attempts to descale the heater went wrong?",
        "what feedback did the descaling get?",
        "how many tasks failed?",
    ],
)
def test_a_question_about_the_work_is_answered_from_its_records(question: str) -> None:
    plan = plan_query(question, NOW)
    assert plan.about_work
    result = synthesize(plan, [STARTED, OUTCOME, HOW_TO])
    support = {i for a in result.answer_candidates for i in a.support_ids}
    assert support & {"t-start", "t-out"}, result.answer_candidates


def test_work_and_knowledge_split_every_event_type() -> None:
    assert set(EVENT_TYPES) > WORK_EVENT_TYPES
    plan = plan_query("how do I descale it?", NOW)
    assert [t for t in EVENT_TYPES if not plan.admits(t)] == sorted(
        WORK_EVENT_TYPES, key=EVENT_TYPES.index
    )
    assert plan.admits("fact")  # a fact read from the graph is knowledge
