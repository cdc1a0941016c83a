"""Facts as memory knew them at a time: the one rule graph reads and the fact lane share.

The graph stores each fact group chained as memory knows it now. Asked about an earlier
``as_of``, memory answers as it stood then: a fact recorded later did not exist yet and
cannot supersede anything (even back-dated), and an invalidation made later had not
happened, so the fact it closed was still a link of its chain.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from memstream.records.projected import FactView
from memstream.times import parse_ts


def known_at(facts: Iterable[FactView], as_of: datetime) -> list[FactView]:
    """Facts recorded and valid by ``as_of``, each closed only by the next fact of its
    subject and predicate that was also known then; invalidated ones (by then) keep their
    closing and close nothing."""
    known = [_as_then(f, as_of) for f in facts if _seen_by(f, as_of)]
    out = [f for f in known if f.invalidated_at is not None]
    chains: dict[tuple[str, str], list[FactView]] = defaultdict(list)
    for f in known:
        if f.invalidated_at is None:
            chains[(f.subject_key, f.predicate)].append(f)
    for chain in chains.values():
        chain.sort(key=lambda f: (f.valid_from, f.fact_id))
        for f, nxt in zip(chain, [*chain[1:], None], strict=True):
            if nxt is not None:
                f = f.model_copy(update={"valid_to": nxt.valid_from, "superseded_by": nxt.fact_id})
            elif f.valid_to is not None:
                f = f.model_copy(update={"valid_to": None, "superseded_by": None})
            out.append(f)
    return out


def valid_at(f: FactView, as_of: datetime) -> bool:
    """``f`` (as :func:`known_at` returns it) holds at ``as_of``."""
    end = parse_ts(f.valid_to)
    return end is None or end > as_of


def _seen_by(f: FactView, as_of: datetime) -> bool:
    recorded = parse_ts(f.recorded_at or f.valid_from)
    valid = parse_ts(f.valid_from)
    return (recorded is None or recorded <= as_of) and (valid is None or valid <= as_of)


def _as_then(f: FactView, as_of: datetime) -> FactView:
    """``f`` without an invalidation made after ``as_of`` (its chain decides its end)."""
    at = parse_ts(f.invalidated_at)
    if at is None or at <= as_of:
        return f
    return f.model_copy(
        update={
            "invalidated_at": None,
            "invalidation_reason": None,
            "invalidated_by": None,
            "valid_to": None,
            "superseded_by": None,
        }
    )
