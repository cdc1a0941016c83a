"""Words: tokens, stopwords, the stemmer, content stems, overlap and clipping (generic English)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import regex

_TOKEN = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
# Any script: a letter or digit, then letters, digits and the marks that belong to them
# (Indic vowel signs, Hebrew points). Letters without a decomposition (þ, ø, ł, ß) are
# letters of the word, not separators.
_ANY_TOKEN = regex.compile(r"[\p{L}\p{N}][\p{L}\p{N}\p{M}]*(?:['’][\p{L}\p{M}]+)?")

# Function words, question words and the operation cue words (they pick the operation,
# they are not what the question is about).
STOPWORDS = frozenset(
    """
    a an the i me my mine myself we us our ours you your yours he him his she her hers they
    them their theirs it its this that these those there here what which who whom whose when
    where why how and or but if then so because as at by for from in into of on onto to with
    without about over under between during since until till than via per is are was were be
    been being am do does did done doing have has had having will would can could should may
    might must shall not no yes any some all each every both either neither one ones other
    another else again more most less least much many very too also just ever never still now
    currently current latest recently recent total sum altogether combined average mean avg
    number count difference list name named kind kinds type types sort sorts long often times
    first last before after earlier later ago order came come happened highest largest biggest
    best longest lowest smallest cheapest fewest shortest maximum minimum greatest these days
    day days week weeks month months year years today yesterday tomorrow tonight moment
    monday tuesday wednesday thursday friday saturday sunday january february march april
    june july august september october november december i'm i've i'd i'll it's don't didn't
    doesn't haven't hasn't wasn't weren't isn't aren't s t please tell know remember recall
    """.split()  # noqa: SIM905 - a readable block of words
)
# Light verbs and money/measure words: they say how, not which item (dropped from the focus).
GENERIC = frozenset(
    """
    spend spent spending cost costs pay paid price priced money expensive cheap buy bought
    purchase purchased get got go went going make made take took related expense expenses
    stuff thing things item items amount value say said mention mentioned happen use used
    """.split()  # noqa: SIM905
)
_IRREGULAR = {
    "bought": "buy", "spent": "spend", "paid": "pay", "went": "go", "gone": "go",
    "going": "go", "got": "get", "gotten": "get", "made": "make", "ran": "run", "ate": "eat",
    "drove": "drive", "driven": "drive", "flew": "fly", "flown": "fly", "took": "take",
    "taken": "take", "gave": "give", "given": "give", "met": "meet", "saw": "see",
    "seen": "see", "sold": "sell", "left": "leave", "kept": "keep", "felt": "feel",
    "told": "tell", "said": "say", "thought": "think", "brought": "bring", "wrote": "write",
    "written": "write", "began": "begin", "won": "win", "lost": "lose", "found": "find",
    "sent": "send", "built": "build", "came": "come", "became": "become", "chose": "choose",
    "sat": "sit", "slept": "sleep", "taught": "teach", "caught": "catch", "children": "child",
    "people": "person", "men": "man", "women": "woman",
}  # fmt: skip
# -es after sh, ch or x is part of the plural (boxes, wishes). The full stemmer gets the same
# result from dropping the -s and then its final -e, so only the light folding needs the rule.
_SIBILANT_ES = ("shes", "ches", "xes")


def fold_accents(text: str) -> str:
    """Latin letters without their diacritics (``Zoë`` → ``Zoe``, ``São`` → ``Sao``).

    Marks on other scripts stay: there they are part of the letter, not an accent.
    """
    out: list[str] = []
    for ch in unicodedata.normalize("NFKD", text):
        if unicodedata.combining(ch) and out and out[-1] < "\u0250":
            continue
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))


def words(text: str) -> list[str]:
    """Lower-case word tokens, accents folded ("Inès" → "ines"), apostrophes kept inside."""
    if text.isascii():
        return _TOKEN.findall(text.lower())
    found: list[str] = _ANY_TOKEN.findall(fold_accents(text).lower())
    return found


def _singular(word: str) -> str:
    """The plural rule both stemmers share: -ies → -y, -sses → -ss, else a final -s
    (not -ss, -us, -is)."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def fold_plural(token: str) -> str:
    """Light, conservative plural folding (``tickets``→``ticket``, ``cities``→``city``).

    The BM25 index's only normalisation: words of three letters or fewer and words with
    digits or apostrophes stay as they are. Its output is stored in every sparse vector.
    """
    if len(token) <= 3 or not token.isalpha():
        return token
    if token.endswith(_SIBILANT_ES):
        return token[:-2]
    return _singular(token)


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A tiny suffix stripper: plural, -ing, -ed, final -e, plus common irregular verbs."""
    w = word.lower().replace("’", "'")
    w = w.removesuffix("'s").strip("'")
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if len(w) <= 3 or w.isdigit():
        return w
    # Unlike the BM25 folding, plurals with digits or apostrophes fold too ("1990s").
    w = _singular(w)
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]
            break
    return w[:-1] if w.endswith("e") and len(w) > 3 else w


STOP_STEMS = frozenset(stem(w) for w in STOPWORDS)
GENERIC_STEMS = frozenset(stem(w) for w in GENERIC)


@lru_cache(maxsize=16384)
def content_stems(text: str) -> frozenset[str]:
    """Stems of the non-stopword words of ``text``."""
    return frozenset(s for s in (stem(w) for w in words(text)) if s and s not in STOP_STEMS)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Overlap of two stem sets: shared over all (0.0 when both are empty)."""
    return len(a & b) / len(a | b) if a or b else 0.0


def clip(text: str, limit: int = 160) -> str:
    """Whitespace-collapsed text cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
