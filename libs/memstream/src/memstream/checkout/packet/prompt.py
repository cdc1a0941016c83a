"""The Markdown prompt rendering, built from one self-contained line per packet item.

The packet's token budget is measured on this rendering (what an LLM reads), so it is
assembled from parts whose token counts add up: head lines, a title per non-empty section,
one line per item. Lines are joined with newlines and every counter in use splits on
whitespace, so the count of the whole equals the sum of the counts of its lines. Items cite
each other by id (answers name their support ids; facts and snippets show their id and their
ledger ref), so a line never depends on which other items made it into the packet.

Memory is data: every value that comes from memory (text, agent, type, stream, entity
names, summaries, reasons, ids) goes through :mod:`memstream.text.inert`, so a ``<script>``
or a ``[link](javascript:…)`` in a memory reaches a Markdown viewer as the text it was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel

from memstream.records.packet import (
    AnswerCandidate,
    CheckoutPacket,
    EvidenceRow,
    Exclusion,
    FactItem,
    LatentItem,
    MemoryWeave,
    PacketWarning,
    Snippet,
    SynthesisPlan,
)
from memstream.records.projected import SourceRef
from memstream.text.inert import code, inert
from memstream.text.units import fmt_amount

SECTION_TITLES: dict[str, tuple[str, ...]] = {
    "answer_candidates": ("## Answer",),
    "warnings": ("## Warnings",),
    "facts": ("## Facts",),
    "evidence": (
        "## Evidence",
        "| label | value | entity | time | source |",
        "|---|---|---|---|---|",
    ),
    "snippets": ("## Snippets",),
    "latent_context": ("## Latent context (suggestive only: not evidence, never cite as proof)",),
}
NO_ANSWER = "- none from memory"


def cite(ref: SourceRef) -> str:
    """``[tenant/stream#seq hash8]``."""
    return f"[{inert(ref.tenant)}/{inert(ref.stream)}#{ref.seq} {inert(ref.hash[:8])}]"


def _pipes(text: str) -> str:
    """A table cell's text: a pipe inside would end the cell."""
    return text.replace("|", "\\|")


def _cell(text: object) -> str:
    return _pipes(inert(text))


def show_value(value: object, unit: str | None) -> str:
    """A value as read in a packet: an amount with its unit, a list as JSON, else the text."""
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return fmt_amount(float(value), unit)
    shown = json.dumps(value, ensure_ascii=False) if isinstance(value, list) else str(value)
    return f"{shown} {unit}" if unit else shown


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(code(i) for i in ids)


def head_lines(answerability: str, plan: SynthesisPlan) -> list[str]:
    """Answerability, the plan's operation and window, and the query."""
    p = plan
    shape = f"{p.operation} → {p.answer_type}" + (f" ({p.unit})" if p.unit else "")
    parts = [f"**Answerability:** {answerability}", f"**Plan:** {shape}"]
    if p.time_window is not None:
        w = p.time_window
        window = f"{inert(w.start or '…')} – {inert(w.end or '…')} {inert(w.text)}"
        parts.append(f"**Window:** {window}".rstrip())
    if p.as_of:
        parts.append(f"**As of:** {inert(p.as_of)}")
    return [" · ".join(parts), f"**Query:** {inert(p.query)}"]


def _answer(a: AnswerCandidate) -> str:
    line = f"- **{inert(a.answer)}** — confidence {a.confidence:.2f}"
    value = show_value(a.value, a.unit)
    if value and not isinstance(a.value, str) and value != inert(a.answer):
        line += f" · value {inert(value)}"
    if a.support_ids:
        line += f" · support: {_ids(a.support_ids)}"
    if a.excluded_ids:
        line += " · excluded: " + ", ".join(exclusion_text(e) for e in a.excluded_ids)
    return line


def exclusion_text(e: Exclusion) -> str:
    """An excluded id in backticks, its reason in brackets."""
    return f"{code(e.item_id)} ({inert(e.reason)})"


def _fact(f: FactItem) -> str:
    until = f", until {inert(f.valid_to)}" if f.valid_to else ""
    value = show_value(f.value_text, f.unit)
    predicate = inert(f.predicate.replace("_", " "))
    return (
        f"- {code(f.fact_id)} {cite(f.ref)} {inert(f.subject)} · {predicate} · "
        f"{inert(value)} (from {inert(f.valid_from)}{until}, confidence {f.confidence:.2f})"
    )


def _evidence(r: EvidenceRow) -> str:
    return (
        f"| {_cell(r.label)} | {_cell(show_value(r.value, r.unit))} | {_cell(r.entity or '')} "
        f"| {_cell(r.time or '')} | {_pipes(code(r.support_id))} {cite(r.ref)} |"
    )


def _snippet(s: Snippet) -> str:
    caption = s.metadata.get("image_caption")
    shown = f" [image: {inert(caption)}]" if isinstance(caption, str) and caption else ""
    who = f"{inert(s.occurred_at)} {inert(s.agent)} ({inert(s.type)})"
    return f"- {code(s.item_id)} {cite(s.ref)} {who}: {inert(s.text)}{shown}"


def _latent(x: LatentItem) -> str:
    sources = ", ".join(cite(r) for r in x.source_event_refs)
    return (
        f"- {inert(x.artifact_type)}: {inert(x.summary)} "
        f"(confidence {x.confidence:.2f}; derived from {sources or 'nothing'})"
    )


def item_line(obj: BaseModel) -> str:
    """The one line an item takes in the prompt rendering."""
    if isinstance(obj, AnswerCandidate):
        return _answer(obj)
    if isinstance(obj, PacketWarning):
        ids = f" ({_ids(obj.ids)})" if obj.ids else ""
        return f"- **{inert(obj.kind)}**: {inert(obj.message)}{ids}"
    if isinstance(obj, FactItem):
        return _fact(obj)
    if isinstance(obj, EvidenceRow):
        return _evidence(obj)
    if isinstance(obj, Snippet):
        return _snippet(obj)
    if isinstance(obj, LatentItem):
        return _latent(obj)
    if isinstance(obj, Exclusion):
        return exclusion_text(obj)
    raise TypeError(f"no prompt line for {type(obj).__name__}")


def body_lines(packet: CheckoutPacket) -> list[str]:
    """Head and sections: everything the budget counts."""
    lines = head_lines(packet.answerability, packet.synthesis_plan)
    for section, titles in SECTION_TITLES.items():
        items: Sequence[BaseModel] = getattr(packet, section)
        if not items and section != "answer_candidates":
            continue
        lines += ["", *titles]
        lines += [item_line(x) for x in items] if items else [NO_ANSWER]
    if packet.memory_weave is not None:
        lines += weave_lines(packet.memory_weave)
    return lines


def weave_lines(w: MemoryWeave) -> list[str]:
    """The weave as the prompt shows it: what to use it for, then its parts."""
    lines = [
        "",
        f"## Memory weave ({inert(w.purpose_profile)}, phase {inert(w.reasoning_phase)}): "
        f"{inert(w.goal)}",
        "Use for: " + "; ".join(map(inert, w.expected_use)),
        "Never: " + "; ".join(map(inert, w.prohibited_use)),
    ]
    for c in w.inferred_context:
        flags = f"; {', '.join(map(inert, c.flags))}" if c.flags else ""
        lines.append(
            f"- suggestive {code(c.artifact_id)} {inert(c.artifact_type)}: {inert(c.summary)} "
            f"(confidence {c.confidence:.2f}, {inert(c.review_status)}{flags})"
        )
    if w.accepted_evidence:
        lines.append(
            "- evidence: "
            + ", ".join(f"{code(e.item_id)} {cite(e.ref)}" for e in w.accepted_evidence)
        )
    lines += [f"- warning: {inert(x)}" for x in w.warnings]
    return lines


def budget_line(packet: CheckoutPacket) -> str:
    """The closing line: tokens used of allowed, and how many items per section were dropped."""
    b = packet.budget
    line = f"_Budget: {b.used} of {b.max_tokens} tokens"
    if not b.dropped:
        return line + "; nothing dropped._"
    per: dict[str, int] = {}
    for d in b.dropped:
        per[d.section] = per.get(d.section, 0) + 1
    shown = ", ".join(f"{s} {n}" for s, n in per.items())
    return line + f"; dropped {len(b.dropped)} ({shown})._"


def render_markdown(packet: CheckoutPacket) -> str:
    """Compact Markdown for prompts: answer first, then warnings, facts, evidence, snippets,
    latent context (labelled suggestive) and a budget line (the one line not counted)."""
    return "\n".join([*body_lines(packet), "", budget_line(packet)]) + "\n"
