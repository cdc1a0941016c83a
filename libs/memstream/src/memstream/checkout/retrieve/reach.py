"""What the time lane and the second hop reach for, decided from the first hits (pure).

Time lane: the days a candidate belongs to (when it happened and the dates it speaks of)
and the anchor days a question's relative dates resolve against. Second hop: the entities
the best hits name that the question does not.
"""

from __future__ import annotations

from collections import Counter
from datetime import date

from memstream.checkout.model import Candidate, SynthesisPlan
from memstream.times import parse_ts

ANCHORS = 5  # the best hits whose days anchor relative dates
HOP_FROM = 5  # the best hits the second hop reads entities from
HOP_KEYS = 3  # entities the second hop searches


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
