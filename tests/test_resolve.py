"""Query entity resolution against a tenant's lexicon (hand-written entities)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from memstream.checkout.plan.entities import Lexicon, resolve_entities
from memstream.checkout.plan.planner import plan_query
from memstream.records.projected import EntityView
from memstream.text.names import entity_key
from memstream.text.words import STOPWORDS


def view(name: str, **flags: bool) -> EntityView:
    return EntityView(key=entity_key(name), name=name, kind="thing", **flags)


LEX = Lexicon.build(
    [
        view("user", subject=True),
        view("Marta", actor=True, user_side=True),
        view("helper", actor=True, assistant_side=True),
        view("Zoë Durand", subject=True),
        view("payments service", subject=True),
        view("Rosalind", actor=True),
        view("Research"),  # a capitalised word seen in some text: a name, nothing more
        view("chess club"),
        view("Lisbon"),
    ]
)


def keys(query: str, lexicon: Lexicon = LEX) -> list[list[str]]:
    return [m.keys for m in resolve_entities(query, lexicon)]


def test_the_user_and_first_person_resolve_to_the_user_side() -> None:
    assert keys("Where does the user live now?") == [["user", "marta"]]
    assert keys("Where does The User live?") == [["user", "marta"]]
    assert keys("where do I live these days") == [["user", "marta"]]
    assert keys("What's my favourite tea?") == [["user", "marta"]]
    assert [m.match for m in resolve_entities("where do I live")] == ["asker"]


def test_asker_pronouns_give_way_to_a_named_entity() -> None:
    assert keys("Tell me what Rosalind researched") == [["rosalind"]]
    assert keys("Can you remind me what Lisbon is like?") == [["lisbon"]]
    assert keys("Tell me everything") == []


def test_the_assistant_resolves_to_the_assistant_side() -> None:
    assert keys("What did the assistant recommend?") == [["helper"]]
    bare = Lexicon.build([view("assistant", actor=True, assistant_side=True)])
    assert keys("what did the assistant say", bare) == [["assistant"]]


def test_roles_without_memory_still_name_their_key() -> None:
    assert keys("Where does the user live?", Lexicon()) == [["user"]]


def test_lower_case_multi_word_subjects() -> None:
    assert keys("which region does the payments service run in now?") == [["payments service"]]
    assert keys("Which region does the Payments Service use?") == [["payments service"]]
    assert keys("is the payments-service up") == [["payments service"]]  # near enough
    assert keys("is the billing service up") == []


def test_accented_names_by_first_or_last_name_any_case() -> None:
    for q in ("Where does Zoe live?", "where does zoe live?", "Where does Zoë live?"):
        assert keys(q) == [["zoe durand"]], q
    assert keys("What is Durand's job?") == [["zoe durand"]]
    assert keys("where does zoe durand live") == [["zoe durand"]]
    assert [m.match for m in resolve_entities("Where does Zoe live?", LEX)] == ["partial"]


def test_names_with_combining_marks_stay_whole() -> None:
    # "Ọ̀" is O with a dot below plus a combining grave (no precomposed form)
    lexicon = Lexicon.build([view("adébáyọ̀ ọ̀kàfor-lindqvist", subject=True)])
    for q in (
        "Where does Adébáyọ̀ Ọ̀kàfor-Lindqvist live?",
        "where does adébáyọ̀ ọ̀kàfor-lindqvist live",
        "Where does Adebayo Okafor-Lindqvist live?",
        "what does Ọ̀kàfor-Lindqvist do",
    ):
        assert keys(q, lexicon) == [["adebayo okafor-lindqvist"]], q


def test_lower_case_words_resolve_only_to_structured_entities() -> None:
    # "research" and "chess club" are known only as words seen in text.
    assert keys("What did rosalind research about the chess club?") == [["rosalind"]]
    assert keys("Did Rosalind join the Chess Club?") == [["rosalind"], ["chess club"]]
    assert keys("what is lisbon like") == []
    assert keys("what is Lisbon like") == [["lisbon"]]


def test_typos_resolve_fuzzily() -> None:
    got = resolve_entities("What did Rosalnd say?", LEX)
    assert [m.keys[0] for m in got] == ["rosalind"] and got[0].match == "fuzzy"
    assert 0.88 <= got[0].score < 1.0
    assert keys("what did the paymnts service report?") == [["payments service"]]


def test_unknown_capitalised_names_are_kept() -> None:
    got = resolve_entities("What did Bob Stone buy?", LEX)
    assert [(m.keys, m.match) for m in got] == [(["bob stone"], "unknown")]


def test_several_entities_in_query_order_once_each() -> None:
    q = "Did Marta and the payments service both move to Lisbon? Marta said so."
    assert keys(q) == [["marta"], ["payments service"], ["lisbon"]]


def test_ambiguous_first_names_carry_their_alternatives() -> None:
    lex = Lexicon.build([view("Zoë Durand", subject=True), view("Zoe Martin", actor=True)])
    assert sorted(keys("Where does Zoe live?", lex)[0]) == ["zoe durand", "zoe martin"]


_LETTERS = st.sampled_from("abcdefghijklmnopqrstuvwxyzéëèñöüç")
_WORD = st.text(_LETTERS, min_size=4, max_size=9).filter(
    lambda w: entity_key(w) not in {"user", "assistant", *STOPWORDS}
)


@settings(max_examples=150, deadline=None)
@given(words=st.lists(_WORD, min_size=1, max_size=3), case=st.sampled_from(["lower", "title"]))
def test_any_subject_in_any_case_resolves_to_itself(words: list[str], case: str) -> None:
    name = " ".join(words)
    lex = Lexicon.build([view(name, subject=True), view("user", subject=True)])
    asked = name.lower() if case == "lower" else name.title()
    for q in (f"Where does {asked} live now?", f"what is {asked}'s status", f"{asked}?"):
        got = resolve_entities(q, lex)
        assert got and got[0].keys[0] == entity_key(name), (q, got)


@settings(max_examples=100, deadline=None)
@given(first=_WORD, last=_WORD)
def test_a_person_asked_by_first_name_without_accents(first: str, last: str) -> None:
    name = f"{first.title()} {last.title()}"
    lex = Lexicon.build([view(name, subject=True)])
    plain = entity_key(first).title()
    got = resolve_entities(f"Where does {plain} live?", lex)
    assert got and got[0].keys[0] == entity_key(name)


def test_unknown_words_of_a_name_that_runs_into_a_known_one_stay_named() -> None:
    # "Rosalind's Atelier": memory knows Rosalind, not the atelier; the question names both.
    assert keys("What does Rosalind's Atelier sell?") == [["rosalind"], ["atelier"]]
    assert keys("Where is Rosalind Vance now?") == [["rosalind"], ["vance"]]


def test_a_person_whose_name_is_also_a_word_is_named_where_it_reads_as_a_name() -> None:
    people = Lexicon.build(
        [view(n, actor=True) for n in ("June", "Will", "Noor")] + [view("May", subject=True)]
    )
    assert keys("What did June buy for Noor?", people) == [["june"], ["noor"]]
    assert keys("Did Noor ever meet Will?", people) == [["noor"], ["will"]]
    assert keys("Where does May live these days?", people) == [["may"]]
    # Opening a sentence, a capital says nothing: "Will" and "May" are the verbs there.
    assert keys("Will Noor come? May she bring a cake?", people) == [["noor"]]
    # Lower case, it is the word.
    assert keys("what will june bring", people) == []
    # Only someone memory knows: a month that is merely capitalised stays a month.
    assert keys("What did Noor plant in April?", people) == [["noor"]]
    assert keys("What did Noor say to April?", Lexicon.build([view("April")])) == [["noor"]]


def test_a_date_wins_over_a_name_that_is_also_a_month() -> None:
    people = Lexicon.build([view(n, actor=True) for n in ("June", "May", "Noor")])
    plan = plan_query("What did Noor give June in May?", "2031-07-10T12:00:00Z", lexicon=people)
    assert plan.entities == ["noor", "june"]
    assert plan.time_window is not None and plan.time_window.text == "May"
    plan = plan_query("What did June do last June?", "2031-07-10T12:00:00Z", lexicon=people)
    assert plan.entities == ["june"]
    assert plan.time_window is not None and plan.time_window.start == "2031-06-01"


def _speakers(*names: str, known: tuple[str, ...] = ()) -> Lexicon:
    views = [EntityView(key=entity_key(n), name=n, kind="agent", actor=True) for n in names]
    views += [EntityView(key=entity_key(n), name=n, kind="person") for n in known]
    return Lexicon.build(views)


def test_a_short_form_of_one_speakers_name_is_that_speaker() -> None:
    lex = _speakers("Valentina", "Bastien Okafor", "Ngozi")
    assert keys("What did Val and her neighbours bake?", lex) == [["valentina"]]
    assert keys("Where did Bas go skiing?", lex) == [["bastien okafor"]]
    assert plan_query("What did Val bake?", "2031-01-01T00:00:00Z", lexicon=lex).entities == [
        "valentina"
    ]


def test_a_short_form_that_fits_two_speakers_or_none_stays_unknown() -> None:
    lex = _speakers("Valentina", "Valerio")
    assert keys("What did Val bake?", lex) == [["val"]]  # which of the two: unknown
    assert keys("what did val bake?", _speakers("Valentina")) == []  # not written as a name
    assert keys("What did Ngo bake?", _speakers("Valentina")) == [["ngo"]]


def test_a_name_memory_knows_as_its_own_is_not_a_short_form() -> None:
    lex = _speakers("Valentina", known=("Val",))
    assert keys("What did Val bake?", lex) == [["val"]]
