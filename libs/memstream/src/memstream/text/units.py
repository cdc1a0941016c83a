"""Units and amounts: canonical unit names, what a unit measures, and how amounts read."""

from __future__ import annotations

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
    """Is ``unit`` one of the currency codes :func:`normalise_unit` produces?"""
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
