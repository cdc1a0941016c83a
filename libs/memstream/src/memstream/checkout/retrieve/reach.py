"""What the time lane and the second hop reach for, decided from the first hits (pure).

Time lane: the days a candidate belongs to (when it happened and the dates it speaks of)
and the anchor days a question's relative dates resolve against. Second hop: the entities
the best hits name that the question does not.
"""

from __future__ import annotations

from collections import Counter
from datetime import date

from memstream.checkout.model import Candidate, SynthesisPlan
from memstream.text.words import GENERIC_STEMS, STOP_STEMS, stem, words
from memstream.times import parse_ts

ANCHORS = 5  # the best hits whose days anchor relative dates
HOP_FROM = 5  # the best hits the second hop reads entities from
HOP_KEYS = 3  # entities the second hop searches
HOP_TERMS = 5  # words of the best hits the second hop adds to the question
_PLAIN = STOP_STEMS | GENERIC_STEMS


def candidate_days(c: Candidate) -> list[date]:
    """The day ``c`` happened and the days it speaks of ("last week" resolved against it)."""
    out = [ts.date()] if (ts := parse_ts(c.occurred_at)) is not None else []
    for d in c.dates:
        try:
            out.append(date.fromisoformat(d.date))
        except ValueError:
            continue
    return out


def anchor_days(best: list[Candidate], now: date | None) -> list[date]:
    """The days of the best event hits (the events the question is about), then now."""
    days = [
        ts.date() for c in best if c.kind == "event" and (ts := parse_ts(c.occurred_at)) is not None
    ][:ANCHORS]
    return list(dict.fromkeys([*days, *([now] if now is not None else [])]))


def hop_keys(plan: SynthesisPlan, best: list[Candidate]) -> list[str]:
    """The entities the best event hits name that the question does not: most hits first,
    then first named."""
    named = set(plan.entity_keys())
    counts: Counter[str] = Counter()
    for c in best[:HOP_FROM]:
        if c.kind == "event":
            counts.update(k for k in dict.fromkeys(c.entity_keys) if k and k not in named)
    return [k for k, _ in counts.most_common(HOP_KEYS)]


def hop_terms(plan: SynthesisPlan, best: list[Candidate]) -> list[str]:
    """Words at least two of the best event hits say and the question does not (what the
    first hits are about, in their words): said by most hits first, then first said."""
    asked = {stem(w) for w in words(plan.query)}
    first: dict[str, str] = {}  # stem -> the word as first said
    hits: Counter[str] = Counter()
    for c in best[:HOP_FROM]:
        if c.kind != "event":
            continue
        said: dict[str, str] = {}
        for w in words(c.text):
            st = stem(w)
            if len(st) > 2 and not st.isdigit() and st not in asked and st not in _PLAIN:
                said.setdefault(st, w)
        for st, w in said.items():
            first.setdefault(st, w)
            hits[st] += 1
    shared = sorted((st for st in first if hits[st] >= 2), key=lambda st: -hits[st])
    return [first[st] for st in shared[:HOP_TERMS]]
