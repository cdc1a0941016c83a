"""Packet assembly: candidates + synthesis result → one budgeted ``CheckoutPacket`` (pure).

Fit (sizes as measured in ``budget``): items are ranked by section priority (answers,
warnings, facts, evidence, snippets, latent), then by rank inside a section; the packet keeps
the longest ranked prefix that fits, so every dropped item ranks below every kept one.
``budget.dropped`` lists whole items in the order they went (lowest first), then any
shrinking of the top answer or of the plan.
"""

from __future__ import annotations

from pydantic import BaseModel

from memstream.checkout.packet.budget import (
    TokenCounter,
    fit_head,
    item_tokens,
    lines_tokens,
    measure,
    slim_answer,
)
from memstream.checkout.packet.prompt import NO_ANSWER, SECTION_TITLES, head_lines
from memstream.checkout.packet.snippets import focus_stems, snippet_of
from memstream.checkout.synthesis.evidence import is_text_row
from memstream.records.packet import (
    DEFAULT_CONFIDENCE,
    AnswerCandidate,
    Budget,
    Candidate,
    CheckoutPacket,
    Dropped,
    EvidenceRow,
    Exclusion,
    FactItem,
    LatentItem,
    PacketWarning,
    Snippet,
    SynthesisPlan,
    SynthesisResult,
)
from memstream.times import parse_ts

# Exclusions of one reason an answer lists in the packet (the rest: ``budget.dropped``).
LISTED_PER_REASON = 3
SECTIONS = ("answer_candidates", "warnings", "facts", "evidence", "snippets", "latent_context")
Item = tuple[str, str, BaseModel]  # section, item id, the item


def is_current(c: Candidate, as_of: str | None) -> bool:
    """A fact valid at ``as_of``; with no ``as_of``: not ended and not superseded."""
    if as_of is None:
        return c.valid_to is None and c.superseded_by is None
    at = parse_ts(as_of)
    start, end = parse_ts(c.valid_from or c.occurred_at), parse_ts(c.valid_to)
    if at is None:
        return c.valid_to is None and c.superseded_by is None
    return (start is None or start <= at) and (end is None or at < end)


def fact_item(c: Candidate) -> FactItem:
    """A fact candidate as a packet fact (unknown confidence shown as the default)."""
    value_text = c.value_text or (str(c.value) if c.value is not None else c.text)
    return FactItem(
        fact_id=c.item_id,
        subject=c.subject or "",
        predicate=c.predicate or "",
        value=c.value,
        value_text=value_text,
        unit=c.unit,
        valid_from=c.valid_from or c.occurred_at,
        valid_to=c.valid_to,
        confidence=DEFAULT_CONFIDENCE if c.confidence is None else c.confidence,
        ref=c.ref,
    )


def _missing_confidence(
    warnings: list[PacketWarning], facts: list[Candidate], events: list[Candidate]
) -> list[PacketWarning]:
    """``warnings`` plus one for shown items of unknown confidence synthesis did not warn of."""
    warned = {i for w in warnings if w.kind == "default_confidence" for i in w.ids}
    ids = [c.item_id for c in (*facts, *events) if c.confidence is None]
    ids = [i for i in ids if i not in warned]
    if not ids:
        return warnings
    msg = f"confidence unknown, taken as {DEFAULT_CONFIDENCE:.2f}"
    return [*warnings, PacketWarning(kind="default_confidence", message=msg, ids=ids)]


def _without_text_rows(result: SynthesisResult) -> SynthesisResult:
    """``result`` without whole-text rows (each of those events is a snippet)."""
    rows = [r for r in result.evidence if not is_text_row(r)]
    return result.model_copy(update={"evidence": rows})


def _listed_exclusions(
    result: SynthesisResult, count: TokenCounter
) -> tuple[SynthesisResult, list[Dropped]]:
    """Each answer listing at most ``LISTED_PER_REASON`` exclusions of one reason; the rest
    are named in ``budget.dropped``. A question naming a day excludes every other day's
    events as out of window: listed whole, they filled the packet in place of evidence."""
    answers: list[AnswerCandidate] = []
    drops: list[Dropped] = []
    for a in result.answer_candidates:
        seen: dict[str, int] = {}
        kept: list[Exclusion] = []
        for e in a.excluded_ids:
            seen[e.reason] = seen.get(e.reason, 0) + 1
            if seen[e.reason] <= LISTED_PER_REASON:
                kept.append(e)
            else:
                section = "answer_candidates.excluded_ids"
                drops.append(
                    Dropped(section=section, item_id=e.item_id, tokens=item_tokens(e, count))
                )
        answers.append(a.model_copy(update={"excluded_ids": kept}))
    return result.model_copy(update={"answer_candidates": answers}), drops


def _by_rank(
    result: SynthesisResult, candidates: list[Candidate], as_of: str | None
) -> tuple[list[Candidate], list[Candidate]]:
    """Current facts and events, each best first.

    Tiers: the answers' support, then other evidence, then the rest, then what an answer
    excluded; inside a tier by retrieval score, then by pool order.
    """
    support = {i for a in result.answer_candidates for i in a.support_ids}
    in_evidence = {r.support_id for r in result.evidence}
    excluded = {e.item_id for a in result.answer_candidates for e in a.excluded_ids}
    first: dict[str, Candidate] = {}
    for c in candidates:
        first.setdefault(c.item_id, c)
    unique = list(first.values())
    position = {c.item_id: n for n, c in enumerate(unique)}

    def rank(c: Candidate) -> tuple[int, float, int]:
        i = c.item_id
        tier = 0 if i in support else 3 if i in excluded else 1 if i in in_evidence else 2
        return tier, -c.score, position[i]

    shown = [c for c in unique if c.invalidated_by is None]  # excluded, with a warning
    facts = sorted((c for c in shown if c.kind == "fact" and is_current(c, as_of)), key=rank)
    events = sorted((c for c in shown if c.kind == "event"), key=rank)
    return facts, events


def _ranked_items(
    plan: SynthesisPlan,
    result: SynthesisResult,
    facts: list[Candidate],
    events: list[Candidate],
    latent: list[LatentItem],
    max_snippet_chars: int,
) -> list[Item]:
    """Every item in the order the budget keeps them: by section priority, then rank."""
    focus = focus_stems(plan)
    warnings = _missing_confidence(list(result.warnings), facts, events)
    return [
        *(
            ("answer_candidates", f"answer_candidates[{n}]", a)
            for n, a in enumerate(result.answer_candidates)
        ),
        *(("warnings", f"warnings[{n}]", w) for n, w in enumerate(warnings)),
        *(("facts", c.item_id, fact_item(c)) for c in facts),
        *(("evidence", r.row_id, r) for r in result.evidence),
        *(("snippets", c.item_id, snippet_of(c, focus, max_snippet_chars)) for c in events),
        *(("latent_context", x.artifact_id, x) for x in latent),
    ]


def _fitting_prefix(ranked: list[Item], room: int, count: TokenCounter) -> tuple[int, list[int]]:
    """How many of the ranked items fit in ``room``, and each item's own cost.

    A section's title is paid by its first item; the answer section's title is not, as it
    was reserved with the head (the section is shown even when empty).
    """
    costs = [item_tokens(obj, count) for _, _, obj in ranked]
    titles = {s: lines_tokens(t, count) for s, t in SECTION_TITLES.items()}
    titles["answer_candidates"] = 0
    kept, used = 0, 0
    while kept < len(ranked):
        section = ranked[kept][0]
        opens = kept == 0 or ranked[kept - 1][0] != section
        cost = costs[kept] + (titles[section] if opens else 0)
        if used + cost > room:
            break
        used += cost
        kept += 1
    return kept, costs


def _fitted(
    ranked: list[Item], room: int, count_tokens: TokenCounter
) -> tuple[list[BaseModel], list[Dropped]]:
    """The items of ``ranked`` that fit in ``room`` tokens, and what was dropped (or cut)."""
    kept, costs = _fitting_prefix(ranked, room, count_tokens)
    shrink: list[Dropped] = []
    top = ranked[0][2] if ranked else None
    # An answer too long for the budget is cut rather than dropped: the answer comes first.
    if kept == 0 and isinstance(top, AnswerCandidate):
        slim = slim_answer(top, room, count_tokens)
        if slim is not None:
            ranked[0] = (ranked[0][0], ranked[0][1], slim[0])
            shrink, kept = slim[1], 1
    dropped = [
        Dropped(section=s, item_id=i, tokens=costs[n])
        for n, (s, i, _) in reversed(list(enumerate(ranked)))
        if n >= kept
    ]
    return [obj for _, _, obj in ranked[:kept]], [*dropped, *shrink]


def assemble_packet(
    *,
    packet_id: str,
    tenant: str,
    as_of: str | None,
    plan: SynthesisPlan,
    result: SynthesisResult,
    candidates: list[Candidate],
    latent: list[LatentItem],
    max_tokens: int,
    count_tokens: TokenCounter,
    max_snippet_chars: int = 400,
    text_rows: bool = False,
) -> CheckoutPacket:
    """Order, trim and budget everything into a packet with ``budget.used <= max_tokens``.

    Without ``text_rows`` an event's text is shown once, as a snippet ranked by retrieval
    (the answers' support first): the evidence section keeps the rows carrying a value (a
    number, a fact), not a second copy of every relevant event's text.
    """
    if not text_rows:
        result = _without_text_rows(result)
    facts, events = _by_rank(result, candidates, as_of)
    result, unlisted = _listed_exclusions(result, count_tokens)
    ranked = _ranked_items(plan, result, facts, events, latent, max_snippet_chars)
    plan, head_drops = fit_head(result.answerability, plan, max_tokens, count_tokens)
    room = max_tokens - lines_tokens(head_lines(result.answerability, plan), count_tokens)
    room -= lines_tokens([*SECTION_TITLES["answer_candidates"], NO_ANSWER], count_tokens)
    kept_items, dropped = _fitted(ranked, room, count_tokens)
    packet = CheckoutPacket(
        answerability=result.answerability,
        synthesis_plan=plan,
        answer_candidates=[x for x in kept_items if isinstance(x, AnswerCandidate)],
        warnings=[x for x in kept_items if isinstance(x, PacketWarning)],
        facts=[x for x in kept_items if isinstance(x, FactItem)],
        evidence=[x for x in kept_items if isinstance(x, EvidenceRow)],
        snippets=[x for x in kept_items if isinstance(x, Snippet)],
        latent_context=[x for x in kept_items if isinstance(x, LatentItem)],
        budget=Budget(max_tokens=max_tokens, used=0, dropped=[*dropped, *unlisted, *head_drops]),
        packet_id=packet_id,
        tenant=tenant,
        as_of=as_of,
    )
    used_total = measure(packet, count_tokens)
    budget = packet.budget.model_copy(update={"used": used_total})
    return packet.model_copy(update={"budget": budget})
