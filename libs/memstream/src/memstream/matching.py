"""How a remembered item meets a question: the plan's focus terms and entities, the stems an
item says, and whether it names an entity or a focus term.

Shared by synthesis (which rows answer), the learning priors (which feedback bears on a
question) and the retriever, so it sits below all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from memstream.records.packet import Candidate, EvidenceRow, SynthesisPlan
from memstream.text.names import entity_key
from memstream.text.words import GENERIC_STEMS, STOP_STEMS, content_stems, stem, words

# Cosine of focus words and predicate words above which a predicate answers the question;
# with the static embedder "live" ~ "lives in" scores about .6, "job" ~ "works at" about .45,
# unrelated pairs mostly stay under .3.
PREDICATE_MATCH = 0.4
# The sides of a conversation, by the message type each side writes.
SIDE_TYPES = {"user": "message.user", "assistant": "message.assistant"}
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


def candidate_stems(c: Candidate) -> frozenset[str]:
    """Content stems of everything a candidate says (text, value, subject, entity keys)."""
    parts = [c.text, c.value_text or "", c.subject or "", *c.entity_keys]
    return content_stems(" ".join(parts))


def matches_entity(c: Candidate, key: str, stems: frozenset[str]) -> bool:
    """By entity key, subject or agent, by side ("user": what the user's side said), or by
    every word of the name occurring in the text."""
    if key in c.entity_keys or key == c.subject or key == entity_key(c.agent):
        return True
    if SIDE_TYPES.get(key) == c.type:
        return True
    name = [stem(w) for w in words(key)]
    return bool(name) and all(w in stems for w in name)


def with_source(
    c: Candidate, stems: frozenset[str], by_id: Mapping[str, Candidate]
) -> frozenset[str]:
    """``stems`` of a fact, with the words of the event it was drawn from when that event is
    in the pool: "Bob took a new job at Globex" makes ``bob works_at Globex`` a fact about
    jobs, whatever the predicate's name says."""
    if c.kind != "fact" or (source := by_id.get(c.ref.event_id)) is None:
        return stems
    return stems | candidate_stems(source)


def row_stems(row: EvidenceRow, c: Candidate) -> frozenset[str]:
    """A number's own words when its event holds several numbers, else the whole candidate."""
    if ":q" in row.row_id and len(c.quantities) > 1:
        return content_stems(row.label)
    return candidate_stems(c)


def entities_matched(
    plan: SynthesisPlan, entities: Iterable[str], c: Candidate, stems: frozenset[str]
) -> int:
    """How many of ``entities`` (the question's focus entities) ``c`` is about."""
    return sum(any(matches_entity(c, k, stems) for k in plan.keys_of(e)) for e in entities)


def terms_matched(focus_terms: frozenset[str], c: Candidate, stems: frozenset[str]) -> int:
    """Focus terms among ``stems``; a fact whose predicate means the question counts as one."""
    overlap = len(focus_terms & stems)
    if not overlap and c.kind == "fact" and (c.relevance or 0.0) >= PREDICATE_MATCH:
        return 1  # the predicate means what the question asks, in other words
    return overlap
