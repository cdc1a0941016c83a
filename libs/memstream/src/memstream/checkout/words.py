"""Shared word, unit, time and number helpers for the synthesis layer (generic English)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache

_TOKEN = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")

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


def words(text: str) -> list[str]:
    """Lower-case word tokens (apostrophes kept inside words)."""
    return _TOKEN.findall(text.lower())


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A tiny suffix stripper: plural, -ing, -ed, final -e, plus common irregular verbs."""
    w = word.lower().replace("’", "'")
    w = w.removesuffix("'s").strip("'")
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if len(w) <= 3 or w.isdigit():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
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
    return len(a & b) / len(a | b) if a or b else 0.0


# --- units ---------------------------------------------------------------------------------

_CURRENCIES = {"$": "USD", "usd": "USD", "dollar": "USD", "dollars": "USD", "€": "EUR",
               "eur": "EUR", "euro": "EUR", "euros": "EUR", "£": "GBP", "gbp": "GBP",
               "pound": "GBP", "pounds": "GBP", "¥": "JPY", "jpy": "JPY", "yen": "JPY"}  # fmt: skip
_UNITS = {"hr": "hour", "hrs": "hour", "min": "minute", "mins": "minute", "sec": "second",
          "secs": "second", "kilometer": "km", "kilometre": "km", "kilometers": "km",
          "kilometres": "km", "meter": "m", "metre": "m", "meters": "m", "metres": "m",
          "kilogram": "kg", "kilograms": "kg", "lbs": "lb", "percent": "%", "people": "person",
          "times": "time"}  # fmt: skip
_DIMENSION = {"hour": "time", "minute": "time", "second": "time", "day": "time",
              "week": "time", "month": "time", "year": "time", "km": "length", "mile": "length",
              "m": "length", "cm": "length", "mm": "length", "kg": "mass", "lb": "mass",
              "gb": "data", "mb": "data", "tb": "data"}  # fmt: skip
CURRENCY_CODES = frozenset(_CURRENCIES.values())
_SYMBOL = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}
_NO_PLURAL = frozenset({"km", "kg", "lb", "m", "cm", "mm", "gb", "mb", "tb", "%", "°c", "°f"})


def normalise_unit(unit: str | None) -> str | None:
    """Canonical unit: ISO currency codes, singular lower-case units (``hours`` → ``hour``)."""
    if unit is None or not unit.strip():
        return None
    u = unit.strip().lower()
    if u in _CURRENCIES:
        return _CURRENCIES[u]
    if u.upper() in CURRENCY_CODES:
        return u.upper()
    if u in _UNITS:
        return _UNITS[u]
    if len(u) > 3 and u.endswith("s") and not u.endswith("ss"):
        u = u[:-1]
    return _UNITS.get(u, u)


def is_currency(unit: str | None) -> bool:
    return unit in CURRENCY_CODES


def dimension(unit: str | None) -> str | None:
    """What a unit measures: ``currency``, ``time``, ``length``…, or the unit itself."""
    if unit is None:
        return None
    return "currency" if is_currency(unit) else _DIMENSION.get(unit, unit)


def fmt_number(value: float) -> str:
    """``1234.5`` → ``1,234.50``; ``360.0`` → ``360``."""
    if abs(value - round(value)) < 1e-9:
        return f"{round(value):,}"
    return f"{value:,.2f}"


def fmt_amount(value: float, unit: str | None) -> str:
    """A value with its unit: ``$1,234.50``, ``12 km``, ``3 hours``, ``40 CHF``."""
    if unit is None:
        return fmt_number(value)
    if unit in _SYMBOL:
        sign = "-" if value < 0 else ""
        return f"{sign}{_SYMBOL[unit]}{fmt_number(abs(value))}"
    if is_currency(unit):
        return f"{fmt_number(value)} {unit}"
    shown = unit
    if abs(value - 1) > 1e-9 and unit not in _NO_PLURAL and unit.isalpha():
        shown = "people" if unit == "person" else unit + "s"
    return f"{fmt_number(value)} {shown}"


def parse_ts(value: str | None) -> datetime | None:
    """An ISO date or timestamp as an aware UTC datetime (None if unparseable)."""
    if not value:
        return None
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def day_of(value: str | None) -> str:
    """The ISO day of a timestamp (``""`` if unknown)."""
    ts = parse_ts(value)
    return ts.date().isoformat() if ts else ""


def clip(text: str, limit: int = 160) -> str:
    """Whitespace-collapsed text cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
