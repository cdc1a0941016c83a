"""What the time lane, the second hop and the chain lane reach for, decided from the first
hits (pure).

Time lane: the days a candidate belongs to (when it happened and the dates it speaks of)
and the anchor days a question's relative dates resolve against. Second hop: the entities
the best hits name that the question does not. Chain lane: the turns around a hit that
belong with it.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from datetime import date

from memstream.records.packet import Candidate, SynthesisPlan
from memstream.records.projected import EventRecord
from memstream.text.names import entity_key
from memstream.text.words import GENERIC_STEMS, STOP_STEMS, stem, words
from memstream.times import parse_ts

ANCHORS = 5  # the best hits whose days anchor relative dates
HOP_FROM = 5  # the best hits the second hop reads entities from
HOP_KEYS = 3  # entities the second hop searches
HOP_TERMS = 5  # words of the best hits the second hop adds to the question
CHAIN_FROM = 3  # the best hits whose turns around them the chain lane adds
CHAIN_RADIUS = 2  # stream positions read around each (the answer to a question about it)
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


def around(seq: int, chain: list[EventRecord]) -> list[EventRecord]:
    """The turns of ``chain`` (the stream around the hit at ``seq``) that belong with the hit,
    in stream order: the one before it, the hit, the one after it, and, when the one after it
    is a question somebody else asks, the answer that follows. A reply such as "Crisp on top,
    soft inside!" names nothing the hit said, yet answers what was asked about it."""
    by_seq = {e.seq: e for e in chain}
    out = [by_seq[s] for s in (seq - 1, seq, seq + 1) if s in by_seq]
    hit, asked, answer = by_seq.get(seq), by_seq.get(seq + 1), by_seq.get(seq + 2)
    if (
        hit is not None
        and asked is not None
        and answer is not None
        and asks(asked.text)
        and entity_key(asked.agent) != entity_key(hit.agent)
        and entity_key(answer.agent) != entity_key(asked.agent)
    ):
        out.append(answer)
    return out


ASK_TAIL = 64  # characters read back from a turn's end for its question mark


def asks(text: str) -> bool:
    """``text`` ends with a question mark, read past what may trail it in a chat message:
    spaces, control and format characters, emoji and other symbols ("Any good? 😋"), and
    the "!" of "Really?!". The full-width "？" counts (NFKC folds it), as does the Arabic "؟".
    Only the last :data:`ASK_TAIL` characters are read: a turn of a megabyte of emoji asks
    nothing, and reading it all would cost every checkout that reaches it."""
    tail = text.rstrip()[-ASK_TAIL:]
    end = len(tail)
    while end and (_trails(tail[end - 1]) or tail[end - 1] in "!！"):
        end -= 1
    return end > 0 and unicodedata.normalize("NFKC", tail[end - 1]) in ("?", "\u061f")


def _trails(ch: str) -> bool:
    # Mn covers the variation selector that ends many emoji ("❤️" is U+2764 U+FE0F).
    return ch.isspace() or unicodedata.category(ch)[0] in "CZS" or unicodedata.category(ch) == "Mn"
