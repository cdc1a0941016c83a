"""Attribution: answers about a named speaker must not rest on someone else's "I", nor on
words that only ask; a speaker's own words answer for them when no one else's say more."""

from __future__ import annotations

import hashlib

import pytest
from memstream.checkout.plan import plan_query
from memstream.checkout.plan.entities import Lexicon
from memstream.checkout.synthesis import synthesize
from memstream.checkout.synthesis.attribution import (
    first_person,
    misattributed,
    only_asks,
    talks_about,
)
from memstream.records.packet import Candidate
from memstream.records.projected import EntityView, SourceRef
from memstream.text.names import entity_key
from synthdata import NOW, event


def said(item_id: str, agent: str, text: str, kind: str = "event") -> Candidate:
    ref = SourceRef(
        tenant="t",
        stream="chat",
        seq=1,
        hash=hashlib.sha256(item_id.encode()).hexdigest(),
        event_id=item_id,
    )
    return Candidate(
        item_id=item_id,
        kind=kind,  # type: ignore[arg-type]
        text=text,
        ref=ref,
        type="message.user",
        agent=agent,
        occurred_at="2031-01-01T00:00:00Z",
    )


POOL = {
    c.item_id: c
    for c in [
        said("a1", "Idris", "Thanks, Noor! I bought a green kayak last weekend."),
        said("a2", "Noor", "Hey Idris, my sister lent me her bike."),
        said("a3", "Idris", "I told Noor about the kayak and she loved it."),
        said("a4", "Idris", "The kayak shop opens at nine."),
        said("a5", "Idris", "Noor's kayak is the red one, I think."),
    ]
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I bought a kayak", True),
        ("We're off to the lake, our boat is ready", True),
        ("Give it to me tomorrow", True),
        ("The kayak is green", False),
        ("i) first item ii) second", False),
        ("Mighty fine weather", False),
    ],
)
def test_first_person(text: str, expected: bool) -> None:
    assert first_person(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Thanks, Noor! Great day.", False),
        ("Noor, did you see it?", False),
        ("Hey Noor! Long time.", False),
        ("That was lovely, Noor.", False),
        ("I told Noor about it.", True),
        ("Noor's kayak is red.", True),
        ("Noor and I went out.", True),
        ("Nothing about anyone here.", False),
    ],
)
def test_talks_about_ignores_direct_address(text: str, expected: bool) -> None:
    assert talks_about(text, "noor") is expected


def test_another_speakers_first_person_words_are_misattributed() -> None:
    why = misattributed(["noor"], ["a1"], POOL)
    assert why is not None and "Idris" in why and "noor" in why


@pytest.mark.parametrize(
    "text",
    [
        "Woohoo Noor! I passed the interview and I'm so excited.",
        "Whoa, Noor! I passed the interview.",
        "Yay Noor, I passed the interview.",
    ],
)
def test_news_told_to_someone_called_by_name_is_the_speakers_own(text: str) -> None:
    pool = {"n1": said("n1", "Idris", text), "n2": said("n2", "Noor", "Hi Idris!")}
    why = misattributed(["noor"], ["n1"], pool)
    assert why is not None and "Idris" in why


@pytest.mark.parametrize(
    "support",
    [
        ["a2"],  # said by Noor herself
        ["a3"],  # Idris talks about Noor
        ["a4"],  # not first person: no claim about the speaker
        ["a5"],  # Noor's kayak, said by Idris
        ["a1", "a2"],  # one support item is Noor's own
        [],
    ],
)
def test_support_that_may_be_about_the_named_speaker_passes(support: list[str]) -> None:
    assert misattributed(["noor"], support, POOL) is None


def test_only_named_speakers_count() -> None:
    # "kayak" is no speaker, and a name nobody speaks under is left to other checks
    assert misattributed(["kayak"], ["a1"], POOL) is None
    assert misattributed(["zara"], ["a1"], POOL) is None


def test_facts_in_the_support_disable_the_check() -> None:
    pool = dict(POOL, f1=said("f1", "Idris", "I own a kayak", kind="fact"))
    assert misattributed(["noor"], ["a1", "f1"], pool) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Priya, what are you bringing to the potluck?", True),
        ("Sounds fun! What will you bring to the potluck? Mine is dessert.", True),
        ("I'm bringing my aunt's jollof rice to the potluck.", False),
        ("The potluck was great. Did you like it?", False),  # it tells, then asks
        ("Did you see the match?", False),  # asks, but not about the potluck
        ("POTLUCK?!", True),
    ],
)
def test_only_asks_when_every_sentence_naming_the_focus_is_a_question(
    text: str, expected: bool
) -> None:
    assert only_asks(text, frozenset({"potluck"})) is expected


def test_an_echo_of_the_question_is_passed_over_for_the_memory_that_tells() -> None:
    """The friend's question repeats the asked words more closely than Priya's answer."""
    plan = plan_query("What is Priya bringing to the potluck?", NOW)
    pool = [
        event("q1", "Priya, what are you bringing to the potluck this time?", agent="Tomás"),
        event("a1", "I'm making my aunt's jollof rice for the potluck!", agent="Priya"),
    ]
    result = synthesize(plan, pool)
    assert result.answerability == "answer_from_memory", result.warnings
    assert result.answer_candidates[0].support_ids == ["a1"]


def test_only_echoes_of_the_question_are_not_an_answer() -> None:
    plan = plan_query("what is priya bringing to the potluck?", NOW)
    pool = [event("q1", "Priya, what are you bringing to the potluck?", agent="Tomás")]
    result = synthesize(plan, pool)
    assert result.answerability == "ask_user" and not result.answer_candidates
    assert [w.ids for w in result.warnings if "only ask" in w.message] == [["q1"]]


# Two friends talk; the question about Élodie is answered from her own words though they
# share few of its words, unless Bastien's own words cover the question better: then the
# question is about what he did, and memory holds nothing of hers on it.
CHAT = [
    event("e1", "I finally decided to hang the harbour watercolour by the stairs.", agent="Élodie"),
    event("e2", "Hey Bastien! Work has been hectic this month.", agent="Élodie"),
    event("b1", "Nice, Élodie! The weather was awful here.", agent="Bastien"),
]


SPEAKERS = Lexicon.build(
    EntityView(key=entity_key(n), name=n, kind="agent", actor=True) for n in ("Élodie", "Bastien")
)


@pytest.mark.parametrize(
    "question",
    [
        "What painting did Élodie hang up in her hallway?",
        "what painting did élodie hang in the hallway",  # lower case: her name as memory knows it
    ],
)
def test_a_speakers_own_words_answer_when_no_one_elses_cover_more(question: str) -> None:
    plan = plan_query(question, NOW, lexicon=SPEAKERS)
    result = synthesize(plan, CHAT)
    assert result.answerability == "answer_from_memory", result.warnings
    assert result.answer_candidates[0].support_ids == ["e1"]
    assert result.answer_candidates[0].confidence < 0.8  # weak by words: said so


def test_someone_elses_own_words_covering_more_mean_ask_user() -> None:
    plan = plan_query("What painting did Élodie hang up in her hallway?", NOW, lexicon=SPEAKERS)
    his = event("b2", "I hung the painting from my aunt in our hallway.", agent="Bastien")
    result = synthesize(plan, [*CHAT, his])
    assert result.answerability == "ask_user", result.answer_candidates
    assert any("weak support" in w.message for w in result.warnings)


def test_weak_words_without_a_named_speaker_still_ask() -> None:
    plan = plan_query("What painting hangs up in the hallway?", NOW, lexicon=SPEAKERS)
    result = synthesize(plan, CHAT)
    assert result.answerability == "ask_user"
