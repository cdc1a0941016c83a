"""What task outcomes taught, applied to the answer (pure).

Priors re-order the pool (``learning.priors``); this decides the answer. A memory with an open
failure record (tasks relying on it failed, and for this question that outweighs any success)
loses the first answer when another memory that the question retrieves and matches on its own
helped tasks asking this kind of question. The failed memory is not dropped: its answer follows,
its confidence cut by its record, and the first answer names it among its exclusions with the
failed tasks and the feedback. Praise alone never makes an alternative: a positive prior counts
only where the question earned it (``apply_priors`` zeroes it elsewhere) and only from a success
on a question of the same family.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from memstream.records.packet import (
    AnswerCandidate,
    EvidenceRow,
    Exclusion,
    Operation,
    OutcomeRecord,
)

MAX_NAMED = 5  # tasks and feedback ids named in an exclusion's detail
# Operations whose answer is one memory's word among alternatives. Over a set (count, sum,
# list…) the other rows are not alternatives: a record there only cuts the confidence.
CHOICE_OPS: frozenset[Operation] = frozenset({"lookup", "latest_value"})


def demoted_ids(
    operation: Operation, rows: Iterable[EvidenceRow], records: Mapping[str, OutcomeRecord]
) -> set[str]:
    """Support ids among ``rows`` that lose the first answer: an open failure record while a
    proven alternative is among the same rows. Empty when there is no alternative."""
    return losing_ids(operation, (r.support_id for r in rows), records)


def losing_ids(
    operation: Operation, ids: Iterable[str], records: Mapping[str, OutcomeRecord]
) -> set[str]:
    """Among ``ids``: those with an open failure record while a proven alternative is among
    them (the rule of :func:`demoted_ids`, over items rather than evidence rows)."""
    if operation not in CHOICE_OPS:
        return set()
    ids = set(ids)
    failing = {i for i in ids if i in records and records[i].open_failure}
    proven = {i for i in ids - failing if i in records and records[i].proven}
    return failing if proven else set()


def proven_ids(operation: Operation, records: Mapping[str, OutcomeRecord]) -> set[str]:
    """Memories that answer by their record: tasks asking this kind of question, about the
    entities it names, succeeded relying on them, on balance. Only where one memory's word is
    the answer; a set (count, list…) is never extended by a record."""
    if operation not in CHOICE_OPS:
        return set()
    return {item_id for item_id, r in records.items() if r.proven}


def discounted(answer: AnswerCandidate, records: Mapping[str, OutcomeRecord]) -> AnswerCandidate:
    """The answer with its confidence cut by the worst open failure record of its support:
    × (1 + prior) / 2, so at most half with any open record (never 1.0)."""
    priors = [
        records[i].prior for i in answer.support_ids if i in records and records[i].open_failure
    ]
    if not priors:
        return answer
    factor = (1 + min(priors)) / 2
    return answer.model_copy(update={"confidence": round(answer.confidence * factor, 3)})


def _named(items: list[str]) -> str:
    more = " …" if len(items) > MAX_NAMED else ""
    return ", ".join(items[:MAX_NAMED]) + more


def failure_exclusions(
    demoted: Iterable[str], records: Mapping[str, OutcomeRecord], proven: Iterable[str]
) -> list[Exclusion]:
    """Why each demoted memory is not the first answer: its failed tasks, its feedback, and
    the memories that succeeded instead."""
    instead = list(dict.fromkeys(i for i in proven if i in records and records[i].proven))
    out = []
    for item_id in sorted(demoted):
        r = records[item_id]
        ok = [t for i in instead for t in records[i].succeeded_tasks]
        detail = (
            f"{len(r.failed_tasks)} task(s) relying on it failed: {_named(r.failed_tasks)} "
            f"(prior {r.prior:+.2f}; feedback {_named(r.feedback_ids)}); "
            f"{_named(instead)} succeeded instead"
            + (f" in {_named(list(dict.fromkeys(ok)))}" if ok else "")
        )
        out.append(Exclusion(item_id=item_id, reason="failure_record", detail=detail))
    return out


def order_key(answer: AnswerCandidate, demoted: set[str]) -> tuple[bool, float]:
    """Answers resting on a demoted memory after the others, then by confidence."""
    return bool(demoted & set(answer.support_ids)), -answer.confidence
