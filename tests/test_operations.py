"""Every evidence operation, on hand-written shopping, travel and project memories."""

from __future__ import annotations

import pytest
from memstream.checkout.plan import plan_query
from memstream.checkout.synthesis import synthesize
from memstream.records.packet import Candidate, SynthesisResult
from synthdata import NOW, event, fact

SHOP = [
    event("buy-1", "I bought a desk lamp for $40 today.", "2024-05-02T10:00:00Z"),
    event("buy-2", "The new rug cost $120.", "2024-05-03T10:00:00Z"),
    event("buy-4", "Picked up a coffee table for $200.", "2024-05-05T10:00:00Z"),
    event("note", "Meeting with the landlord went fine.", "2024-05-05T11:00:00Z"),
]
TRIP = [
    event("t5", "Left for Rome on April 1, 2024.", "2024-03-30T10:00:00Z"),
    event("t6", "Back home from Rome, arrived April 9, 2024.", "2024-04-09T20:00:00Z"),
    event("t7", "Booked the Lisbon apartment for the summer.", "2024-04-20T10:00:00Z"),
    event("g1", "Went to the gym after work.", "2024-05-06T18:00:00Z"),
    event("g2", "Leg day at the gym, exhausting.", "2024-05-08T18:00:00Z"),
    event("g3", "Skipped the gym, too tired.", "2024-05-10T18:00:00Z"),
]
PROJECTS = [
    fact("p1#0", "Project Atlas", "budget", value=5000, unit="USD"),
    fact("p2#0", "Project Orion", "budget", value=8000, unit="usd"),
    fact("p3#0", "Project Vega", "budget", value=3500, unit="$"),
]


def ask(query: str, cands: list[Candidate], as_of: str | None = None) -> SynthesisResult:
    return synthesize(plan_query(query, NOW, as_of), cands)


def top(res: SynthesisResult) -> tuple[str, object, list[str]]:
    assert res.answer_candidates, res
    a = res.answer_candidates[0]
    return a.answer, a.value, a.support_ids


def test_lookup_fact_and_event() -> None:
    res = ask("What is the budget of Project Orion?", PROJECTS)
    assert res.answerability == "answer_from_memory"
    assert top(res) == ("$8,000", 8000, ["p2#0"])
    res = ask("What did the landlord say at the meeting?", SHOP)
    answer, _, ids = top(res)
    assert ids == ["note"] and "landlord" in answer


def test_lookup_date_and_entity() -> None:
    assert top(ask("When did I buy the rug?", SHOP))[0] == "2024-05-03"
    homes = [fact("h#0", "Marta", "lives_in", obj="Porto")]
    assert top(ask("Who lives in Porto?", homes))[0] == "marta"


def test_count_distinct_items() -> None:
    answer, value, ids = top(ask("How many times did I train at the gym?", TRIP))
    assert (answer, value) == ("3", 3) and sorted(ids) == ["g1", "g2", "g3"]


def test_count_in_a_stated_unit_sums_those_numbers() -> None:
    cands = [
        event("k1", "I bought 2 tickets for the concert.", "2024-05-01T10:00:00Z"),
        event("k2", "Got 3 tickets for the museum too.", "2024-05-02T10:00:00Z"),
    ]
    answer, value, _ = top(ask("How many tickets did I buy?", cands))
    assert value == 5 and answer == "5 tickets"


def test_sum() -> None:
    answer, value, ids = top(ask("How much did I spend in total?", SHOP))
    assert value == 360 and answer == "$360 in total" and sorted(ids) == ["buy-1", "buy-2", "buy-4"]


def test_sum_ignores_a_rate_restated_by_a_total() -> None:
    cands = [
        event("h1", "The hostel was €30 per night, €90 for the three nights."),
        event("h2", "Museum pass: €40."),
    ]
    assert top(ask("How much did I spend altogether?", cands))[1] == 130


def test_difference() -> None:
    answer, value, ids = top(ask("How much more did the rug cost than the lamp?", SHOP))
    assert value == 80 and sorted(ids) == ["buy-1", "buy-2"]
    assert answer.startswith("$80 (rug $120 vs lamp $40")


def test_difference_with_one_side_is_missing_evidence() -> None:
    res = ask("How much more did the rug cost than the sofa?", SHOP)
    assert res.answerability == "ask_user" and not res.answer_candidates
    assert any(w.kind == "missing_evidence" for w in res.warnings)


def test_average() -> None:
    answer, value, _ = top(ask("What is the average budget of my projects?", PROJECTS))
    assert value == pytest.approx(5500) and answer.startswith("$5,500 on average")


def test_argmax_and_argmin() -> None:
    answer, value, ids = top(ask("Which project has the highest budget?", PROJECTS))
    assert value == 8000 and ids[0] == "p2#0" and "orion" in answer
    answer, value, ids = top(ask("Which project has the lowest budget?", PROJECTS))
    assert value == 3500 and ids[0] == "p3#0" and "vega" in answer
    answer, value, ids = top(ask("What was the cheapest thing I bought?", SHOP))
    assert value == 40 and ids[0] == "buy-1" and "lamp" in answer


def test_latest_value_over_events_excludes_older_values() -> None:
    rent = [
        event("r1", "My rent is $1,200 a month.", "2024-01-05T10:00:00Z"),
        event("r2", "The rent went up to $1,350.", "2024-05-01T10:00:00Z"),
    ]
    res = ask("How much is my rent now?", rent)
    a = res.answer_candidates[0]
    assert res.answerability == "answer_from_memory"
    assert a.value == 1350 and a.support_ids == ["r2"] and a.answer.startswith("$1,350")
    assert [(e.item_id, e.reason) for e in a.excluded_ids] == [("r1", "superseded")]


def test_latest_value_goes_stale() -> None:
    rent = [event("r1", "My rent is $1,200 a month.", "2022-01-05T10:00:00Z")]
    res = ask("How much is my rent now?", rent)
    assert res.answerability == "refresh_recommended"
    assert [w.kind for w in res.warnings] == ["stale"]
    fresh = synthesize(plan_query("How much is my rent now?", NOW), rent, stale_after_days=5000)
    assert fresh.answerability == "answer_from_memory"


def test_temporal_interval_between_dated_events() -> None:
    answer, value, ids = top(ask("How long was I in Rome?", TRIP))
    assert value == 8 and sorted(ids) == ["t5", "t6"] and answer.startswith("8 days")


def test_temporal_interval_of_a_fact_and_in_weeks() -> None:
    homes = [
        fact(
            "h1#0",
            "Marta",
            "lives_in",
            obj="Lisbon",
            valid_from="2024-01-01T00:00:00Z",
            valid_to="2024-03-11T00:00:00Z",
            superseded_by="h2#0",
        ),
        fact("h2#0", "Marta", "lives_in", obj="Porto", valid_from="2024-03-11T00:00:00Z"),
    ]
    answer, value, ids = top(ask("How long did Marta live in Lisbon?", homes))
    assert value == 70 and ids == ["h1#0"] and "2024-01-01 to 2024-03-11" in answer
    answer, value, _ = top(ask("How many weeks has Marta lived in Porto?", homes))
    assert value == pytest.approx(13.35, abs=0.01) and answer.startswith("13.35 weeks")
    assert top(ask("Since when does Marta live in Porto?", homes))[0] == "2024-03-11"


def test_temporal_order() -> None:
    answer, value, ids = top(ask("Which came first, the rug or the lamp?", SHOP))
    assert value == ["lamp", "rug"] and ids == ["buy-1", "buy-2"]
    assert answer == "lamp (2024-05-02) came before rug (2024-05-03)"
    answer, value, _ = top(ask("In what order did I train at the gym?", TRIP))
    assert (
        isinstance(value, list)
        and len(value) == 3
        and answer.index("05-06") < answer.index("05-10")
    )


def test_list_deduplicates_repeats() -> None:
    cands = [
        event("c1", "Planted basil on the balcony.", "2024-04-01T10:00:00Z"),
        event("c2", "Planted basil on the balcony.", "2024-04-02T10:00:00Z"),
        event("c3", "Put a lemon tree on the balcony.", "2024-04-03T10:00:00Z"),
    ]
    res = ask("List all the plants on the balcony.", cands)
    a = res.answer_candidates[0]
    assert a.support_ids == ["c1", "c3"] and isinstance(a.value, list) and len(a.value) == 2
    assert [(e.item_id, e.reason) for e in a.excluded_ids] == [("c2", "duplicate")]


def test_absence() -> None:
    res = ask("Did I ever go to Rome?", TRIP)
    assert res.answerability == "answer_from_memory"
    assert res.answer_candidates[0].value is True
    res = ask("Did I ever go to Tokyo?", TRIP)
    assert res.answerability == "ask_user"
    (a,) = res.answer_candidates
    assert a.value is False and a.support_ids == []
