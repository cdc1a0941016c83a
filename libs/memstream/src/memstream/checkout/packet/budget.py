"""The token budget: what a packet costs, and shrinking the head or the top answer to fit.

Token measure (used for ``budget.used``, ``budget.dropped`` and the fit): the tokens of the
Markdown prompt rendering (``prompt.body_lines``), i.e. what an LLM is given: the head
(answerability, plan, query), a title per non-empty section and one line per item. The
closing budget line is the only part not counted. The JSON form carries the same items with
full ledger refs and scores for programs, and is larger. ``measure(packet, count)``
recomputes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel

from memstream.checkout.packet.prompt import (
    NO_ANSWER,
    SECTION_TITLES,
    body_lines,
    head_lines,
    item_line,
    weave_lines,
)
from memstream.checkout.packet.snippets import shorten
from memstream.records.packet import (
    AnswerCandidate,
    CheckoutPacket,
    Dropped,
    MemoryWeave,
    SynthesisPlan,
)

TokenCounter = Callable[[str], int]


def item_tokens(obj: BaseModel, count_tokens: TokenCounter) -> int:
    """Tokens of one item's prompt line (``prompt.item_line``)."""
    return count_tokens(item_line(obj))


def lines_tokens(lines: Sequence[str], count_tokens: TokenCounter) -> int:
    """Tokens of prompt lines (blank separator lines cost nothing)."""
    return sum(count_tokens(line) for line in lines if line)


def weave_tokens(weave: MemoryWeave, count_tokens: TokenCounter) -> int:
    """The tokens ``weave`` takes in the prompt, rendered as the packet renders it."""
    return count_tokens("\n".join(weave_lines(weave)))


def measure(packet: CheckoutPacket, count_tokens: TokenCounter) -> int:
    """The packet's size under the budget measure (see the module docstring)."""
    return lines_tokens(body_lines(packet), count_tokens)


def _largest_fit(n: int, fits: Callable[[int], bool]) -> int | None:
    """Largest ``k`` in 0..n with ``fits(k)`` (assuming monotone), None if not even 0."""
    if not fits(0):
        return None
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def _without(plan: SynthesisPlan, name: str) -> SynthesisPlan:
    """``plan`` with one optional part removed (``time_window.text`` blanks the label)."""
    tw = plan.time_window
    if name == "time_window.text":
        text_free = tw.model_copy(update={"text": ""}) if tw is not None else None
        return plan.model_copy(update={"time_window": text_free})
    empty: list[str] | None = [] if name in ("terms", "entities") else None
    return plan.model_copy(update={name: empty})


def fit_head(
    answerability: str, plan: SynthesisPlan, max_tokens: int, count: TokenCounter
) -> tuple[SynthesisPlan, list[Dropped]]:
    """The plan, shrunk only if the head alone is over budget.

    The head includes the answer section's title and its "none" line (a reservation: that
    line goes when an answer is kept). Order: the window's label, the plan's as_of; then the
    query is cut; then the time window and the unit go. Parts the rendering does not show
    (terms, entities) cost nothing and stay. Each step is recorded in ``dropped``.
    """
    frame = lines_tokens([*SECTION_TITLES["answer_candidates"], NO_ANSWER], count)
    drops: list[Dropped] = []

    def cost(p: SynthesisPlan) -> int:
        return frame + lines_tokens(head_lines(answerability, p), count)

    def step(p: SynthesisPlan, name: str, slim: SynthesisPlan) -> SynthesisPlan:
        if (saved := cost(p) - cost(slim)) <= 0:
            return p
        drops.append(Dropped(section="synthesis_plan", item_id=name, tokens=saved))
        return slim

    for name in ("time_window.text", "as_of"):
        if cost(plan) <= max_tokens:
            return plan, drops
        plan = step(plan, name, _without(plan, name))
    if cost(plan) <= max_tokens:
        return plan, drops
    base = plan

    def cut(k: int) -> SynthesisPlan:
        return base.model_copy(update={"query": shorten(base.query, k)})

    keep = _largest_fit(len(base.query) - 1, lambda k: cost(cut(k)) <= max_tokens)
    plan = step(base, "query", cut(0 if keep is None else keep))
    for name in ("time_window", "unit"):
        if cost(plan) <= max_tokens:
            return plan, drops
        plan = step(plan, name, _without(plan, name))
    if cost(plan) > max_tokens:
        raise ValueError(
            f"max_tokens={max_tokens} is below the smallest packet head ({cost(plan)})"
        )
    return plan, drops


def slim_answer(
    a: AnswerCandidate, room: int, count: TokenCounter
) -> tuple[AnswerCandidate, list[Dropped]] | None:
    """The top answer made to fit ``room``: exclusions go, then the answer text is cut."""
    drops: list[Dropped] = []
    if a.excluded_ids:
        drops = [
            Dropped(
                section="answer_candidates.excluded_ids",
                item_id=e.item_id,
                tokens=item_tokens(e, count),
            )
            for e in a.excluded_ids
        ]
        a = a.model_copy(update={"excluded_ids": []})
        if item_tokens(a, count) <= room:
            return a, drops
    full = a

    def cut(k: int) -> AnswerCandidate:
        return full.model_copy(update={"answer": shorten(full.answer, k)})

    keep = _largest_fit(len(full.answer) - 1, lambda k: item_tokens(cut(k), count) <= room)
    if keep is None:
        return None
    saved = item_tokens(full, count) - item_tokens(cut(keep), count)
    drops.append(
        Dropped(section="answer_candidates.answer", item_id="answer_candidates[0]", tokens=saved)
    )
    return cut(keep), drops
