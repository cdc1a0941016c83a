"""The labelled conversations that ship for training (bench/labelled): in the LoCoMo shape
``bench train`` reads, every label pointing at a turn that exists."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memstream_bench.locomo import conversation_events, session_time, tenant_of

FILE = Path(__file__).resolve().parents[1] / "bench" / "labelled" / "scenarios.json"


def _samples() -> list[dict[str, Any]]:
    samples: list[dict[str, Any]] = json.loads(FILE.read_text(encoding="utf-8"))
    return samples


def test_every_label_points_at_a_turn_of_its_conversation() -> None:
    samples = _samples()
    assert len({tenant_of(s) for s in samples}) == len(samples) >= 3
    for s in samples:
        _tenant, events, turns = conversation_events(s)
        assert len(events) == len(turns)
        for q in s["qa"]:
            assert q["question"].strip() and q["evidence"], q
            assert set(q["evidence"]) <= turns, (s["sample_id"], q)
            assert q["category"] in {1, 2, 3, 4, 5}
            # the unanswerable keep the trap answer apart, as the benchmark's file does
            assert ("adversarial_answer" in q) == (q["category"] == 5), q


def test_every_kind_of_question_is_labelled_in_every_conversation() -> None:
    for s in _samples():
        kinds = {q["category"] for q in s["qa"]}
        assert kinds == {1, 2, 3, 4, 5}, s["sample_id"]
        multi = [q for q in s["qa"] if q["category"] == 1]
        assert all(len(q["evidence"]) >= 2 for q in multi), s["sample_id"]


def test_the_sessions_are_dated_and_in_order_and_the_speakers_are_the_two_named() -> None:
    for s in _samples():
        conv = s["conversation"]
        keys = sorted(
            (int(m.group(1)), k) for k in conv if (m := re.fullmatch(r"session_(\d+)", k))
        )
        times = [session_time(conv[f"{k}_date_time"]) for _, k in keys]
        assert times == sorted(times) and len(set(times)) == len(times)
        speakers = {t["speaker"] for _, k in keys for t in conv[k]}
        assert speakers == {conv["speaker_a"], conv["speaker_b"]}
