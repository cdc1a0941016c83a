"""Entity keys and name candidates in text (class-level, language-generic heuristics)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from memstream.text.words import fold_accents

# Capitalised words that start sentences or are pronouns/determiners are not names.
_FUNCTION_WORDS = frozenset(
    """
    a an the i i'm i've i'd i'll me my mine we our you your he him his she her they them their
    it its this that these those there here what which who whom whose when where why how
    and or but if then so because as at by for from in into of on onto to with without about
    is are was were be been being am do does did have has had will would can could should may
    might must shall yes no not oh ok okay hey hi hello thanks thank please sure well wow
    also just maybe really very too all any some every each both either neither one two
    monday tuesday wednesday thursday friday saturday sunday
    january february march april may june july august september october november december
    today tomorrow yesterday tonight morning evening afternoon night week month year
    """.split()  # noqa: SIM905 - a readable block of words
)
# Capital letters of every script in the BMP ("Éloïse", "Łukasz", "İlkay", not only A-Z):
# `re` has no \p{Lu}, so the class is spelled out once, at import.
_UPPER = "".join(
    re.escape(chr(c)) for c in range(0x10000) if unicodedata.category(chr(c)) in ("Lu", "Lt")
)
_CAP = f"[{_UPPER}]"
# What a name's letters may be: ``\w`` leaves out combining marks, and some names need them
# ("Ọ̀kàfor": O with a dot below, then a combining grave; no precomposed form exists).
MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_REST = f"[\\w{MARKS}'’-]*"
_WORD = re.compile(rf"{_CAP}{_REST}(?:\s+(?:{_CAP}{_REST}|of|de|la|van|von|the))*")
_POSSESSIVE = re.compile(r"['’]s$")
_KEY_PUNCT = frozenset(":.@/- ")
# Words that open a direct address: "Hey Noor", "Thanks, Noor".
_OPENERS = (
    "hey", "hi", "hello", "thanks", "thank you", "dear", "oh", "wow", "yes", "yeah", "no", "ok",
    "okay", "bye", "congrats", "congratulations", "sorry", "well", "aw", "aww",
)  # fmt: skip
_ADDRESS_OPENERS = re.compile(rf"(?:^|\b)(?:{'|'.join(_OPENERS)})[,!]?$", re.IGNORECASE)
# A lone word just before a name: letters only, at most this long.
_LONE_CHARS = 16
_LONE_WORD = re.compile(r"(?:^|(?<=\s))([^\W\d_]{2,15})$")
# An opener that ends a text (with its mark) starts within its last this many characters.
_OPENER_CHARS = max(map(len, _OPENERS)) + 1


def _before(text: str, start: int) -> int:
    """The end of ``text[:start].rstrip()``, found without copying the text before it: each
    candidate name copying everything before it made a long body quadratic."""
    while start and text[start - 1].isspace():
        start -= 1
    return start


def _after(text: str, end: int) -> str:
    """The first character of ``text[end:].lstrip()`` ("" at the end), without the copy."""
    n = len(text)
    while end < n and text[end].isspace():
        end += 1
    return text[end] if end < n else ""


def is_address(text: str, start: int, end: int) -> bool:
    """``text[start:end]`` (a name) is a direct address ("Thanks, Noor!", "Noor, look"),
    set off like an interjection, rather than something said about its bearer."""
    after = _after(text, end)
    if after != "" and after not in ",!?.;:":
        return False
    stop = _before(text, start)
    if after in (",", "!") and _lone_opener(text, stop):
        return True
    # ``pos`` keeps what precedes it in view of ``^`` and ``\b``; ``endpos`` ends the text
    # where the stripped text before the name ends, so ``$`` means what it meant there.
    return (
        stop == 0
        or text[stop - 1] in ",.!?;:"
        or _ADDRESS_OPENERS.search(text, max(0, stop - _OPENER_CHARS), stop) is not None
    )


def _lone_opener(text: str, stop: int) -> bool:
    """One word opens the sentence before the name ("Woohoo Noor!", "Go Noor,"): set off by
    its mark, a name after a lone interjection is called to, not spoken of."""
    word = _LONE_WORD.search(text, max(0, stop - _LONE_CHARS), stop)
    if word is None:
        return False
    begin = _before(text, word.start())
    opens = begin == 0 or text[begin - 1] in ".!?\n"
    return opens and word.group(1).lower() not in _FUNCTION_WORDS


@lru_cache(maxsize=1 << 16)
def entity_key(name: str) -> str:
    """Normalised key: NFKC, lower case, accents folded, a leading "the", possessive and
    punctuation removed, spaces collapsed.

    Folding makes "Zoë" and "Zoe", "The user" and "user" one entity: people write names
    with and without their accents, and a fact about "the user" is about "user".
    """
    s = fold_accents(unicodedata.normalize("NFKC", name).strip().lower())
    s = _POSSESSIVE.sub("", s)
    s = "".join(ch if _kept(ch) else " " for ch in s)
    s = re.sub(r"\s+", " ", s).strip()
    return s.removeprefix("the ") if s.count(" ") else s


def _kept(ch: str) -> bool:
    # Letters, digits and combining marks (vowel signs of Indic scripts are marks) stay.
    return ch in _KEY_PUNCT or unicodedata.category(ch)[0] in "LNM" or ch == "_"


def sentence_initial(text: str, start: int) -> bool:
    """``text[start:]`` opens a sentence, where a capital letter says nothing."""
    stop = _before(text, start)
    return not stop or text[stop - 1] in '.!?\n"“:'


def name_candidates(text: str, limit: int = 12) -> list[str]:
    """Proper-noun-like spans: runs of capitalised words, minus function words.

    A single capitalised word opening a sentence is skipped: capitalisation says nothing
    there (precision over recall; speakers and agents are entities anyway). So is a name
    used as a direct address.
    """
    found: list[str] = []
    seen: set[str] = set()
    for m in _WORD.finditer(text):
        spans = [(w.start() + m.start(), w.end() + m.start()) for w in re.finditer(r"\S+", m[0])]
        words = m.group(0).split()
        if len(words) == 1 and sentence_initial(text, m.start()):
            continue
        lead = 0
        while lead < len(words) and words[lead].lower().strip("'’") in _FUNCTION_WORDS:
            lead += 1
        words = words[lead:]
        while words and words[-1].lower() in ("of", "de", "la", "van", "von", "the"):
            words = words[:-1]
        if not words:
            continue
        if is_address(text, spans[lead][0], spans[lead + len(words) - 1][1]):
            continue  # the name of whoever is spoken to says nothing about the event
        name = _POSSESSIVE.sub("", " ".join(words))
        key = entity_key(name)
        if len(key) < 2 or key in seen or key in _FUNCTION_WORDS:
            continue
        seen.add(key)
        found.append(name)
        if len(found) >= limit:
            break
    return found


def name_forms(spelled: str, key: str) -> frozenset[str]:
    """The lower-case forms a name is looked for in text: as spelled and as its key."""
    lower = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", spelled).strip().lower())
    return frozenset(f for f in (lower, key) if f)


def names_in(text: str, forms: frozenset[str]) -> bool:
    """``text`` names one of ``forms`` as whole words, in any case, with or without accents
    ("Zoë" in "zoe's"; not "al" in "also")."""
    lower = unicodedata.normalize("NFKC", text).lower()
    for haystack in (lower, fold_accents(lower)):
        if any(re.search(rf"(?<!\w){re.escape(f)}(?!\w)", haystack) for f in forms):
            return True
    return False
