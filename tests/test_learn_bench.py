"""The ``bench learn`` generator: task families with competing memories, valid envelopes."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
from memstream.checkout.plan import plan_query
from memstream.events import parse_inbound
from memstream.matching import candidate_stems, focus_of
from memstream_bench.learn import (
    families,
    howto_families,
    memory_events,
    shown_memories,
    top_answer,
)
from synthdata import NOW, event


def test_families_are_seeded_and_compete_on_one_question() -> None:
    fams = families(12, seed=3)
    assert fams == families(12, seed=3) and fams != families(12, seed=4)
    assert len({f.question for f in fams}) == 12
    for f in fams:
        assert 2 <= len(f.memories) <= 3 and f.right in f.memories
        assert len(set(f.memories.values())) == len(f.memories)
    # the right memory is drawn, not always the last (newest) one told
    assert {sorted(f.memories).index(f.right) for f in fams} != {len(f.memories) - 1}


def test_memory_events_are_valid_envelopes_in_time_order() -> None:
    fams = families(5, seed=1)
    events = memory_events(fams, datetime(2026, 1, 5, 9, tzinfo=UTC))
    parsed = [parse_inbound(orjson.dumps(e)) for e in events]
    assert [p.id for p in parsed][: len(fams[0].memories)] == list(fams[0].memories)
    times = [p.occurred_at for p in parsed]
    assert times == sorted(times)


def test_top_answer_names_the_event_behind_a_fact() -> None:
    assert top_answer({"answer_candidates": []}) is None
    assert top_answer({"answer_candidates": [{"support_ids": ["ev-1#0", "ev-2"]}]}) == "ev-1"


def test_how_to_families_make_the_misleading_memory_the_closer_match() -> None:
    fams = howto_families(8, seed=7)
    assert fams == howto_families(8, seed=7) and len({f.question for f in fams}) == 8
    for f in fams:
        (close,) = [i for i in f.memories if i != f.right]
        focus = focus_of(plan_query(f.question, NOW)).terms
        shared = {
            i: len(focus & candidate_stems(event(i, text.split(": ", 1)[1])))
            for i, text in f.memories.items()
        }
        # closer by more than the prior's bound, and the right one still answers on its own
        assert shared[close] >= shared[f.right] + 2, (f.question, shared)
        assert shared[f.right] >= len(focus) / 2, (f.question, shared)
    events = memory_events(fams, datetime(2026, 1, 5, 9, tzinfo=UTC))
    assert all(parse_inbound(orjson.dumps(e)) for e in events)


def test_shown_memories_are_event_ids_once_in_packet_order() -> None:
    packet = {
        "answer_candidates": [{"support_ids": ["a#0"]}],
        "evidence": [{"support_id": "b"}, {"support_id": "a#1"}],
        "snippets": [{"item_id": "c"}],
    }
    assert shown_memories(packet) == ["a", "b", "c"]
