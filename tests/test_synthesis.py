"""Synthesis: de-duplication, units, supersession/as_of, windows, answerability, citations."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from memstream.checkout.plan import plan_query
from memstream.checkout.synthesis import synthesize
from memstream.checkout.synthesis.evidence import evidence_rows
from memstream.records.packet import Candidate, JsonScalar, SynthesisResult
from synthdata import NOW, event, fact

PURCHASES = [
    event("buy-1", "I bought a desk lamp for $40 today.", "2024-05-02T10:00:00Z"),
    event("buy-2", "The new rug cost $120.", "2024-05-03T10:00:00Z"),
    event("buy-3", "Reminder to self: the desk lamp was $40.", "2024-05-04T10:00:00Z"),
    event("buy-4", "Picked up a coffee table for $200.", "2024-05-05T10:00:00Z"),
]
HOMES = [
    fact(
        "home-1#0",
        "Marta",
        "lives_in",
        obj="Lisbon",
        valid_from="2024-01-01T00:00:00Z",
        valid_to="2024-06-01T00:00:00Z",
        superseded_by="home-2#0",
    ),
    fact("home-2#0", "Marta", "lives_in", obj="Porto", valid_from="2024-06-01T00:00:00Z"),
    event("home-1", "Marta lives_in Lisbon", "2024-01-02T09:00:00Z"),
    event("home-2", "Marta lives_in Porto", "2024-06-02T09:00:00Z"),
]


def ask(query: str, cands: list[Candidate], as_of: str | None = None) -> SynthesisResult:
    return synthesize(plan_query(query, NOW, as_of), cands)


def reasons(res: SynthesisResult) -> dict[str, str]:
    return {e.item_id: e.reason for e in res.answer_candidates[0].excluded_ids}


# --- evidence rows -------------------------------------------------------------------------


def test_evidence_rows_per_quantity_and_per_event() -> None:
    cand = event("e1", "Paid $12 for lunch and $25 for the bike chain.", "2024-05-01T10:00:00Z")
    rows = evidence_rows(plan_query("How much did I spend?", NOW), [cand])
    assert [(r.value, r.unit) for r in rows] == [(12.0, "USD"), (25.0, "USD")]
    assert "lunch" in rows[0].label and "bike chain" in rows[1].label
    assert "lunch" not in rows[1].label and all(r.support_id == "e1" for r in rows)
    (text,) = evidence_rows(plan_query("What did I do for lunch?", NOW), [cand])
    assert text.value is None and text.label == cand.text
    (f,) = evidence_rows(plan_query("Where does Marta live?", NOW), HOMES[1:2])
    assert (f.value, f.entity, f.label, f.time) == (
        "Porto",
        "marta",
        "lives in",
        "2024-06-01T00:00:00Z",
    )


def test_the_source_event_of_a_fact_is_not_a_second_row() -> None:
    rows = evidence_rows(plan_query("Where does Marta live?", NOW), HOMES)
    assert sorted(r.support_id for r in rows) == ["home-1#0", "home-2#0"]


def test_a_resolved_date_in_the_text_is_the_row_time() -> None:
    cand = event("e1", "The plumber came yesterday and charged $90.", "2024-05-10T10:00:00Z")
    (row,) = evidence_rows(plan_query("How much did the plumber charge?", NOW), [cand])
    assert row.time == "2024-05-09"


# --- de-duplication ------------------------------------------------------------------------


def test_an_item_mentioned_twice_sums_once() -> None:
    res = ask("How much did I spend in total on the desk lamp, rug and coffee table?", PURCHASES)
    a = res.answer_candidates[0]
    assert res.answerability == "answer_from_memory"
    assert a.value == 360 and a.unit == "USD" and a.answer == "$360 in total"
    assert sorted(a.support_ids) == ["buy-1", "buy-2", "buy-4"]
    (dup,) = [e for e in a.excluded_ids if e.reason == "duplicate"]
    assert dup.item_id == "buy-3" and "buy-1" in dup.detail


def test_equal_amounts_for_different_items_both_count() -> None:
    cands = [
        event("a", "I bought a phone case for $40.", "2024-05-02T10:00:00Z"),
        event("b", "I bought a desk lamp for $40.", "2024-05-03T10:00:00Z"),
    ]
    a = ask("How much did I spend?", cands).answer_candidates[0]
    assert a.value == 80 and not a.excluded_ids


def test_the_same_amount_from_different_people_is_not_a_duplicate() -> None:
    cands = [
        event("a", "Nadia paid $40 for the desk lamp.", "2024-05-02T10:00:00Z", agent="nadia"),
        event("b", "Omar paid $40 for the desk lamp.", "2024-05-03T10:00:00Z", agent="omar"),
    ]
    assert ask("How much was paid in total for desk lamps?", cands).answer_candidates[0].value == 80


def test_an_assistant_restating_a_purchase_is_a_duplicate() -> None:
    cands = [
        event("u", "I got the desk lamp for $40.", "2024-05-02T10:00:00Z"),
        event(
            "a",
            "Noted: desk lamp, $40.",
            "2024-05-02T10:01:00Z",
            agent="assistant",
            type="message.assistant",
        ),
    ]
    a = ask("How much did I spend in total?", cands).answer_candidates[0]
    assert a.value == 40 and a.support_ids == ["u"]
    assert [(e.item_id, e.reason) for e in a.excluded_ids] == [("a", "duplicate")]


# --- units ---------------------------------------------------------------------------------


def test_no_summing_usd_with_eur() -> None:
    cands = [
        event("u1", "Museum tickets were $30.", "2024-04-02T10:00:00Z"),
        event("u2", "Dinner cost $50.", "2024-04-03T10:00:00Z"),
        event("e1", "The ferry cost €25.", "2024-04-04T10:00:00Z"),
    ]
    res = ask("How much did I spend in total?", cands)
    main, other = res.answer_candidates
    assert (main.value, main.unit, sorted(main.support_ids)) == (80, "USD", ["u1", "u2"])
    assert reasons(res)["e1"] == "unit_mismatch" and main.excluded_ids[0].reason == "unit_mismatch"
    assert (other.value, other.unit, other.support_ids) == (25, "EUR", ["e1"])
    assert other.confidence < main.confidence
    assert any(w.kind == "missing_evidence" and w.ids == ["e1"] for w in res.warnings)
    euros = ask("How much did I spend in euros?", cands)
    assert [(a.value, a.unit) for a in euros.answer_candidates] == [(25, "EUR")]


def test_other_units_of_a_measure_are_excluded_as_unit_mismatch() -> None:
    cands = [
        event("r1", "Ran 5 km on Monday.", "2024-04-01T10:00:00Z"),
        event("r2", "Ran 3 km on Tuesday.", "2024-04-02T10:00:00Z"),
        event("r3", "Ran 2 miles on Friday.", "2024-04-05T10:00:00Z"),
    ]
    main, other = ask("How far did I run in total?", cands).answer_candidates
    assert (main.value, main.unit, main.support_ids) == (8, "km", ["r1", "r2"])
    (left_out,) = main.excluded_ids
    assert (left_out.item_id, left_out.reason) == ("r3", "unit_mismatch")
    assert left_out.detail == "mile is not km (not converted)"
    assert (other.value, other.unit, other.support_ids) == (2, "mile", ["r3"])


def test_other_kinds_of_numbers_are_ignored_not_excluded() -> None:
    cands = [event("h", "Ran 5 km in 30 minutes, then bought water for $2.")]
    a = ask("How many km did I run in total?", cands).answer_candidates[0]
    assert (a.value, a.unit, a.excluded_ids) == (5, "km", [])


# --- supersession, as_of and time windows --------------------------------------------------


def test_newer_fact_wins_and_the_older_is_superseded() -> None:
    res = ask("Where does Marta live now?", HOMES)
    a = res.answer_candidates[0]
    assert res.answerability == "answer_from_memory"
    assert a.answer == "Porto (since 2024-06-01)" and a.support_ids == ["home-2#0"]
    assert reasons(res) == {"home-1#0": "superseded"}
    assert any(w.kind == "superseded" and w.ids == ["home-1#0"] for w in res.warnings)


def test_as_of_before_the_update_returns_the_older_fact() -> None:
    res = ask("Where does Marta live?", HOMES, as_of="2024-03-01T00:00:00Z")
    a = res.answer_candidates[0]
    assert a.answer == "Lisbon" and a.support_ids == ["home-1#0"]
    assert reasons(res) == {"home-2#0": "out_of_window"}


def test_events_after_as_of_do_not_exist_yet() -> None:
    res = ask("How much did I spend?", PURCHASES, as_of="2024-05-03T12:00:00Z")
    a = res.answer_candidates[0]
    assert a.value == 160 and reasons(res) == {"buy-3": "out_of_window", "buy-4": "out_of_window"}


def test_a_window_in_the_past_uses_the_facts_valid_then() -> None:
    res = ask("Where did Marta live in March 2024?", HOMES)
    assert res.answer_candidates[0].answer == "Lisbon"
    assert reasons(res) == {"home-2#0": "out_of_window"}


def test_rows_outside_the_time_window_are_excluded() -> None:
    cands = [
        event("m1", "Groceries were $60.", "2024-04-28T10:00:00Z"),
        event("m2", "Groceries came to $45.", "2024-05-06T10:00:00Z"),
        event("m3", "Bought groceries for $30.", "2024-05-20T10:00:00Z"),
        event("m4", "Groceries: $25.", "2024-06-04T10:00:00Z"),
    ]
    res = ask("How much did I spend on groceries in May 2024?", cands)
    a = res.answer_candidates[0]
    assert a.value == 75 and sorted(a.support_ids) == ["m2", "m3"]
    assert reasons(res) == {"m1": "out_of_window", "m4": "out_of_window"}
    last_week = ask("How much did I spend on groceries last week?", cands)
    assert last_week.answer_candidates[0].support_ids == ["m4"]


def test_two_current_values_for_one_fact_are_a_contradiction() -> None:
    cands = [
        fact("b1#0", "Project Atlas", "budget", value=5000, unit="USD"),
        fact("b2#0", "Project Atlas", "budget", value=6500, unit="USD"),
    ]
    res = ask("What is the budget of Project Atlas?", cands)
    assert res.answerability == "refresh_recommended"
    (w,) = [w for w in res.warnings if w.kind == "contradiction"]
    assert sorted(w.ids) == ["b1#0", "b2#0"]


# --- answerability -------------------------------------------------------------------------


def test_no_candidates_is_no_memory() -> None:
    res = ask("How much did I spend on the bike?", [])
    assert res.answerability == "no_memory" and not res.answer_candidates


def test_unrelated_candidates_ask_the_user() -> None:
    res = ask("What is my dog's name?", PURCHASES)
    assert res.answerability == "ask_user" and not res.answer_candidates
    assert any(w.kind == "missing_evidence" for w in res.warnings)


def test_an_entity_nobody_mentions_asks_the_user() -> None:
    res = ask("Where does Tom live?", HOMES)
    assert res.answerability == "ask_user" and not res.answer_candidates


def test_no_numbers_for_a_sum_asks_the_user() -> None:
    cands = [event("x", "Went bike shopping with Omar, nothing bought.")]
    res = ask("How much did I spend on the bike?", cands)
    assert res.answerability == "ask_user" and not res.answer_candidates


def test_weak_lexical_support_asks_the_user() -> None:
    cands = [event("x", "The garden hose was $25.")]
    res = ask("How much did the garden furniture, lights and fence paint cost?", cands)
    assert res.answerability == "ask_user" and not res.answer_candidates
    assert any("weak support" in w.message for w in res.warnings)


def test_a_supported_answer_is_answered_from_memory() -> None:
    res = ask("How much did the rug cost?", PURCHASES)
    assert res.answerability == "answer_from_memory"
    assert res.answer_candidates[0].answer == "$120"
    assert res.evidence[0].support_id == "buy-2"


def test_unknown_confidence_is_half_and_warned_low_confidence_is_left_out() -> None:
    unknown = [c.model_copy(update={"confidence": None}) for c in PURCHASES[1:2]]
    res = ask("How much did the rug cost?", unknown)
    assert res.answer_candidates[0].confidence == 0.5
    assert [w.kind for w in res.warnings] == ["default_confidence"]
    weak = [c.model_copy(update={"confidence": 0.1}) for c in PURCHASES[1:2]]
    res = ask("How much did the rug cost?", weak)
    assert res.answerability == "ask_user" and not res.answer_candidates
    assert {w.kind for w in res.warnings} == {"low_confidence", "missing_evidence"}
    low = synthesize(plan_query("How much did the rug cost?", NOW), unknown, min_confidence=0.6)
    assert low.answerability == "ask_user"


# --- citations: every id cited exists ------------------------------------------------------

TEXTS = [
    "I bought a lamp for $40.",
    "The rug cost $120 at the market.",
    "Paid €25 for the ferry to the island.",
    "Ran 5 km with Nadia on Monday.",
    "Marta moved to Porto last week.",
    "Project Atlas budget is $5,000.",
    "The hotel was €90 per night.",
    "Meeting with Omar about the roof.",
    "",
]
QUERIES = [
    "How much did I spend in total?",
    "Where does Marta live now?",
    "How many km did I run?",
    "Which came first, the lamp or the rug?",
    "What is the average price?",
    "Did I ever go to the island?",
    "List all the things I bought",
    "How long ago did I buy the lamp?",
    "How much more did the rug cost than the lamp?",
    "Which was the most expensive?",
    "What did Omar say about the roof?",
]
DAYS = [f"2024-0{m}-{d:02d}T10:00:00Z" for m in (3, 4, 5, 6) for d in (1, 11)]


@st.composite
def candidates(draw: st.DrawFn) -> list[Candidate]:
    out: list[Candidate] = []
    for i in range(draw(st.integers(0, 8))):
        conf = draw(st.sampled_from([None, 0.1, 0.6, 1.0]))
        if draw(st.booleans()):
            text = draw(st.sampled_from(TEXTS))
            out.append(event(f"e{i}", text, draw(st.sampled_from(DAYS)), confidence=conf))
        else:
            start = draw(st.sampled_from(DAYS))
            end = draw(st.sampled_from([None, *DAYS]))
            values: list[JsonScalar] = [100, 250.5, "Porto", "Lisbon"]
            value = draw(st.sampled_from(values))
            out.append(
                fact(
                    f"f{i}#0",
                    draw(st.sampled_from(["Marta", "Project Atlas"])),
                    draw(st.sampled_from(["lives_in", "budget"])),
                    value=value,
                    unit="USD" if isinstance(value, int | float) else None,
                    valid_from=start,
                    valid_to=end if end and end > start else None,
                    confidence=conf,
                ),
            )
    return out


@settings(max_examples=150, deadline=None)
@given(
    cands=candidates(),
    query=st.sampled_from(QUERIES),
    as_of=st.sampled_from([None, *DAYS]),
)
def test_support_ids_are_always_candidate_ids(
    cands: list[Candidate], query: str, as_of: str | None
) -> None:
    res = synthesize(plan_query(query, NOW, as_of), cands)
    ids = {c.item_id for c in cands}
    for a in res.answer_candidates:
        assert set(a.support_ids) <= ids
        assert {e.item_id for e in a.excluded_ids} <= ids
        assert 0.0 <= a.confidence <= 1.0
    assert {r.support_id for r in res.evidence} <= ids
    assert {i for w in res.warnings for i in w.ids} <= ids
    if not cands:
        assert res.answerability == "no_memory"
    if res.answerability == "answer_from_memory":
        assert res.answer_candidates and res.answer_candidates[0].support_ids


# --- a one-value question whose dates hold nothing ---------------------------------------

TRIPS = [
    event("t1", "Ingrid: we drove to the fjords and camped by the water.", "2023-08-14T10:00:00Z"),
    event("t2", "Ingrid: the office moved to the third floor.", "2024-03-02T10:00:00Z"),
]


def test_dates_that_hold_no_match_give_the_nearest_telling_to_be_checked() -> None:
    res = ask("Where did Ingrid camp in May 2024?", TRIPS)
    assert res.answerability == "refresh_recommended"
    top = res.answer_candidates[0]
    assert top.support_ids == ["t1"]
    dated = ask("Where did Ingrid camp?", TRIPS).answer_candidates[0]
    assert top.confidence == round(dated.confidence * 0.5, 3)
    (note,) = [w for w in res.warnings if "May 2024" in w.message]
    assert note.kind == "missing_evidence" and "outside" in note.message


def test_a_match_inside_the_dates_is_answered_without_the_fallback() -> None:
    cands = [*TRIPS, event("t3", "Ingrid: we camped at the lake.", "2024-05-10T10:00:00Z")]
    res = ask("Where did Ingrid camp in May 2024?", cands)
    assert res.answerability == "answer_from_memory"
    assert res.answer_candidates[0].support_ids == ["t3"]
    assert not any("outside" in w.message for w in res.warnings)


def test_counts_over_a_period_never_reach_outside_it() -> None:
    res = ask("How many times did Ingrid camp in May 2024?", TRIPS)
    assert res.answerability == "ask_user"
    assert not any(a.support_ids == ["t1"] for a in res.answer_candidates)


def test_the_fallback_keeps_as_of() -> None:
    # the only match happened after as_of: it does not exist yet, with or without the dates
    res = ask("Where did Ingrid camp in May 2023?", TRIPS, as_of="2023-06-01T00:00:00Z")
    assert res.answerability == "ask_user"
