"""Dates in text: absolute ones, and relative ones resolved against the event's time."""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache

import dateparser

from memstream.records.projected import DateRecord

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_NUM = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of)"
_UNIT = r"(?:days?|weeks?|months?|years?)"
_PATTERNS = [
    r"\b\d{4}-\d{2}-\d{2}\b",
    r"\b\d{1,2}/\d{1,2}/\d{2,4}\b",
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?\b",
    rf"\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b",
    rf"\b{_MONTH}\s+\d{{4}}\b",
    r"\b(?:yesterday|today|tomorrow|tonight)\b",
    rf"\b(?:last|next|this|past)\s+(?:week(?:end)?|month|year|{_WEEKDAY})\b",
    rf"\b{_NUM}\s+{_UNIT}\s+(?:ago|from now|later|earlier)\b",
    rf"\bin\s+{_NUM}\s+{_UNIT}\b",
    rf"\b(?:on\s+)?{_WEEKDAY}\b",
]
_CANDIDATE = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE)
_RELATIVE = re.compile(
    rf"yesterday|today|tomorrow|tonight|last|next|this|past|ago|from now|later|earlier|"
    rf"\bin\s|^(?:on\s+)?{_WEEKDAY}$",
    re.IGNORECASE,
)
_SETTINGS = {"PREFER_DATES_FROM": "past", "RETURN_AS_TIMEZONE_AWARE": False}


@lru_cache(maxsize=65536)
def _resolve(span: str, base_day: str) -> str | None:
    base = datetime.fromisoformat(base_day)
    settings = dict(_SETTINGS, RELATIVE_BASE=base)
    if span.startswith("next ") or span.startswith("in ") or "from now" in span:
        settings["PREFER_DATES_FROM"] = "future"
    parsed = dateparser.parse(span.removeprefix("on "), settings=settings, languages=["en"])
    return parsed.date().isoformat() if parsed is not None else None


def dates(text: str, occurred_at: str) -> list[DateRecord]:
    """Every date expression in ``text`` as an ISO day; relative ones against ``occurred_at``."""
    base_day = occurred_at[:10] + "T12:00:00"
    out: list[DateRecord] = []
    for m in _CANDIDATE.finditer(text):
        span = m.group(0).strip().lower()
        day = _resolve(span, base_day)
        if day is not None:
            out.append(DateRecord(text=m.group(0), date=day, relative=bool(_RELATIVE.search(span))))
    return out
