"""The Markdown prompt rendering, built from one self-contained line per packet item.

The packet's token budget is measured on this rendering (what an LLM reads), so it is
assembled from parts whose token counts add up: head lines, a title per non-empty section,
one line per item. Lines are joined with newlines and every counter in use splits on
whitespace, so the count of the whole equals the sum of the counts of its lines. Items cite
each other by id (answers name their support ids; facts and snippets show their id and their
ledger ref), so a line never depends on which other items made it into the packet.

Memory text is data: every text that comes from memory goes through ``flat``, which escapes
``&``, ``<`` and ``>``, so a ``<script>`` in a memory reaches a Markdown viewer as text, never
as raw HTML. The escapes add no whitespace, so token counts per line are unchanged.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

from pydantic import BaseModel

from memstream.checkout.model import (
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
from memstream.projection.model import SourceRef
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
    return f"[{ref.tenant}/{ref.stream}#{ref.seq} {ref.hash[:8]}]"


def flat(text: object) -> str:
    """``text`` on one line, whitespace collapsed, HTML escaped (``&``, ``<``, ``>``)."""
    return html.escape(" ".join(str(text).split()), quote=False)


def _cell(text: object) -> str:
    return flat(text).replace("|", "\\|")


def show_value(value: object, unit: str | None) -> str:
    """A value as read in a packet: an amount with its unit, a list as JSON, else the text."""
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return fmt_amount(float(value), unit)
    shown = json.dumps(value, ensure_ascii=False) if isinstance(value, list) else str(value)
    return f"{shown} {unit}" if unit else shown


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(f"`{i}`" for i in ids)


def head_lines(answerability: str, plan: SynthesisPlan) -> list[str]:
    """Answerability, the plan's operation and window, and the query."""
    p = plan
    shape = f"{p.operation} → {p.answer_type}" + (f" ({p.unit})" if p.unit else "")
    parts = [f"**Answerability:** {answerability}", f"**Plan:** {shape}"]
    if p.time_window is not None:
        w = p.time_window
        parts.append(f"**Window:** {w.start or '…'} – {w.end or '…'} {flat(w.text)}".rstrip())
    if p.as_of:
        parts.append(f"**As of:** {p.as_of}")
    return [" · ".join(parts), f"**Query:** {flat(p.query)}"]


def _answer(a: AnswerCandidate) -> str:
    line = f"- **{flat(a.answer)}** — confidence {a.confidence:.2f}"
    value = show_value(a.value, a.unit)
    if value and not isinstance(a.value, str) and value != flat(a.answer):
        line += f" · value {flat(value)}"
    if a.support_ids:
        line += f" · support: {_ids(a.support_ids)}"
    if a.excluded_ids:
        line += " · excluded: " + ", ".join(exclusion_text(e) for e in a.excluded_ids)
    return line


def exclusion_text(e: Exclusion) -> str:
    """An excluded id in backticks, its reason in brackets."""
    return f"`{e.item_id}` ({flat(e.reason)})"


def _fact(f: FactItem) -> str:
    until = f", until {f.valid_to}" if f.valid_to else ""
    value = show_value(f.value_text, f.unit)
    predicate = flat(f.predicate.replace("_", " "))
    return (
        f"- `{f.fact_id}` {cite(f.ref)} {flat(f.subject)} · {predicate} · "
        f"{flat(value)} (from {f.valid_from}{until}, confidence {f.confidence:.2f})"
    )


def _evidence(r: EvidenceRow) -> str:
    return (
        f"| {_cell(r.label)} | {_cell(show_value(r.value, r.unit))} | {_cell(r.entity or '')} "
        f"| {_cell(r.time or '')} | `{r.support_id}` {cite(r.ref)} |"
    )


def _snippet(s: Snippet) -> str:
    caption = s.metadata.get("image_caption")
    shown = f" [image: {flat(caption)}]" if isinstance(caption, str) and caption else ""
    return (
        f"- `{s.item_id}` {cite(s.ref)} {s.occurred_at} {s.agent} ({s.type}): {flat(s.text)}{shown}"
    )


def _latent(x: LatentItem) -> str:
    sources = ", ".join(cite(r) for r in x.source_event_refs)
    return (
        f"- {x.artifact_type}: {flat(x.summary)} "
        f"(confidence {x.confidence:.2f}; derived from {sources or 'nothing'})"
    )


def item_line(obj: BaseModel) -> str:
    """The one line an item takes in the prompt rendering."""
    if isinstance(obj, AnswerCandidate):
        return _answer(obj)
    if isinstance(obj, PacketWarning):
        return f"- **{obj.kind}**: {flat(obj.message)}" + (f" ({_ids(obj.ids)})" if obj.ids else "")
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
        f"## Memory weave ({w.purpose_profile}, phase {w.reasoning_phase}): {flat(w.goal)}",
        "Use for: " + "; ".join(w.expected_use),
        "Never: " + "; ".join(w.prohibited_use),
    ]
    for c in w.inferred_context:
        flags = f"; {', '.join(c.flags)}" if c.flags else ""
        lines.append(
            f"- suggestive `{c.artifact_id}` {c.artifact_type}: {flat(c.summary)} "
            f"(confidence {c.confidence:.2f}, {c.review_status}{flags})"
        )
    if w.accepted_evidence:
        lines.append(
            "- evidence: " + ", ".join(f"`{e.item_id}` {cite(e.ref)}" for e in w.accepted_evidence)
        )
    lines += [f"- warning: {flat(x)}" for x in w.warnings]
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
