"""What a plan is about: its focus terms and entities, and whether it computes over numbers."""

from __future__ import annotations

from dataclasses import dataclass

from memstream.checkout.model import SynthesisPlan
from memstream.text.words import GENERIC_STEMS, STOP_STEMS, stem, words

NUMERIC_OPS = frozenset({"sum", "average", "difference", "argmax", "argmin"})


def numeric_plan(plan: SynthesisPlan) -> bool:
    """Does the plan compute over numbers (so events give one row per quantity)?"""
    if plan.operation in NUMERIC_OPS:
        return True
    return plan.operation != "count" and plan.answer_type in ("money", "number")


@dataclass(frozen=True)
class Focus:
    """What the question is about: content-word stems and entity keys."""

    terms: frozenset[str]
    entities: tuple[str, ...]


def _named_stems(plan: SynthesisPlan) -> set[str]:
    """Stems of the entities' keys and of the words that named them ("ines" → "ines moreau")."""
    names = [*plan.entities, *(k for m in plan.mentions for k in m.keys)]
    names += [m.text for m in plan.mentions]
    return {stem(w) for n in names for w in words(n)}


def focus_of(plan: SynthesisPlan) -> Focus:
    """Plan terms minus light verbs/measure words and the entity names themselves.

    When nothing specific is left, no entity is named and the plan is not numeric, the light
    verbs are the focus ("what did I buy?"); a numeric plan with no focus uses every value in
    its unit.
    """
    named = _named_stems(plan)
    stems = [s for s in (stem(t) for t in plan.terms) if s not in named and s not in STOP_STEMS]
    focus = {s for s in stems if s not in GENERIC_STEMS}
    counting_units = plan.operation == "count" and plan.unit is not None
    if not focus and not plan.entities and not numeric_plan(plan) and not counting_units:
        focus = set(stems)
    return Focus(frozenset(focus), tuple(plan.entities))


def focus_words(plan: SynthesisPlan) -> list[str]:
    """The plan's terms whose stems are in its focus, as written ("living", not "liv")."""
    focus = focus_of(plan).terms
    return [t for t in plan.terms if stem(t) in focus]
