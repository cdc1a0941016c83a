"""The query-side levers' pure parts: time ranges anchored on memory's dates, the second
hop's entities, and the cheap reranker (hand-written questions and candidates)."""

from __future__ import annotations

from datetime import date

import pytest
from memstream.checkout.plan import plan_query
from memstream.checkout.plan.anchored import Offset, in_ranges, named_ranges, offsets
from memstream.checkout.plan.entities import Lexicon
from memstream.checkout.plan.window import find_window
from memstream.checkout.retrieve.features import signals
from memstream.checkout.retrieve.lanes import Lanes
from memstream.checkout.retrieve.reach import anchor_days, candidate_days, hop_keys, hop_terms
from memstream.checkout.retrieve.rerank import gain, rerank
from memstream.records.packet import Candidate, SynthesisPlan
from memstream.records.projected import DateRecord, EntityView, SourceRef

NOW = date(2031, 3, 10)
AUG_2029 = date(2029, 8, 14)


def cand(
    item_id: str,
    text: str = "",
    *,
    agent: str = "Zoë",
    at: str = "2029-08-14T10:00:00Z",
    stream: str = "s1",
    seq: int = 0,
    score: float = 0.01,
    keys: list[str] | None = None,
    dates: list[DateRecord] | None = None,
    kind: str = "event",
) -> Candidate:
    ref = SourceRef(tenant="t", stream=stream, seq=seq, hash="h" * 64, event_id=item_id)
    return Candidate(
        item_id=item_id, kind=kind, text=text, ref=ref, type="message.user",  # type: ignore[arg-type]
        agent=agent, occurred_at=at, score=score, entity_keys=keys or [], dates=dates or [],
    )  # fmt: skip


# -- time ranges ------------------------------------------------------------------------------


def test_a_month_without_a_year_resolves_against_every_anchor_and_now() -> None:
    ranges = named_ranges("what did zoë bake last june?", [AUG_2029, NOW])
    assert (date(2029, 6, 1), date(2029, 7, 1)) in ranges  # the June before the hits
    assert (date(2030, 6, 1), date(2030, 7, 1)) in ranges  # the June before now
    assert in_ranges([date(2029, 6, 20)], ranges)
    assert not in_ranges([date(2029, 8, 1)], ranges)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Which city did the user move to in 2027?", (date(2027, 1, 1), date(2028, 1, 1))),
        ("What did Ana-María cook in May 2030?", (date(2030, 5, 1), date(2030, 6, 1))),
        ("WHAT HAPPENED IN 2027", (date(2027, 1, 1), date(2028, 1, 1))),
    ],
)
def test_a_date_with_its_year_names_one_period_whatever_the_anchors(
    question: str, expected: tuple[date, date]
) -> None:
    assert named_ranges(question, [AUG_2029, date(2025, 1, 2), NOW]) == [expected]


def test_yesterday_is_the_day_before_each_anchor() -> None:
    ranges = named_ranges("What did the user and Léa argue about yesterday?", [AUG_2029])
    assert ranges == [(date(2029, 8, 13), date(2029, 8, 14))]


def test_a_bound_is_not_a_period_to_look_in() -> None:
    assert named_ranges("What has Zoë read since March 2030?", [AUG_2029, NOW]) == []
    assert named_ranges("what did he own before 2029", [NOW]) == []


def test_a_question_without_dates_names_no_period() -> None:
    assert named_ranges("When did Zoë start pottery classes?", [AUG_2029, NOW]) == []
    assert offsets("When did Zoë start pottery classes?") == []


@pytest.mark.parametrize(
    ("question", "days", "unit", "anchor"),
    [
        ("What did Zoë buy two weeks before the kayak trip?", -14, 7, "the kayak trip"),
        ("what did the user do 3 days after Jean-Luc's wedding", 3, 1, "Jean-Luc's wedding"),
        ("Where did they go the week after?", 7, 7, ""),
        ("What happened a couple of months prior to Inès's move?", -62, 31, "Inès's move"),
        ("Who called the day before the exam, and why?", -1, 1, "the exam"),
    ],
)  # fmt: skip
def test_offsets_read_count_unit_side_and_what_they_count_from(
    question: str, days: int, unit: int, anchor: str
) -> None:
    assert offsets(question) == [Offset(days, unit, anchor)]


def test_an_offset_range_lies_on_its_side_of_the_anchor_one_unit_wider() -> None:
    before = Offset(-14, 7, "the trip").around(AUG_2029)
    assert before == (date(2029, 7, 24), date(2029, 8, 15))
    after = Offset(1, 1, "").around(AUG_2029)
    assert after == (date(2029, 8, 14), date(2029, 8, 17))


# -- what the lanes reach for -----------------------------------------------------------------


def test_a_candidate_belongs_to_its_day_and_the_days_it_speaks_of() -> None:
    said = DateRecord(text="last week", date="2029-08-07", relative=True)
    c = cand("e1", "We went kayaking last week", dates=[said])
    assert candidate_days(c) == [AUG_2029, date(2029, 8, 7)]
    assert candidate_days(cand("e2", at="not a time")) == []


def test_anchors_are_the_best_events_days_then_now() -> None:
    best = [
        cand("f", kind="fact", at="2020-01-01T00:00:00Z"),
        cand("a", at="2029-08-14T10:00:00Z"),
        cand("b", at="2029-08-14T11:00:00Z"),
        cand("c", at="2029-09-02T09:00:00+02:00"),
    ]
    assert anchor_days(best, NOW) == [AUG_2029, date(2029, 9, 2), NOW]
    assert anchor_days([], None) == []


def test_the_second_hop_takes_entities_the_question_does_not_name() -> None:
    plan = plan_query("What did Zoë's mentor recommend?", "2031-03-10T00:00:00Z")
    assert "zoe" in plan.entity_keys()
    best = [
        cand("a", keys=["zoe", "marc-andre dupuis"]),
        cand("b", keys=["marc-andre dupuis", "lyon"]),
        cand("c", keys=["zoe"]),
        cand("d", keys=["lyon", "marc-andre dupuis"]),
        cand("e", kind="fact", keys=["bakery"]),
    ]
    assert hop_keys(plan, best) == ["marc-andre dupuis", "lyon"]
    assert hop_keys(plan, [cand("x", keys=["zoe"])]) == []


def test_the_second_hop_adds_words_the_best_hits_share_and_the_question_lacks() -> None:
    plan = plan_query("What does Zoë do on weekends?", "2031-03-10T00:00:00Z")
    best = [
        cand("a", "Pottery class again, my glazes cracked in the kiln"),
        cand("b", "The KILN at the pottery studio is finally fixed!"),
        cand("c", "Zoë, weekends are for pottery and kilns, right?"),
        cand("d", "Groceries, then laundry."),
        cand("e", "pottery pottery pottery", kind="fact"),
    ]
    # "pottery" in three hits, "kiln"/"kilns" (one stem) in three; "weekends" is asked
    assert hop_terms(plan, best) == ["pottery", "kiln"]
    assert hop_terms(plan, best[3:]) == []  # nothing shared


# -- reranking --------------------------------------------------------------------------------


def _plan(question: str) -> SynthesisPlan:
    return plan_query(question, "2031-03-10T00:00:00Z")


def test_an_item_saying_the_questions_words_rises_above_small_talk() -> None:
    plan = _plan("Which instrument is the user learning?")
    fused = [
        cand("chat", "Haha that's great, thanks so much!", score=0.030, seq=1),
        cand("ans", "I'm learning the cello, my first instrument", score=0.027, seq=9),
        cand("far", "The weather was awful", score=0.010, seq=20),
    ]
    out = rerank(plan, fused)
    assert [c.item_id for c in out] == ["ans", "chat", "far"]
    assert out[0].score > 0.027  # rescored, so later sorts keep the order


def test_the_named_speaker_and_neighbouring_hits_weigh_in() -> None:
    people = Lexicon.build([EntityView(key="jean-luc", name="Jean-Luc", kind="person", actor=True)])
    plan = plan_query(
        "what does jean-luc think about the move", "2031-03-10T00:00:00Z", None, people
    )
    assert plan.entity_keys() == ["jean-luc"]
    (named,) = signals(plan, [cand("a", agent="Jean-Luc")])
    (other,) = signals(plan, [cand("b", agent="Noor")])
    assert gain(named) > 1.0 and named.speaker
    assert gain(other) == 1.0
    # two equal turns; the one beside two other hits of its stream comes first
    fused = [
        cand("alone", "ok", score=0.02, stream="s2", seq=50, agent="Noor"),
        cand("mid", "ok", score=0.02, stream="s1", seq=5, agent="Noor"),
        cand("left", "hm", score=0.01, stream="s1", seq=4, agent="Noor"),
        cand("right", "hm", score=0.01, stream="s1", seq=6, agent="Noor"),
    ]
    assert [c.item_id for c in rerank(plan, fused)][:1] == ["mid"]


def test_rerank_only_reorders_the_top_and_keeps_every_item() -> None:
    plan = _plan("Which instrument is the user learning?")
    fused = [cand(f"c{i}", "nothing", score=1.0 - i / 100, seq=10 * i) for i in range(5)]
    fused.append(cand("late", "learning an instrument", score=0.001, seq=99))
    out = rerank(plan, fused, top=5)
    assert [c.item_id for c in out] == [c.item_id for c in fused]
    assert rerank(plan, [], top=5) == []


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("What did Zoë buy last June?", "2030-06-01", "2030-07-01"),
        ("what is planned for next june", "2031-06-01", "2031-07-01"),
        ("Where was the user THIS MARCH?", "2031-03-01", "2031-04-01"),
        ("Who visited last March?", "2030-03-01", "2030-04-01"),  # not the month we are in
    ],
)
def test_the_plan_window_reads_last_next_and_this_month(
    question: str, start: str, end: str
) -> None:
    window, _spans = find_window(question, "2031-03-10T09:00:00Z")
    assert window is not None and (window.start, window.end) == (start, end)


def test_control_characters_and_long_questions_read_like_any_other() -> None:
    assert named_ranges("what\x00 happened\x01 in 2027?\x7f", [NOW]) == [
        (date(2027, 1, 1), date(2028, 1, 1))
    ]
    assert offsets("two weeks before \x00the trip\x1b") == [Offset(-14, 7, "\x00the trip\x1b")]
    long = "last june, " * 350  # one period, however often it is said
    assert named_ranges(long, [AUG_2029]) == [(date(2029, 6, 1), date(2029, 7, 1))]
    assert offsets("x " * 2000) == []


def test_anchors_at_the_ends_of_the_calendar_give_no_impossible_period() -> None:
    # next December of 9999, last June of year 1: those anchors resolve nothing, others do
    edges = [date(9999, 12, 30), date(1, 1, 2), AUG_2029]
    ranges = named_ranges("what happened next december, last june and yesterday?", edges)
    assert ranges == [
        (date(2029, 12, 1), date(2030, 1, 1)),
        (date(2029, 6, 1), date(2029, 7, 1)),
        (date(2029, 8, 13), date(2029, 8, 14)),
    ]
    assert Offset(14, 7, "").around(date.max) == (date.max, date.max)
    assert Offset(-14, 7, "").around(date(1, 1, 3)) == (date.min, date(1, 1, 4))


def test_a_huge_count_is_capped_not_an_overflow() -> None:
    (off,) = offsets("what happened 99999999999999 years before the trip?")
    assert off.days == -10_000 * 366
    start, end = off.around(AUG_2029)
    assert start == date.min and end == date(2029, 8, 15)


# -- vote depth -------------------------------------------------------------------------------

# The lanes that search the same index with other filters, each ranking the same item 26th.
ECHOING = ("dense", "speaker_dense", "speaker_sparse", "mention_dense", "mention_sparse")


def _echoed_pool() -> Lanes:
    """ "the tram pass" first in the sparse lane alone; "the bike shed" 26th in five lanes."""
    lanes = Lanes()
    lanes.add("sparse", cand("tram", "Ørjan's tram pass ran out on Friday"))
    for lane in ECHOING:
        for n in range(25):
            lanes.add(lane, cand(f"{lane}-{n}", f"filler {n}"))
        lanes.add(lane, cand("shed", "the bike shed needs a new lock"))
    return lanes


def test_a_lane_votes_with_its_best_items_only_so_deep_echoes_do_not_outrank_a_top_hit() -> None:
    lanes = _echoed_pool()
    every_rank = [c.item_id for c in lanes.fused()]
    assert every_rank.index("shed") < every_rank.index("tram")  # five weak votes outweigh one
    top = [c.item_id for c in lanes.fused(depth=20)]
    assert top.index("tram") < 5  # level with the other lanes' first items
    # the deep item stays a candidate, after every item some lane ranked within the depth
    voted = {
        c.item_id for lane in lanes.ranked.values() for c in (lanes.items[i] for i in lane[:20])
    }
    assert "shed" in top and top.index("shed") >= len(voted)
    assert len(top) == len(every_rank)


def test_within_the_depth_the_fusion_is_unchanged() -> None:
    lanes = _echoed_pool()
    deep = lanes.fused(depth=100)
    assert [(c.item_id, c.score) for c in deep] == [(c.item_id, c.score) for c in lanes.fused()]


def test_the_best_items_come_in_the_fused_order_without_copying_the_pool() -> None:
    lanes = _echoed_pool()
    lanes.add("time", cand("tram", "Ørjan's tram pass ran out on Friday"))
    lanes.add("fact", cand("zoë#1", "zoë lives_in Ålesund", kind="fact"))
    for depth in (None, 1, 20, 100):
        fused = lanes.fused(depth)
        best = lanes.best(depth)
        assert [c.item_id for c in best] == [c.item_id for c in fused]
        # the pool's own items, unscored: the fused copies carry the score and the lanes
        assert all(b is lanes.items[b.item_id] for b in best)
        assert [b.model_copy(update={
            "score": f.score, "lanes": f.lanes, "lane_ranks": f.lane_ranks
        }) for b, f in zip(best, fused, strict=True)] == fused  # fmt: skip
    tram = next(c for c in lanes.fused() if c.item_id == "tram")
    assert tram.lanes == ["sparse", "time"] and tram.lane_ranks == {"sparse": 0, "time": 0}
    assert Lanes().best() == Lanes().fused() == []
