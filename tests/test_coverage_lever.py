"""The coverage lever's pure parts: which questions gather their answer from many sessions,
and the session-first order their packet's first slots take (hand-written questions and
candidates)."""

from __future__ import annotations

import pytest
from memstream.checkout.plan import plan_query
from memstream.checkout.plan.operation import classify
from memstream.checkout.plan.spread import spreads
from memstream.checkout.retrieve.config import PRESETS, RetrievalConfig
from memstream.checkout.retrieve.coverage import COVERAGE_TOP, by_coverage, covered, session_of
from memstream.records.packet import Candidate
from memstream.records.projected import SourceRef

NOW = "2031-03-10T12:00:00Z"


def cand(item_id: str, score: float, stream: str, at: str = "2030-05-01T10:00:00Z") -> Candidate:
    ref = SourceRef(tenant="t", stream=stream, seq=1, hash="h" * 64, event_id=item_id)
    return Candidate(
        item_id=item_id, kind="event", text=item_id, ref=ref, type="message.user",
        agent="Zoë", occurred_at=at, score=score,
    )  # fmt: skip


@pytest.mark.parametrize(
    "question",
    [
        "What activities does Ana-María do on weekends?",
        "which museums has the user visited?",
        "How many times did Jörg go hiking?",
        "list every book I lent to Priya",
        "What has Beatriz Ó Súilleabháin painted so far?",
        "where have they travelled?",
        "what kinds of desserts does the user bake",
        "WHAT SPORTS DOES LÉA PLAY?",
        "Which instruments has Mr. O'Neil learned?",
        "What did Tomás cook besides paella?",
        "How much did I spend on taxis in total?",
    ],
)
def test_aggregation_questions_spread(question: str) -> None:
    assert spreads(question, classify(question)), question


@pytest.mark.parametrize(
    "question",
    [
        "Where does Ana-María live?",
        "What is the user's sister's name?",
        "When did Jörg move to Oslo?",
        "What does James do for work?",
        "What was his business called?",
        "What status does the ticket have?",
        "which city did the user move to?",
        "Why did Léa quit her job?",
        "",
        "\x00 what \x01",
    ],
)
def test_single_fact_questions_do_not(question: str) -> None:
    assert not spreads(question, classify(question)), question


def test_each_session_gives_its_best_before_a_second_of_like_strength() -> None:
    fused = [
        cand("a1", 0.9, "s-a"),
        cand("a2", 0.8, "s-a"),
        cand("a3", 0.7, "s-a"),
        cand("b1", 0.6, "s-b"),
        cand("a4", 0.55, "s-a", at="2030-05-02T09:00:00Z"),  # the same stream, the next day
        cand("c1", 0.5, "s-c"),
    ]
    got = by_coverage(fused)
    assert [c.item_id for c in got] == ["a1", "b1", "a4", "c1", "a2", "a3"]
    # the scores are handed out again in the new order: later steps sort by score
    assert [c.score for c in got] == [0.9, 0.8, 0.7, 0.6, 0.55, 0.5]
    assert session_of(fused[0]) != session_of(fused[4])


def test_a_second_item_twice_as_strong_as_another_session_s_best_stays_ahead() -> None:
    fused = [cand("a1", 1.0, "s-a"), cand("a2", 0.9, "s-a"), cand("b1", 0.3, "s-b")]
    assert [c.item_id for c in by_coverage(fused)] == ["a1", "a2", "b1"]
    assert [c.item_id for c in by_coverage(fused, decay=0.0)] == ["a1", "b1", "a2"]


def test_only_the_head_is_reordered_and_nothing_is_lost() -> None:
    head = [cand(f"a{n}", 1.0 - n / 100, "s-a") for n in range(COVERAGE_TOP)]
    tail = [cand("late", 0.001, "s-z")]
    got = by_coverage(head + tail)
    assert [c.item_id for c in got] == [c.item_id for c in head + tail]  # one session: as is
    assert by_coverage([]) == []


def test_a_single_fact_question_keeps_the_scored_order() -> None:
    fused = [cand("a1", 0.9, "s-a"), cand("a2", 0.8, "s-a"), cand("b1", 0.6, "s-b")]
    lookup = plan_query("Where does Zoë live now?", NOW)
    assert covered(lookup, fused) == fused
    listing = plan_query("Which cities has Zoë lived in?", NOW)
    assert [c.item_id for c in covered(listing, fused)] == ["a1", "b1", "a2"]


def test_the_lever_is_a_request_switch_reported_in_meta() -> None:
    base = PRESETS["checkout"]
    assert base.with_switches({"coverage": True}).coverage is True
    assert base.with_switches({"coverage": None}) == base
    assert "coverage" in RetrievalConfig().as_meta()
