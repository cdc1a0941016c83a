"""Attribution: answers about a named speaker must not rest on someone else's "I"."""

from __future__ import annotations

import hashlib

import pytest
from memstream.checkout.model import Candidate
from memstream.checkout.synthesis.attribution import first_person, misattributed, talks_about
from memstream.projection.model import SourceRef


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
