"""Outcome: whether work worked, read from the task records of the pool.

Attempts of one task form one history: records sharing a task id, a task whose start or
outcome names another in its ``retry_of`` metadata, and one whose record was caused by
(``caused_by``) another task's record. An outcome question is answered by the
history's latest outcome, citing the earlier failures and what they report (their cause). A
start is never the answer to whether something worked: a history with starts alone answers
nothing. "What failed?" lists the failures of the histories the question finds, each with
its cause and whether a later attempt succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping

from memstream.checkout.synthesis.context import (
    EPOCH,
    RETRY_OF,
    Attempt,
    Ctx,
    OpResult,
    inside,
    make_answer,
)
from memstream.projection.text import task_line
from memstream.records.packet import (
    Candidate,
    EvidenceRow,
    JsonScalar,
    PacketWarning,
    SynthesisPlan,
)
from memstream.text.words import clip
from memstream.times import parse_ts

MAX_FAILURES = 10


def attempts_of(by_id: Mapping[str, Candidate]) -> dict[str, Attempt]:
    """The task records among the candidates, by item id."""
    out: dict[str, Attempt] = {}
    for item_id, c in by_id.items():
        if c.kind != "event" or (line := task_line(c.type, c.text)) is None:
            continue
        task_id, status, says = line
        retry = c.metadata.get(RETRY_OF)
        row = EvidenceRow(
            row_id=item_id, support_id=item_id, label=clip(c.text, 200), time=c.occurred_at,
            ref=c.ref,
        )  # fmt: skip
        out[item_id] = Attempt(
            item_id=item_id,
            task_id=task_id,
            status=status,
            says=says,
            at=parse_ts(c.occurred_at) or EPOCH,
            retry_of=str(retry) if isinstance(retry, str) and retry else None,
            follows=tuple(c.caused_by),
            row=row,
        )
    return out


def histories(attempts: Mapping[str, Attempt]) -> dict[str, frozenset[str]]:
    """Each task id's history: the task ids linked to it by ``retry_of`` or by a record
    caused by another task's record, itself included."""
    parent: dict[str, str] = {}

    def root(t: str) -> str:
        while parent.setdefault(t, t) != t:
            t = parent[t]
        return t

    for a in attempts.values():
        root(a.task_id)
        linked = [a.retry_of] if a.retry_of is not None else []
        linked += [attempts[i].task_id for i in a.follows if i in attempts]
        for other in linked:
            if root(other) != root(a.task_id):
                parent[root(other)] = root(a.task_id)
    groups: dict[str, set[str]] = {}
    for t in list(parent):
        groups.setdefault(root(t), set()).add(t)
    return {t: frozenset(groups[root(t)]) for t in parent}


def _told(a: Attempt) -> str:
    says = f": {clip(a.says, 120)}" if a.says else ""
    return f"task {a.task_id} {a.status}{says}"


def outcome(plan: SynthesisPlan, rows: list[EvidenceRow], ctx: Ctx) -> OpResult:
    """Whether the task the question finds worked, or what failed (see the module)."""
    found = [ctx.attempts[r.support_id] for r in rows if r.support_id in ctx.attempts]
    if not found:
        return OpResult()
    linked = histories(ctx.attempts)
    if plan.answer_type == "boolean":
        return _worked(linked[found[0].task_id], plan, ctx)
    return _failures(found, linked, plan, ctx)


def _in(history: frozenset[str], ctx: Ctx) -> list[Attempt]:
    return sorted(
        (a for a in ctx.attempts.values() if a.task_id in history),
        key=lambda a: (a.at, a.item_id),
    )


def _worked(history: frozenset[str], plan: SynthesisPlan, ctx: Ctx) -> OpResult:
    """The latest outcome of one history (in the question's window), the earlier failures
    cited after it."""
    attempts = _in(history, ctx)
    outcomes = [a for a in attempts if a.status != "started"]
    window = plan.time_window
    last = next((a for a in reversed(outcomes) if inside(window, a.at)), None)
    if last is None:
        msg = "only the start of this task is recorded: no outcome says how it went"
        if outcomes and window is not None:
            msg = f"no outcome of this task is recorded within {window.text}"
        ids = [a.item_id for a in attempts]
        return OpResult(warnings=[PacketWarning(kind="missing_evidence", message=msg, ids=ids)])
    failed = [a for a in outcomes[: outcomes.index(last)] if a.status != "success"]
    worked = last.status == "success"
    text = f"{'Yes' if worked else 'No'}: {_told(last)}"
    if failed:
        text += f" (after {len(failed)} failed: " + "; ".join(_told(a) for a in failed) + ")"
    answer = make_answer(text, worked, None, [last.row, *(a.row for a in failed)], ctx)
    return OpResult(answers=[answer])


def _failures(
    found: list[Attempt], linked: dict[str, frozenset[str]], plan: SynthesisPlan, ctx: Ctx
) -> OpResult:
    """The failures (in the question's window) of the histories found, each with its cause
    and what came after it."""
    seen: set[frozenset[str]] = set()
    told: list[str] = []
    cited: list[EvidenceRow] = []
    for a in found:
        history = linked[a.task_id]
        if history in seen:
            continue
        seen.add(history)
        attempts = [x for x in _in(history, ctx) if x.status != "started"]
        for i, x in enumerate(attempts):
            if x.status == "success" or not inside(plan.time_window, x.at):
                continue
            later = next((y for y in attempts[i + 1 :] if y.status == "success"), None)
            after = f" (then task {later.task_id} succeeded)" if later is not None else ""
            told.append(_told(x) + after)
            cited += [x.row, *([later.row] if later is not None else [])]
    if not told:
        return OpResult()
    shown = told[:MAX_FAILURES]
    values: list[JsonScalar] = list(shown)
    text = "; ".join(shown) + (
        f" (+{len(told) - len(shown)} more)" if len(told) > len(shown) else ""
    )
    return OpResult(answers=[make_answer(text, values, None, cited, ctx)])
