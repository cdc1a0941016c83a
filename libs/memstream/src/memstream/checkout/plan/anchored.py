"""Time ranges a question names, resolved against the dates memory holds (the time lane).

:func:`~memstream.checkout.plan.window.find_window` resolves a question's dates against now
(or ``as_of``). In a memory of past conversations "last June", "yesterday" or "the week
after" means a time near the events the question is about, not near now: each relative
date is resolved again against the days of those events (the anchors) as well as now, and
"N weeks before/after X" becomes a range on that side of X's days. Dates that carry their
year ("in 2022", "May 2023") name one period whatever the anchor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta

from memstream.checkout.plan.window import NUMBERS, OPEN_END, OPEN_START, date_spans

DayRange = tuple[date, date]  # first day, day after the last
_UNIT_DAYS = {"day": 1, "night": 1, "week": 7, "weekend": 7, "month": 31, "year": 366}
_YEAR = re.compile(r"\b\d{4}\b")
MAX_COUNT = 10_000  # "99999999999 days before" counts this many (a timedelta has an end)
_COUNT = (
    r"\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|(?:a\s+)?few|(?:a\s+)?couple\s+of"
)
_OFFSET = re.compile(
    rf"\b(?:(?P<n>{_COUNT})\s+(?P<u>days?|nights?|weeks?|months?|years?)|"
    r"the\s+(?P<the>day|night|week(?:end)?|month|year))\s+"
    r"(?P<dir>before|after|prior\s+to|earlier\s+than|later\s+than)\b(?P<rest>[^?!.;,]*)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Offset:
    """ "two weeks before the trip": ``days`` before (negative) or after (positive) the
    days of what ``anchor_text`` names ("the trip"; empty: the question's own events)."""

    days: int
    unit_days: int
    anchor_text: str

    def around(self, anchor: date) -> DayRange:
        """The range on this offset's side of ``anchor``, one unit wider than the offset
        (people round: "two weeks before" is rarely exactly fourteen days), anchor included."""
        reach = timedelta(days=abs(self.days) + self.unit_days)
        if self.days < 0:
            return _shift(anchor, -reach), _shift(anchor, timedelta(days=1))
        return anchor, _shift(anchor, reach + timedelta(days=1))


def _shift(day: date, by: timedelta) -> date:
    """``day + by``, saturated at the ends of ``date``'s range (an event may be dated in
    year 9999)."""
    try:
        return day + by
    except OverflowError:
        return date.max if by > timedelta(0) else date.min


def offsets(query: str) -> list[Offset]:
    """The "N <units> before/after X" expressions of ``query``."""
    out: list[Offset] = []
    for m in _OFFSET.finditer(query):
        count = re.sub(r"\s+", " ", (m.group("n") or "one").lower()).removeprefix("a ")
        n = NUMBERS.get(count) or (min(int(count), MAX_COUNT) if count.isdigit() else 1)
        unit = (m.group("u") or m.group("the")).lower().rstrip("s")
        days = n * _UNIT_DAYS[unit]
        sign = -1 if m.group("dir").lower().startswith(("before", "prior", "earlier")) else 1
        out.append(Offset(sign * days, _UNIT_DAYS[unit], m.group("rest").strip()))
    return out


def _open_ended(query: str, pos: int) -> bool:
    """ "since May", "before 2022": a bound, not a period to look in."""
    before = query[:pos]
    return bool(OPEN_START.search(before) or OPEN_END.search(before))


def named_ranges(query: str, anchors: Iterable[date]) -> list[DayRange]:
    """The periods ``query``'s dates name: those with a year once, relative ones (no year:
    "last June", "yesterday", "in March") against every anchor day. Offsets are apart
    (:func:`offsets`); bounds ("since May") are left to the plan's window."""
    out: list[DayRange] = []
    for i, anchor in enumerate(dict.fromkeys(anchors)):
        for pos, text, start, end in spans_at(query, anchor):
            absolute = bool(_YEAR.search(text))
            if (absolute and i > 0) or _open_ended(query, pos):
                continue
            out.append((start, end))
    return list(dict.fromkeys(out))


def spans_at(query: str, anchor: date) -> list[tuple[int, str, date, date]]:
    """:func:`date_spans` against ``anchor``; none where a period would leave ``date``'s
    range ("next month" seen from December 9999)."""
    try:
        return date_spans(query, anchor)
    except (ValueError, OverflowError):
        return []


def without_dates(query: str, anchor: date) -> str:
    """``query`` with the date expressions :func:`spans_at` finds taken out, spaces closed
    ("What did Noor cook on 9 May, 2029?" → "What did Noor cook on ?")."""
    out = query
    for pos, text, _start, _end in sorted(spans_at(query, anchor), reverse=True):
        if query[pos : pos + len(text)].lower() == text.lower():  # found where it is written
            out = f"{out[:pos]} {out[pos + len(text) :]}"
    return " ".join(out.split())


def in_ranges(days: Iterable[date], ranges: list[DayRange]) -> bool:
    """Does any of ``days`` fall in any of ``ranges``?"""
    return any(a <= d < b for d in days for a, b in ranges)
