"""Time windows from the dates a query names ("in May 2023", "last week", "yesterday")."""

from __future__ import annotations

import re
from datetime import date, timedelta

from memstream.projection.dates import dates
from memstream.records.packet import TimeWindow
from memstream.times import parse_ts

_MONTHS = (
    "january february march april may june july august september october november december".split()  # noqa: SIM905
)
_MONTH_RE = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" + (
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_PREP = r"(?:in|during|since|before|after|until|till|by|from|of|throughout)"
_BARE_MONTH = re.compile(rf"\b{_PREP}\s+(?P<m>{_MONTH_RE})\b(?!\s*\d)", re.IGNORECASE)
_NAMED_MONTH = re.compile(
    rf"\b(?P<rel>last|next|this)\s+(?P<m>{_MONTH_RE})\b(?!\s*\d)", re.IGNORECASE
)
_BARE_YEAR = re.compile(rf"\b{_PREP}\s+(?P<y>(?:19|20)\d{{2}})\b", re.IGNORECASE)
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "few": 3, "couple of": 2}  # fmt: skip
_ROLLING = re.compile(
    r"\b(?:last|past|previous)\s+(?P<n>\d+|a|an|one|two|three|four|five|six|seven|eight|nine|"
    r"ten|few|couple of)?\s*(?P<u>days?|weeks?|months?|years?)\b",
    re.IGNORECASE,
)
OPEN_START = re.compile(r"\b(?:since|after|from|starting)\s+(?:the\s+)?$", re.IGNORECASE)
OPEN_END = re.compile(r"\b(?:before|until|till|by|prior to)\s+(?:the\s+)?$", re.IGNORECASE)

Span = tuple[int, str, date, date]  # position, text, start (incl.), end (excl.)


def _month_start(d: date, add: int = 0) -> date:
    months = d.year * 12 + d.month - 1 + add
    return date(months // 12, months % 12 + 1, 1)


def _granular(text: str, day: date) -> tuple[date, date]:
    """The period a resolved date expression names: a day, week, weekend, month or year."""
    s = text.lower()
    if re.fullmatch(rf"{_MONTH_RE}\s+\d{{4}}", s):
        return _month_start(day), _month_start(day, 1)
    if "week" in s:
        monday = day - timedelta(days=day.weekday())
        return monday, monday + timedelta(days=7)
    if "month" in s:
        return _month_start(day), _month_start(day, 1)
    if "year" in s:
        return date(day.year, 1, 1), date(day.year + 1, 1, 1)
    return day, day + timedelta(days=1)


def _month_number(name: str) -> int:
    return next(i for i, n in enumerate(_MONTHS, 1) if n.startswith(name.lower()[:3]))


def _named_month(rel: str, month: int, base: date) -> date:
    """The first day of "last/this/next <month>" seen from ``base``: last is the latest one
    before ``base``'s month, next the first one after it, this the one of ``base``'s year."""
    if rel == "last":
        return date(base.year if month < base.month else base.year - 1, month, 1)
    if rel == "next":
        return date(base.year if month > base.month else base.year + 1, month, 1)
    return date(base.year, month, 1)


def _rolling(m: re.Match[str], base: date) -> tuple[date, date]:
    n = NUMBERS.get((m.group("n") or "one").lower()) or int(m.group("n") or 1)
    unit = m.group("u").lower().rstrip("s")
    days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * n
    return base - timedelta(days=days), base + timedelta(days=1)


def date_spans(query: str, base: date) -> list[Span]:
    """Every date expression of ``query`` with the period it names, relative ones against
    ``base``, in query order."""
    found: list[Span] = []
    taken: list[tuple[int, int]] = []

    def add(pos: int, text: str, start: date, end: date) -> None:
        if any(a <= pos < b for a, b in taken):
            return
        taken.append((pos, pos + len(text)))
        found.append((pos, text, start, end))

    for m in _ROLLING.finditer(query):
        if m.group("n") or m.group(0).lower().startswith("past"):
            add(m.start(), m.group(0), *_rolling(m, base))
    lowered = query.lower()
    for rec in dates(query, base.isoformat()):
        pos = lowered.find(rec.text.lower())
        add(max(pos, 0), rec.text, *_granular(rec.text, date.fromisoformat(rec.date)))
    for m in _NAMED_MONTH.finditer(query):
        start = _named_month(m.group("rel").lower(), _month_number(m.group("m")), base)
        add(m.start(), m.group(0), start, _month_start(start, 1))
    for m in _BARE_MONTH.finditer(query):
        month = _month_number(m.group("m"))
        year = base.year if month <= base.month else base.year - 1
        start = date(year, month, 1)
        add(m.start("m"), m.group("m"), start, _month_start(start, 1))
    for m in _BARE_YEAR.finditer(query):
        year = int(m.group("y"))
        add(m.start("y"), m.group("y"), date(year, 1, 1), date(year + 1, 1, 1))
    return sorted(found)


def find_window(query: str, base: str) -> tuple[TimeWindow | None, list[Span]]:
    """The window the query's dates describe, and the date spans found.

    One date names its period; ``since``/``after`` open the end, ``before``/``until`` open
    the start; two or more dates span from the first period's start to the last one's end.
    """
    ts = parse_ts(base)
    if ts is None:
        return None, []
    spans = date_spans(query, ts.date())
    if not spans:
        return None, []
    texts = [s[1] for s in spans]
    start: date | None = min(s[2] for s in spans)
    end: date | None = max(s[3] for s in spans)
    if len(spans) == 1:
        before = query[: spans[0][0]]
        if OPEN_START.search(before):
            end = None
        elif OPEN_END.search(before):
            start, end = None, spans[0][2]
    window = TimeWindow(
        start=start.isoformat() if start else None,
        end=end.isoformat() if end else None,
        text=", ".join(texts),
    )
    return window, spans
