"""Facts answer first: when valid facts match the plan, the answer comes from them, and the
messages that state the same value corroborate it."""

from __future__ import annotations

from collections.abc import Mapping

from memstream.checkout.synthesis.context import Ctx, is_fact
from memstream.matching import candidate_stems, matches_entity
from memstream.records.packet import AnswerCandidate, Candidate, EvidenceRow, SynthesisPlan
from memstream.text.words import content_stems
from memstream.times import parse_ts

# Operations whose answer is one value: messages stating that value back it up.
SINGLE_VALUE_OPS = frozenset({"lookup", "latest_value"})


def facts_first(pool: list[EvidenceRow], ctx: Ctx) -> list[EvidenceRow]:
    """The best-ranked fact chain of ``pool`` (facts carry validity), else ``pool``.

    ``pool`` is best first; the chain is the rows of the first fact's subject and predicate.
    """
    facts = [r for r in pool if is_fact(r, ctx)]
    if not facts:
        return pool
    best = facts[0]
    return [r for r in facts if (r.entity, r.label) == (best.entity, best.label)]


def corroborate(
    plan: SynthesisPlan, answer: AnswerCandidate, by_id: Mapping[str, Candidate]
) -> AnswerCandidate:
    """``answer`` with the events that state its fact's value added to its support.

    An event other than the fact's own record corroborates when it is about one of the
    question's entities, happened by the plan's ``as_of`` and holds every content word of the
    value ("Utrecht" in "we moved to
    Utrecht"). Numbers are left alone: a bare number in a message is too easily another one.
    """
    fact = by_id.get(answer.support_ids[0]) if answer.support_ids else None
    keys = plan.entity_keys()
    if plan.operation not in SINGLE_VALUE_OPS or fact is None or fact.kind != "fact" or not keys:
        return answer
    value = content_stems(str(fact.value_text or ""))
    as_of = parse_ts(plan.as_of)
    if not value or any(ch.isdigit() for ch in str(fact.value_text)):
        return answer
    source = fact.ref.event_id  # the fact's own record is not a second witness
    extra = []
    for c in by_id.values():
        if c.kind != "event" or c.item_id in answer.support_ids or c.item_id == source:
            continue
        when = parse_ts(c.occurred_at)
        if as_of is not None and when is not None and when > as_of:
            continue
        stems = candidate_stems(c)
        if value <= stems and any(matches_entity(c, k, stems) for k in keys):
            extra.append(c.item_id)
    if not extra:
        return answer
    return answer.model_copy(update={"support_ids": [*answer.support_ids, *sorted(extra)]})
