"""Packet assembly: candidates + synthesis result → one budgeted ``CheckoutPacket`` (pure).

Token measure (used for ``budget.used``, ``budget.dropped`` and the fit): the tokens of the
Markdown prompt rendering (``prompt.body_lines``), i.e. what an LLM is given: the head
(answerability, plan, query), a title per non-empty section and one line per item. The
closing budget line is the only part not counted. The JSON form carries the same items with
full ledger refs and scores for programs, and is larger. ``measure(packet, count)``
recomputes it.

Fit: items are ranked by section priority (answers, warnings, facts, evidence, snippets,
latent), then by rank inside a section; the packet keeps the longest ranked prefix that fits,
so every dropped item ranks below every kept one. ``budget.dropped`` lists whole items in the
order they went (lowest first), then any shrinking of the top answer or of the plan.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from pydantic import BaseModel

from memstream.checkout.model import (
    AnswerCandidate,
    Budget,
    Candidate,
    CheckoutPacket,
    Dropped,
    EvidenceRow,
    FactItem,
    LatentItem,
    PacketWarning,
    Snippet,
    SynthesisPlan,
    SynthesisResult,
)
from memstream.checkout.prompt import (
    NO_ANSWER,
    SECTION_TITLES,
    body_lines,
    head_lines,
    item_line,
)
from memstream.text.words import content_stems, stem
from memstream.times import parse_ts

TokenCounter = Callable[[str], int]
SECTIONS = ("answer_candidates", "warnings", "facts", "evidence", "snippets", "latent_context")
DEFAULT_CONFIDENCE = 0.5
CUT = "…"
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")
_WORD = re.compile(r"\w+(?:['’]\w+)?")
_MAX_SENTENCES = 24  # sentences considered when trimming one long text


# --- selection ----------------------------------------------------------------------------


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


def focus_stems(plan: SynthesisPlan) -> frozenset[str]:
    """Stems a snippet is trimmed around: plan terms and entities, else the query words."""
    named = content_stems(" ".join([*plan.terms, *plan.entities]))
    return named or content_stems(plan.query)


def snippet_of(c: Candidate, focus: frozenset[str], max_chars: int) -> Snippet:
    """The candidate's text trimmed around the focus; ``metadata['confidence']`` carries
    the candidate's confidence (absent when unknown)."""
    meta = {k: v for k, v in c.metadata.items() if v is not None and k != "confidence"}
    if c.confidence is not None:
        meta["confidence"] = c.confidence
    return Snippet(
        item_id=c.item_id,
        text=trim_text(c.text, focus, max_chars),
        ref=c.ref,
        type=c.type,
        agent=c.agent,
        occurred_at=c.occurred_at,
        score=c.score,
        metadata=meta,
    )


# --- trimming -----------------------------------------------------------------------------


def _sentences(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        spans.append((start, m.end()))
        start = m.end() + 1
    if start < len(text):
        spans.append((start, len(text)))
    return [(a, b) for a, b in spans if b > a]


def _hits(text: str, focus: frozenset[str]) -> list[tuple[int, int]]:
    """(position, weight) of focus words (2) and numbers (1)."""
    out = []
    for m in _WORD.finditer(text):
        token = m.group()
        if stem(token.lower()) in focus:
            out.append((m.start(), 2))
        elif any(ch.isdigit() for ch in token):
            out.append((m.start(), 1))
    return out


def _join(text: str, spans: list[tuple[int, int]], chosen: list[int]) -> str:
    parts: list[str] = []
    for n, i in enumerate(chosen):
        if (n == 0 and i > 0) or (n > 0 and i != chosen[n - 1] + 1):
            parts.append(CUT)
        parts.append(text[spans[i][0] : spans[i][1]])
    if chosen[-1] < len(spans) - 1:
        parts.append(CUT)
    return " ".join(parts)


def _window(text: str, at: int, limit: int) -> str:
    """``limit`` characters around position ``at``, cut at word boundaries, marked with …."""
    room = limit - 4
    start = max(0, min(at - room // 3, len(text) - room))
    end = min(len(text), start + room)
    if start > 0 and " " in text[start:end]:
        start = text.index(" ", start) + 1
    if end < len(text) and " " in text[start:end]:
        end = text.rindex(" ", start, end)
    body = text[start:end].strip()
    return ("… " if start > 0 else "") + body + (" …" if end < len(text) else "")


def trim_text(text: str, focus: frozenset[str], limit: int) -> str:
    """Whitespace-collapsed ``text`` in at most ``limit`` characters.

    Keeps the sentences with the most focus words (then numbers), in text order; a single
    sentence too long is cut around its first hit; text without hits keeps its beginning.
    Every cut is marked with ``…``.
    """
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    if limit < 12:
        return flat[: max(limit - 1, 0)] + CUT if limit > 0 else ""
    spans = _sentences(flat)
    hits = _hits(flat, focus)
    scores = [sum(w for p, w in hits if a <= p < b) for a, b in spans]
    if not any(scores):
        return _window(flat, 0, limit)
    ranked = sorted((i for i in range(len(spans)) if scores[i]), key=lambda i: (-scores[i], i))
    chosen: list[int] = []
    for i in ranked[:_MAX_SENTENCES]:
        trial = sorted([*chosen, i])
        if len(_join(flat, spans, trial)) <= limit:
            chosen = trial
    if chosen:
        return _join(flat, spans, chosen)
    a, b = spans[ranked[0]]
    return _window(flat, next(p for p, _ in hits if a <= p < b), limit)


# --- budgeting ----------------------------------------------------------------------------


def item_tokens(obj: BaseModel, count_tokens: TokenCounter) -> int:
    """Tokens of one item's prompt line (``prompt.item_line``)."""
    return count_tokens(item_line(obj))


def lines_tokens(lines: Sequence[str], count_tokens: TokenCounter) -> int:
    return sum(count_tokens(line) for line in lines if line)


def measure(packet: CheckoutPacket, count_tokens: TokenCounter) -> int:
    """The packet's size under the budget measure (see the module docstring)."""
    return lines_tokens(body_lines(packet), count_tokens)


def _shorten(text: str, keep: int) -> str:
    return text if keep >= len(text) else text[:keep].rstrip() + CUT


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


def _fit_head(
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
        return base.model_copy(update={"query": _shorten(base.query, k)})

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


def _slim_answer(
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
        return full.model_copy(update={"answer": _shorten(full.answer, k)})

    keep = _largest_fit(len(full.answer) - 1, lambda k: item_tokens(cut(k), count) <= room)
    if keep is None:
        return None
    saved = item_tokens(full, count) - item_tokens(cut(keep), count)
    drops.append(
        Dropped(section="answer_candidates.answer", item_id="answer_candidates[0]", tokens=saved)
    )
    return cut(keep), drops


# --- assembly -----------------------------------------------------------------------------


def _missing_confidence(
    warnings: list[PacketWarning], facts: list[Candidate], events: list[Candidate]
) -> list[PacketWarning]:
    warned = {i for w in warnings if w.kind == "default_confidence" for i in w.ids}
    ids = [c.item_id for c in (*facts, *events) if c.confidence is None]
    ids = [i for i in ids if i not in warned]
    if not ids:
        return warnings
    msg = f"confidence unknown, taken as {DEFAULT_CONFIDENCE:.2f}"
    return [*warnings, PacketWarning(kind="default_confidence", message=msg, ids=ids)]


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
) -> CheckoutPacket:
    """Order, trim and budget everything into a packet with ``budget.used <= max_tokens``."""
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

    facts = sorted((c for c in unique if c.kind == "fact" and is_current(c, as_of)), key=rank)
    events = sorted((c for c in unique if c.kind == "event"), key=rank)
    focus = focus_stems(plan)
    warnings = _missing_confidence(list(result.warnings), facts, events)
    ranked: list[tuple[str, str, BaseModel]] = [
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
    plan, head_drops = _fit_head(result.answerability, plan, max_tokens, count_tokens)
    room = max_tokens - lines_tokens(head_lines(result.answerability, plan), count_tokens)
    room -= lines_tokens([*SECTION_TITLES["answer_candidates"], NO_ANSWER], count_tokens)
    costs = [item_tokens(obj, count_tokens) for _, _, obj in ranked]
    titles = {s: lines_tokens(t, count_tokens) for s, t in SECTION_TITLES.items()}
    titles["answer_candidates"] = 0  # reserved with the head
    kept, used = 0, 0
    while kept < len(ranked):
        section = ranked[kept][0]
        opens = kept == 0 or ranked[kept - 1][0] != section
        cost = costs[kept] + (titles[section] if opens else 0)
        if used + cost > room:
            break
        used += cost
        kept += 1
    shrink: list[Dropped] = []
    top = ranked[0][2] if ranked else None
    if kept == 0 and isinstance(top, AnswerCandidate):
        slim = _slim_answer(top, room, count_tokens)
        if slim is not None:
            ranked[0] = (ranked[0][0], ranked[0][1], slim[0])
            shrink, kept = slim[1], 1
    dropped = [
        Dropped(section=s, item_id=i, tokens=costs[n])
        for n, (s, i, _) in reversed(list(enumerate(ranked)))
        if n >= kept
    ]
    kept_items = [obj for _, _, obj in ranked[:kept]]
    packet = CheckoutPacket(
        answerability=result.answerability,
        synthesis_plan=plan,
        answer_candidates=[x for x in kept_items if isinstance(x, AnswerCandidate)],
        warnings=[x for x in kept_items if isinstance(x, PacketWarning)],
        facts=[x for x in kept_items if isinstance(x, FactItem)],
        evidence=[x for x in kept_items if isinstance(x, EvidenceRow)],
        snippets=[x for x in kept_items if isinstance(x, Snippet)],
        latent_context=[x for x in kept_items if isinstance(x, LatentItem)],
        budget=Budget(max_tokens=max_tokens, used=0, dropped=[*dropped, *shrink, *head_drops]),
        packet_id=packet_id,
        tenant=tenant,
        as_of=as_of,
    )
    used_total = measure(packet, count_tokens)
    budget = packet.budget.model_copy(update={"used": used_total})
    return packet.model_copy(update={"budget": budget})
