"""Feedback priors: what past outcomes say about a memory, bounded, for one question (pure).

A memory's prior is computed at checkout from its feedback records: each
record counts ``signal × certainty``, halved every ``half_life_days``, and weighted by how
close the question it was given for is to this one (a record without a family, or from an
unrelated family, still counts ``global_share``). The sum is squashed into -1..1.

The bound: a prior never brings a candidate into the pool. It re-orders items that the
question retrieves and that match it on their own (see ``relevant``) or that earned it
(tasks asking a question of this family, about the same entities, succeeded relying on them:
``family_success``; praise from elsewhere never earns it), by at most
``rank_weight`` focus terms and a ``score_lift``/``score_drop`` share of the fused score. A
version built without feedback has no records: the original ranking.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from memstream.events.payloads import QuestionFamily
from memstream.learning.trace import family_of, family_similarity
from memstream.matching import candidate_stems, entities_matched, focus_of, terms_matched
from memstream.records.packet import Candidate, OutcomeRecord, PacketWarning, SynthesisPlan
from memstream.records.projected import FeedbackRecord
from memstream.times import parse_ts


@dataclass(frozen=True)
class PriorPolicy:
    """The bound and the memory of feedback."""

    half_life_days: float = 30.0
    global_share: float = 0.3  # what a record from another question family still counts
    saturation: float = 1.5  # prior = tanh(sum / saturation)
    dead_zone: float = 0.05  # |prior| below this changes nothing
    rank_weight: float = 1.0  # at most this many focus terms of relevance, up or down
    score_lift: float = 0.25  # fused score × (1 + lift × prior), prior > 0, relevant only
    score_drop: float = 0.5  # fused score × (1 + drop × prior), prior < 0
    family_match: float = 0.5  # a success counts for a question this close to its own


@dataclass(frozen=True)
class Prior:
    """One memory's prior for one question, and the records behind it."""

    item_id: str
    value: float  # -1 .. 1 (0 inside the dead zone)
    records: int
    feedback_ids: tuple[str, ...]  # the ledger events (memory.feedback) it rests on
    failed_tasks: tuple[str, ...]
    succeeded_tasks: tuple[str, ...]
    family_success: bool = False  # a task asking a question of this family succeeded with it


@dataclass(frozen=True)
class Adjustment:
    """What a prior did to one candidate of one checkout (shown in the packet's meta)."""

    item_id: str
    prior: float
    effect: str  # raised | lowered | not_relevant (a positive prior the question did not earn)
    from_rank: int
    to_rank: int
    records: int
    feedback_ids: list[str] = field(default_factory=list)
    failed_tasks: list[str] = field(default_factory=list)
    succeeded_tasks: list[str] = field(default_factory=list)


def _decay(at: str, now: datetime, half_life_days: float) -> float:
    ts = parse_ts(at)
    if ts is None:
        return 1.0
    age_days = max(0.0, (now - ts).total_seconds() / 86_400)
    return float(0.5 ** (age_days / half_life_days))


def _closeness(family: QuestionFamily, record: FeedbackRecord, share: float) -> float:
    sim = family_similarity(family, record.family) if record.family is not None else 0.0
    return share + (1 - share) * sim


def _kin(family: QuestionFamily, other: QuestionFamily, policy: PriorPolicy) -> bool:
    """``other`` asked this kind of question, about the same things: close enough, and the
    two do not each name an entity the other does not (the Hekla gateway's tasks say nothing
    of the Þórsmörk one; a lower-case question naming none conflicts with neither)."""
    own, theirs = set(family.entities), set(other.entities)
    if own - theirs and theirs - own:
        return False
    return family_similarity(family, other) >= policy.family_match


def earned_ids(found: dict[str, Prior]) -> set[str]:
    """Memories relevant by their record: a task asking this kind of question succeeded
    with them (see ``_kin``). They may be raised, and answer, without sharing its words."""
    return {item_id for item_id, p in found.items() if p.family_success}


def priors(
    records: Iterable[FeedbackRecord],
    family: QuestionFamily,
    now: datetime,
    policy: PriorPolicy = PriorPolicy(),
) -> dict[str, Prior]:
    """The prior of every memory the records are about, for a question of ``family``."""
    by_target: dict[str, list[FeedbackRecord]] = {}
    for r in records:
        by_target.setdefault(r.target_id, []).append(r)
    out: dict[str, Prior] = {}
    for target, group in by_target.items():
        total = sum(
            r.signal
            * r.certainty
            * _decay(r.at, now, policy.half_life_days)
            * _closeness(family, r, policy.global_share)
            for r in group
        )
        value = math.tanh(total / policy.saturation)
        failed = [r.task_id for r in group if r.task_id and r.outcome == "failure"]
        succeeded = [r.task_id for r in group if r.task_id and r.outcome == "success"]
        kin = any(
            r.outcome == "success" and r.family is not None and _kin(family, r.family, policy)
            for r in group
        )
        out[target] = Prior(
            item_id=target,
            value=0.0 if abs(value) < policy.dead_zone else round(value, 4),
            records=len(group),
            feedback_ids=tuple(dict.fromkeys(r.event_id for r in group)),
            failed_tasks=tuple(dict.fromkeys(failed)),
            succeeded_tasks=tuple(dict.fromkeys(succeeded)),
            family_success=kin,
        )
    return out


def by_candidate(found: dict[str, Prior], candidates: list[Candidate]) -> dict[str, Prior]:
    """The priors keyed by candidate: a fact without feedback of its own carries its source
    event's (feedback names what a task used, an event; the answer may come from its fact).
    The prior keeps the id its records are about."""
    out = dict(found)
    for c in candidates:
        if c.kind == "fact" and c.item_id not in out and c.ref.event_id in found:
            out[c.item_id] = found[c.ref.event_id]
    return out


def outcome_records(found: dict[str, Prior], candidates: list[Candidate]) -> list[OutcomeRecord]:
    """What synthesis needs of the priors: per candidate, its applied prior and its record."""
    out = []
    for c in candidates:
        p = found.get(c.item_id)
        if p is None or not (p.failed_tasks or p.succeeded_tasks):
            continue
        out.append(
            OutcomeRecord(
                item_id=c.item_id,
                prior=c.prior,
                failed_tasks=list(p.failed_tasks),
                succeeded_tasks=list(p.succeeded_tasks),
                feedback_ids=list(p.feedback_ids),
                family_success=p.family_success,
            )
        )
    return out


def apply_priors(
    candidates: list[Candidate],
    found: dict[str, Prior],
    relevant: set[str],
    policy: PriorPolicy = PriorPolicy(),
) -> tuple[list[Candidate], list[Adjustment]]:
    """The pool re-ordered by the priors, each candidate carrying its bounded ``prior``.

    ``relevant``: ids that match the question on their own; only they may be raised.
    """
    adjusted: list[Candidate] = []
    for c in candidates:
        p = found.get(c.item_id)
        value = p.value if p is not None else 0.0
        if value > 0 and c.item_id not in relevant:
            value = 0.0
        factor = 1 + (policy.score_lift if value > 0 else policy.score_drop) * value
        adjusted.append(
            c.model_copy(update={"score": round(c.score * factor, 6), "prior": value})
            if value
            else c
        )
    order = sorted(range(len(adjusted)), key=lambda i: (-adjusted[i].score, i))
    new_rank = {adjusted[i].item_id: rank for rank, i in enumerate(order)}
    notes = []
    for old_rank, c in enumerate(candidates):
        p = found.get(c.item_id)
        if p is None or p.value == 0.0:
            continue
        applied = adjusted[old_rank].prior
        effect = "not_relevant" if applied == 0.0 else ("raised" if applied > 0 else "lowered")
        notes.append(
            Adjustment(
                item_id=c.item_id,
                prior=p.value,
                effect=effect,
                from_rank=old_rank,
                to_rank=new_rank[c.item_id],
                records=p.records,
                feedback_ids=list(p.feedback_ids[:10]),
                failed_tasks=list(p.failed_tasks[:10]),
                succeeded_tasks=list(p.succeeded_tasks[:10]),
            )
        )
    return [adjusted[i] for i in order], notes


def relevant_ids(plan: SynthesisPlan, candidates: list[Candidate]) -> set[str]:
    """Candidates that match the question on their own, by the rule evidence selection uses:
    every named entity (if any) and a focus term or a fact whose predicate means it."""
    focus = focus_of(plan)
    out = set()
    for c in candidates:
        stems = candidate_stems(c)
        terms = not focus.terms or terms_matched(focus.terms, c, stems) > 0
        if terms and entities_matched(plan, focus.entities, c, stems) == len(focus.entities):
            out.add(c.item_id)
    return out


def failure_warnings(found: dict[str, Prior], shown: list[str]) -> list[PacketWarning]:
    """A warning per shown memory that tasks relying on it failed: the agent sees why."""
    out = []
    named: set[str] = set()
    for shown_id in dict.fromkeys(shown):
        p = found.get(shown_id)
        if p is None or not p.failed_tasks or p.item_id in named:
            continue
        item_id = p.item_id  # a fact shown for its event's record: the event is named once
        named.add(item_id)
        tasks = ", ".join(p.failed_tasks[:5]) + (" …" if len(p.failed_tasks) > 5 else "")
        ok = f"; {len(p.succeeded_tasks)} succeeded with it" if p.succeeded_tasks else ""
        message = (
            f"{item_id} was relied on by {len(p.failed_tasks)} failed task(s): {tasks}{ok} "
            f"(prior {p.value:+.2f}; feedback {', '.join(p.feedback_ids[:3])})"
        )
        out.append(PacketWarning(kind="failure_record", message=message, ids=[item_id]))
    return out


def learned_pool(
    plan: SynthesisPlan,
    candidates: list[Candidate],
    records: Iterable[FeedbackRecord],
    now: datetime,
    policy: PriorPolicy = PriorPolicy(),
) -> tuple[list[Candidate], dict[str, Prior], list[Adjustment]]:
    """The pool as the records leave it for this question: the priors by candidate, the pool
    re-ordered (only relevant or earned items raised), and what each prior did."""
    found = by_candidate(priors(records, family_of(plan), now, policy), candidates)
    relevant = relevant_ids(plan, candidates) | earned_ids(found)
    ranked, notes = apply_priors(candidates, found, relevant, policy)
    return ranked, found, notes
