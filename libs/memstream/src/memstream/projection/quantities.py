"""Numbers with units and currencies found in text."""

from __future__ import annotations

import re

from price_parser import Price

from memstream.records.projected import QuantityRecord

_CURRENCY = re.compile(
    r"(?P<sym>[$€£¥])\s?(?P<num>\d[\d,.]*)(?:\s?(?P<mult>k|m|bn|thousand|million|billion)\b)?"
    r"|\b(?P<num2>\d[\d,.]*)\s?(?P<mult2>k|thousand|million|billion)?\s?"
    r"(?P<name>dollars?|usd|euros?|eur|pounds?|gbp|yen)\b",
    re.IGNORECASE,
)
_UNIT = re.compile(
    r"\b(\d[\d,]*(?:\.\d+)?)\s?(%|percent|km|kilometers?|miles?|kg|kilograms?|lbs?|pounds?|"
    r"hours?|hrs?|minutes?|mins?|seconds?|days?|weeks?|months?|years?|times|tickets?|items?|"
    r"people|users?|books?|pages?|steps?|calories|cups?|meters?|m|cm|mm|gb|mb|tb|°c|°f)\b",
    re.IGNORECASE,
)
_MULT = {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}
_CURRENCY_NAMES = {
    "$": "USD", "dollar": "USD", "dollars": "USD", "usd": "USD",
    "€": "EUR", "euro": "EUR", "euros": "EUR", "eur": "EUR",
    "£": "GBP", "pound": "GBP", "pounds": "GBP", "gbp": "GBP",
    "¥": "JPY", "yen": "JPY",
}  # fmt: skip


def _currency_code(symbol: str | None) -> str | None:
    return _CURRENCY_NAMES.get((symbol or "").lower().strip()) if symbol else None


def quantities(text: str) -> list[QuantityRecord]:
    """Currency amounts (normalised to ISO codes) and counted units, in text order."""
    out: list[QuantityRecord] = []
    taken: list[tuple[int, int]] = []
    for m in _CURRENCY.finditer(text):
        number = m.group("num") or m.group("num2")
        # price-parser reads "1,234.50" and "1.234,50" alike.
        amount = Price.fromstring(number.rstrip(".,")).amount
        if amount is None:
            continue
        mult = (m.group("mult") or m.group("mult2") or "").lower()
        code = _currency_code(m.group("sym") or m.group("name"))
        out.append(
            QuantityRecord(value=float(amount) * _MULT.get(mult, 1.0), unit=code, text=m.group(0))
        )
        taken.append(m.span())
    for m in _UNIT.finditer(text):
        if any(a <= m.start() < b for a, b in taken):
            continue
        number = float(m.group(1).replace(",", ""))
        unit = m.group(2).lower()
        out.append(QuantityRecord(value=number, unit=unit, text=m.group(0)))
    return out
