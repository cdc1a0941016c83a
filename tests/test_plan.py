"""The synthesis plan: operation, answer type, entities, terms, unit and time window."""

from __future__ import annotations

from datetime import date

import pytest
from memstream.checkout.plan import plan_query
from memstream.checkout.plan.anchored import without_dates
from memstream.checkout.plan.entities import Lexicon
from memstream.checkout.plan.operation import answer_type, classify, query_unit
from memstream.records.projected import EntityView
from memstream.text.names import entity_key
from synthdata import NOW

OPERATIONS = {
    "lookup": [
        "Where does my sister work?",
        "What colour is the new sofa?",
        "what did the plumber say about the boiler?",
        # how-to: "after", "first", "best", "never" describe the task, not an operation
        "How do I reset the boiler after a power cut?",
        "how can we clean the filter first thing in the morning",
        "How should one store the best wine?",
        "how to never lose the spare key?",
    ],
    "count": [
        "How many books did I read this year?",
        "What is the number of meetings I had with the architect?",
        "How often did I train at the gym?",
    ],
    "sum": [
        "How much did I spend on groceries?",
        "What was the total cost of the kitchen renovation?",
        "How many hours did I practise piano altogether?",
        "How much did the three train tickets cost in total?",
    ],
    "difference": [
        "How much more did the rug cost than the lamp?",
        "What is the difference between the two quotes for the roof?",
        "How many fewer pages did I read in May compared to April?",
    ],
    "average": [
        "What is the average price of a night at the hostels?",
        "What was my mean running pace?",
    ],
    "argmax": [
        "Which hotel was the most expensive?",
        "What was the longest hike I did?",
        "Which supplier gave the highest quote?",
    ],
    "argmin": [
        "Which flight was the cheapest?",
        "What was the lowest electricity bill?",
        "Which contractor has the fewest reviews?",
    ],
    "latest_value": [
        "Where does Marta live now?",
        "What is my current phone plan?",
        "Do I still have the old bike?",
        "What laptop am I using these days?",
    ],
    "temporal_interval": [
        "How long have I been learning Spanish?",
        "Since when is the garage rented out?",
        "How many days between the flight and the hotel check-in?",
        "How many weeks ago did I order the desk?",
    ],
    "temporal_order": [
        "Which came first, the lamp or the rug?",
        "Did I paint the fence before the storm?",
        "What did I do after the conference?",
        "In what order did I visit the museums?",
        "How did I get home after the conference?",  # not a how-to: a narrative
    ],
    "list": [
        "List all the plants on the balcony.",
        "Which ones of my friends own a dog?",
        "What are all the cities on the itinerary?",
        "Name the books on my reading list.",
    ],
    "absence": [
        "Did I ever go to Japan?",
        "Have I never paid the parking fine?",
        "Has the landlord not replied?",
    ],
}


@pytest.mark.parametrize(
    ("query", "op"), [(q, op) for op, qs in OPERATIONS.items() for q in qs], ids=lambda v: v
)
def test_classifier_table(query: str, op: str) -> None:
    assert classify(query) == op
    assert plan_query(query, NOW).operation == op


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("When did I buy the rug?", "date"),
        ("What date is the dentist appointment?", "date"),
        ("How much did I spend on groceries?", "money"),
        ("How much does the gym membership cost?", "money"),
        ("How many books did I read?", "number"),
        ("How much flour is left?", "number"),
        ("Who recommended the plumber?", "entity"),
        ("List all the plants on the balcony.", "list"),
        ("Is the garage rented out?", "boolean"),
        ("Did I ever go to Japan?", "boolean"),
        ("How long have I been learning Spanish?", "duration"),
        ("Since when is the garage rented out?", "date"),
        ("What colour is the sofa?", "text"),
    ],
)
def test_answer_types(query: str, expected: str) -> None:
    assert answer_type(query, classify(query), query_unit(query)) == expected


def test_entities_terms_and_unit() -> None:
    plan = plan_query("How much did Marta spend on books for Project Atlas in euros?", NOW)
    assert plan.entities == ["marta", "project atlas"]
    assert "books" in plan.terms and "spend" in plan.terms
    assert not {"how", "much", "did", "on", "for", "in", "euros"} & set(plan.terms)
    assert plan.unit == "EUR" and plan.answer_type == "money"
    lower = plan_query("how much did marta spend on books?", NOW)
    assert lower.entities == []  # all lower case: no names are guessed
    assert plan_query("How many hours did I practise?", NOW).unit == "hour"
    assert plan_query("What did I pay in $ for parking?", NOW).unit == "USD"
    assert plan_query("What did I eat?", NOW).unit is None


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did I buy in May 2023?", "2023-05-01", "2023-06-01"),
        ("What did I buy last week?", "2024-06-03", "2024-06-10"),
        ("What did I eat yesterday?", "2024-06-11", "2024-06-12"),
        ("How much did I spend this month?", "2024-06-01", "2024-07-01"),
        ("How much did I spend last year?", "2023-01-01", "2024-01-01"),
        ("How much did I spend in 2022?", "2022-01-01", "2023-01-01"),
        ("What did I cook in March?", "2024-03-01", "2024-04-01"),
        ("What did I cook in September?", "2023-09-01", "2023-10-01"),
        ("What happened on 2024-02-29?", "2024-02-29", "2024-03-01"),
        ("What did I buy between March 3, 2024 and March 10, 2024?", "2024-03-03", "2024-03-11"),
        ("What did I read in the past 3 days?", "2024-06-09", "2024-06-13"),
        ("How much did I spend since March 3, 2024?", "2024-03-03", None),
        ("How much did I spend before June?", None, "2024-06-01"),
    ],
)
def test_time_windows(query: str, start: str | None, end: str | None) -> None:
    window = plan_query(query, NOW).time_window
    assert window is not None
    assert (window.start, window.end) == (start, end)
    assert window.text


def test_no_window_and_as_of() -> None:
    plan = plan_query("Where does Marta live?", NOW)
    assert plan.time_window is None and plan.as_of == NOW
    past = plan_query("What did I eat yesterday?", NOW, as_of="2024-01-10T08:00:00Z")
    assert past.as_of == "2024-01-10T08:00:00Z"
    assert past.time_window is not None and past.time_window.start == "2024-01-09"
    # dates are not content terms
    assert "yesterday" not in past.terms and "2023" not in plan_query("in May 2023?", NOW).terms


# -- names are not cues ------------------------------------------------------------------------

CUE_NAMES = Lexicon.build(
    [
        EntityView(key=entity_key(n), name=n, kind="person", subject=True)
        for n in ("Spent", "Bill Price", "Count Olaf", "Mean Ortiz", "Jo Most", "Nora First")
    ]
)


@pytest.mark.parametrize(
    ("query", "op", "kind"),
    [
        ("Where does Spent live now?", "latest_value", "text"),
        ("where does spent live now?", "latest_value", "text"),  # known, written lower-case
        ("When did Count Olaf move to Oslo?", "lookup", "date"),
        ("Who does Mean Ortiz work for?", "lookup", "entity"),
        ("What is Jo Most's job?", "lookup", "text"),
        ("Where did Nora First grow up?", "lookup", "text"),
        ("How much does Bill Price weigh now?", "latest_value", "number"),  # not money
        ("How much older is Bill Price than Jo Most?", "difference", "number"),
        # the cue outside the name still counts
        ("How much did Spent spend on rent?", "sum", "money"),
        ("How much did Bill Price pay in total?", "sum", "money"),
        ("How many times did Count Olaf call?", "count", "number"),
        ("What did Jo Most buy first?", "temporal_order", "text"),
    ],
)
def test_words_of_a_known_name_are_not_cues(query: str, op: str, kind: str) -> None:
    plan = plan_query(query, NOW, lexicon=CUE_NAMES)
    assert (plan.operation, plan.answer_type) == (op, kind), plan
    assert plan.money == (kind == "money")
    assert plan.entities  # the name is still what the question is about


def test_a_name_memory_does_not_know_keeps_its_words() -> None:
    # Nothing known: "Spent" at a sentence start may be the verb; its cue stands.
    plan = plan_query("Spent how much on the Rent?", NOW)
    assert plan.money and plan.operation == "sum"
    # The same name known: blanked everywhere it is written, twice included.
    twice = plan_query("Did Spent pay Spent's bill?", NOW, lexicon=CUE_NAMES)
    assert twice.money  # "pay" and "bill" are outside the name
    both = plan_query("Is Bill Price or Bill Price's son older?", NOW, lexicon=CUE_NAMES)
    assert both.money is False


def test_a_stated_currency_makes_a_money_question_whatever_the_names() -> None:
    plan = plan_query("How much did Count Olaf give in $?", NOW, lexicon=CUE_NAMES)
    assert (plan.unit, plan.answer_type, plan.money) == ("USD", "money", True)


@pytest.mark.parametrize(
    ("query", "bare"),
    [
        ("What dish did Noor cook on 9 May, 2029?", "What dish did Noor cook on ?"),
        ("what did noor finish last friday?", "what did noor finish ?"),
        ("What did I buy in May 2023 and in June 2023?", "What did I buy in and in ?"),
        (
            "Where did Zoë Durand go after the kayak trip?",
            "Where did Zoë Durand go after the kayak trip?",
        ),
        ("2029-05-09?", "?"),
        ("Qu'a fait Zoë le\x00 9 May 2029\u200f?", "Qu'a fait Zoë le\x00 \u200f?"),
    ],
)
def test_a_question_without_its_dates(query: str, bare: str) -> None:
    assert without_dates(query, date(2029, 6, 1)) == bare
