"""The calibrated answerability: the rules' verdicts kept as features (a vetoed answer stays,
its veto a warning), the probability deciding answerability and confidence, the shipped model,
and the training's calibration figures and folds (by conversation)."""

from __future__ import annotations

import random

import lightgbm
import numpy as np
import pytest
from memstream.checkout.plan import plan_query
from memstream.checkout.synthesis import synthesize
from memstream.checkout.synthesis.answerable import (
    ANSWER_FEATURES,
    KINDS,
    THRESHOLD,
    VERDICTS,
    Judge,
    JudgeMismatchError,
    answer_features,
    judged,
    shipped,
)
from memstream.records.packet import AnswerCandidate, SynthesisResult
from memstream_bench.judge import Packet, cross_validate, rates
from memstream_bench.locomo import calibration_error
from memstream_bench.stats import calibration
from synthdata import NOW, event

AT = {name: i for i, name in enumerate(ANSWER_FEATURES)}
NAMELESS = "The heater was fixed on Tuesday after the lock timeout."


def _nameless(vetoes: bool) -> SynthesisResult:
    return synthesize(
        plan_query("who fixed the heater", NOW), [event("e", NAMELESS, agent="ops")], vetoes=vetoes
    )


def test_a_vetoed_answer_is_kept_with_its_veto_when_a_judge_decides() -> None:
    ruled, kept = _nameless(True), _nameless(False)
    assert ruled.answerability == kept.answerability == "ask_user"
    assert not any(a.support_ids for a in ruled.answer_candidates)
    assert kept.answer_candidates[0].support_ids == ["e"]
    assert [w.message for w in kept.warnings] == [w.message for w in ruled.warnings]


def test_an_answer_no_rule_vetoes_is_the_same_either_way() -> None:
    plan = plan_query("Who fixed the heater?", NOW)
    told = [event("e", "Ana Lúcia fixed the heater on Tuesday.", agent="ops")]
    assert synthesize(plan, told, vetoes=False) == synthesize(plan, told)


def test_the_features_hold_the_rules_verdict_and_what_retrieval_knows() -> None:
    plan = plan_query("who fixed the heater", NOW)
    pool = [event("e", NAMELESS, agent="ops"), event("f", "Lunch was fine.", agent="ops")]
    row = answer_features(plan, synthesize(plan, pool, vetoes=False), pool)
    assert len(row) == len(ANSWER_FEATURES)
    assert row[AT["verdict"]] == VERDICTS.index("ask_user")
    assert row[AT["answers"]] == 1.0 and row[AT["top_support"]] == 1.0
    assert row[AT["warn_missing_evidence"]] == 1.0 and row[AT["warn_contradiction"]] == 0.0
    assert row[AT["candidates"]] == 2.0
    assert row[AT["coverage_best"]] >= row[AT["coverage_mean"]] >= 0.0
    assert row[AT["in_window_share"]] == -1.0  # the question names no period
    empty = answer_features(plan, synthesize(plan, []), [])
    assert empty[AT["verdict"]] == VERDICTS.index("no_memory") and empty[AT["answers"]] == 0.0


def test_no_feature_is_a_word() -> None:
    # every name is a verdict, a count, a warning kind, a retrieval signal or the plan's
    assert {f"warn_{k}" for k in KINDS} <= set(ANSWER_FEATURES)
    assert len(set(ANSWER_FEATURES)) == len(ANSWER_FEATURES)


def _result(verdict: str, confidences: list[float]) -> SynthesisResult:
    answers = [
        AnswerCandidate(answer=f"a{i}", confidence=c, support_ids=[f"e{i}"])
        for i, c in enumerate(confidences)
    ]
    return SynthesisResult(
        answerability=verdict,  # type: ignore[arg-type]
        answer_candidates=answers,
        warnings=[],
        evidence=[],
    )


@pytest.mark.parametrize("verdict", ["answer_from_memory", "ask_user"])
def test_the_probability_decides_answerability_and_confidence(verdict: str) -> None:
    sure = judged(_result(verdict, [0.8, 0.4]), 0.9)
    assert sure.answerability == "answer_from_memory"
    assert [a.confidence for a in sure.answer_candidates] == [0.9, 0.45]
    doubt = judged(_result(verdict, [0.8, 0.4]), 0.2)
    assert doubt.answerability == "ask_user"
    assert [a.confidence for a in doubt.answer_candidates] == [0.2, 0.1]
    assert doubt.warnings[-1].kind == "low_confidence" and "0.20" in doubt.warnings[-1].message


def test_a_refresh_stays_a_refresh_and_nothing_stays_nothing() -> None:
    assert judged(_result("refresh_recommended", [0.7]), 0.95).answerability == (
        "refresh_recommended"
    )
    assert judged(_result("refresh_recommended", [0.7]), 0.1).answerability == "ask_user"
    assert judged(_result("no_memory", []), 0.99).answerability == "no_memory"
    at = judged(_result("ask_user", []), THRESHOLD)  # the threshold answers
    assert at.answerability == "answer_from_memory" and at.answer_candidates == []


def test_the_shipped_model_reads_todays_features_and_gives_a_probability() -> None:
    judge = shipped()
    assert tuple(judge.booster.feature_name()) == ANSWER_FEATURES
    assert len(judge.model_id) == 12
    plan = plan_query("who fixed the heater", NOW)
    pool = [event("e", NAMELESS, agent="ops")]
    p = judge.probability(answer_features(plan, synthesize(plan, pool, vetoes=False), pool))
    assert 0.0 <= p <= 1.0


def test_a_model_of_other_features_is_refused() -> None:
    rows = np.asarray([[random.Random(i).random() for _ in range(3)] for i in range(50)])
    booster = lightgbm.train(
        {"objective": "binary", "verbose": -1, "min_data_in_leaf": 5, "num_threads": 1},
        lightgbm.Dataset(rows, (rows[:, 0] > 0.5).astype(float), feature_name=["a", "b", "c"]),
        num_boost_round=2,
    )
    with pytest.raises(JudgeMismatchError, match="the packet gives"):
        Judge.from_text(booster.model_to_string())


def test_the_calibration_error_weighs_each_bin_by_its_share() -> None:
    ece, bins = calibration([0.05, 0.05, 0.95, 0.95], [0, 0, 1, 1])
    assert ece == pytest.approx(0.05)
    assert [b["packets"] for b in bins if b["packets"]] == [2, 2]
    off, _ = calibration([0.9, 0.9, 0.9, 0.9], [1, 0, 0, 0])  # says 0.9, answers 0.25
    assert off == pytest.approx(0.65)
    one, _ = calibration([1.0], [1])  # a probability of exactly 1 is in the last bin
    assert one == 0.0


def test_the_served_confidence_is_scored_as_a_probability_that_memory_answers() -> None:
    rows = [
        {"category": 5, "answerability": "answer_from_memory", "confidence": 0.9},
        {"category": 2, "answerability": "ask_user", "confidence": 0.7, "evidence_in_top": True},
        {"category": 1, "answerability": "answer_from_memory", "confidence": 0.9,
         "evidence_in_top": True},
        {"category": 3, "answerability": "ask_user", "confidence": 0.0, "evidence_in_top": None},
    ]  # fmt: skip
    # bins: 0.0 (an abstention that held evidence: 0 vs 1), 0.9 (two packets, one answered)
    assert calibration_error(rows) == pytest.approx(1 / 3 * 1.0 + 2 / 3 * 0.4)
    assert calibration_error(rows[3:]) is None


def _packet(conv: str, category: int, label: int, verdict: str = "ask_user") -> Packet:
    row = [0.0] * len(ANSWER_FEATURES)
    row[AT["verdict"]] = float(VERDICTS.index(verdict))
    return Packet(conv, category, row, label)


def test_the_rates_count_unanswerable_and_held_evidence_apart() -> None:
    packets = [_packet("c1", 5, 0), _packet("c1", 5, 0), _packet("c1", 2, 1), _packet("c1", 1, 0)]
    got = rates(packets, [True, False, True, True])
    assert got["abstained_unanswerable"] == 0.5 and got["unanswerable"] == 2
    # the category-1 question whose evidence the packet missed is in neither rate
    assert got["abstained_with_evidence"] == 1.0 and got["answerable_with_evidence"] == 1


def test_the_folds_pool_every_conversations_packets_and_stay_calibrated() -> None:
    rng = random.Random(5)
    packets = []
    for conv in ("c1", "c2", "c3"):
        for _ in range(80):
            answered = rng.random() < 0.5
            verdict = "answer_from_memory" if answered == (rng.random() < 0.85) else "ask_user"
            cat = rng.choice([1, 2, 4]) if answered or rng.random() < 0.5 else 5
            packets.append(_packet(conv, cat, int(answered and cat != 5), verdict))
    doc = cross_validate(packets)
    assert doc["packets"] == len(packets)
    assert doc["rules"]["abstained_unanswerable"] is not None
    # the verdict is the only signal: the learned rates follow it, and stay calibrated
    assert doc["ece"] < 0.1
    assert sum(b["packets"] for b in doc["reliability"]) == len(packets)
    assert set(doc["thresholds"]) == {"0.30", "0.40", "0.50", "0.60", "0.70"}
