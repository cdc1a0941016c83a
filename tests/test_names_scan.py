"""Name candidates look only at the text next to each name: the same answers as stripping
everything before and after it (the rule they replace, kept here as the reference), without
copying the text before and after each name (quadratic in a long body's length)."""

from __future__ import annotations

import random
import re

import pytest
from memstream.text import names
from memstream.text.names import is_address, name_candidates

_OPENERS = re.compile(
    r"(?:^|\b)(?:hey|hi|hello|thanks|thank you|dear|oh|wow|yes|yeah|no|ok|okay|bye|"
    r"congrats|congratulations|sorry|well|aw|aww)[,!]?$",
    re.IGNORECASE,
)


def reference_is_address(text: str, start: int, end: int) -> bool:
    before, after = text[:start].rstrip(), text[end:].lstrip()
    closes = after == "" or after[0] in ",!?.;:"
    opens = before == "" or before[-1] in ",.!?;:" or bool(_OPENERS.search(before))
    return closes and (opens or (after[:1] in (",", "!") and reference_lone_opener(before)))


def reference_lone_opener(before: str) -> bool:
    """One word, not a function word, alone between a sentence's start and the name."""
    m = re.search(r"(?:^|(?<=\s))([^\W\d_]{2,15})$", before)
    if m is None or m.group(1).lower() in names._FUNCTION_WORDS:
        return False
    rest = before[: m.start()].rstrip()
    return rest == "" or rest[-1] in ".!?\n"


def reference_sentence_initial(text: str, start: int) -> bool:
    before = text[:start].rstrip()
    return not before or before[-1] in '.!?\n"“:'


PIECES = [
    "Noor", "Zoë", "éloïse", "Ọ̀kàfor", "Anna Marta", "the Museum of Modern Art", "İlkay",
    "hey", "Hey", "HEY", "thanks", "Thank you", "thank  you", "congratulations", "xhey",
    "okay!", "aww,", "Well", "no", "dear", "bye!", "ahoy", "sayonara",
    ",", "!", "?", ".", ";", ":", '"', "“", "-", "'s", "’",
    " ", "  ", "\n", "\t", "\u00a0", "\u2003", "\u3000", "\x1c", "\x1f", "\x0b", "\x00", "\x07",
    "\u200b", "Lisbon", "Berlin", "I", "we", "met", "with", "Woohoo", "go", "Yesterday",
]  # fmt: skip


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(PIECES, k=rng.randint(0, 40))) for _ in range(count)]


def test_is_address_answers_as_the_stripping_rule_on_every_span() -> None:
    checked = 0
    for text in _texts(1, 1500):
        for i in range(len(text) + 1):
            for j in range(i, min(len(text), i + 8) + 1):
                assert is_address(text, i, j) == reference_is_address(text, i, j), (text, i, j)
                checked += 1
    assert checked > 100_000


def test_sentence_initial_answers_as_the_stripping_rule() -> None:
    for text in _texts(2, 1500):
        for i in range(len(text) + 1):
            expected = reference_sentence_initial(text, i)
            assert names.sentence_initial(text, i) == expected, (text, i)


def test_openers_found_only_where_they_end_the_text_before_the_name() -> None:
    assert is_address("Hey Noor!", 4, 8)
    assert is_address("well... thank you Noor.", 18, 22)
    assert is_address("CONGRATULATIONS, Noor", 17, 21)
    assert is_address("Noor, look", 0, 4)
    assert not is_address("we xhey Noor!", 8, 12)  # "hey" inside a word opens nothing
    assert not is_address("I met Noor!", 6, 10)
    assert not is_address("Hey Noor said so", 4, 8)


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("Woohoo Noor! I passed the interview.", "Noor", True),
        ("Go Zoë, you can do it.", "Zoë", True),
        ("Done. Bravo Idris!", "Idris", True),
        ("I love Noor!", "Noor", False),  # two words: the name is spoken of
        ("Yesterday Noor, my friend, came by.", "Noor", False),  # a function word
        ("Bravo Noor", "Noor", False),  # not set off by a mark
        ("Bravo Noor.", "Noor", False),  # a full stop ends a statement ("Ask Noor.")
    ],
)
def test_a_lone_word_before_a_name_set_off_by_a_mark_is_an_interjection(
    text: str, name: str, expected: bool
) -> None:
    start = text.index(name)
    assert is_address(text, start, start + len(name)) is expected


def test_name_candidates_unchanged_on_texts_with_names_openers_and_controls() -> None:
    def reference(text: str) -> list[str]:
        saved = names.is_address, names.sentence_initial
        names.is_address, names.sentence_initial = (
            reference_is_address,
            reference_sentence_initial,
        )
        try:
            return name_candidates(text, limit=1000)
        finally:
            names.is_address, names.sentence_initial = saved

    found = 0
    for text in _texts(3, 3000):
        got = name_candidates(text, limit=1000)
        assert got == reference(text), text
        found += len(got)
    assert found > 1000
