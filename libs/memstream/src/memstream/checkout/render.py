"""Packet renderings: JSON, Markdown for prompts, and the "Gathered Context" Markdown."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from memstream.checkout.model import CheckoutPacket, Snippet
from memstream.checkout.words import fmt_amount, parse_ts
from memstream.projection.model import SourceRef

__all__ = [
    "CONTENT_FIELDS",
    "FIELD_ORDER",
    "cite",
    "item_json",
    "render_gathered",
    "render_json",
    "render_markdown",
]

CONTENT_FIELDS = (
    "answerability",
    "synthesis_plan",
    "answer_candidates",
    "warnings",
    "facts",
    "evidence",
    "snippets",
    "latent_context",
)
FIELD_ORDER = (*CONTENT_FIELDS, "budget", "packet_id", "tenant", "as_of", "meta")


def _dump(obj: BaseModel | str) -> Any:
    return obj.model_dump(mode="json", exclude_none=True) if isinstance(obj, BaseModel) else obj


def item_json(obj: BaseModel | str) -> str:
    """One part of the packet as compact JSON, ``None`` fields left out (the budget unit)."""
    return json.dumps(_dump(obj), ensure_ascii=False, separators=(",", ":"))


def render_json(packet: CheckoutPacket) -> str:
    """The packet as compact JSON, fields in DESIGN order; items as in ``item_json``."""
    doc: dict[str, Any] = {
        "answerability": packet.answerability,
        "synthesis_plan": _dump(packet.synthesis_plan),
    }
    for name in CONTENT_FIELDS[2:]:
        doc[name] = [_dump(x) for x in getattr(packet, name)]
    doc["budget"] = packet.budget.model_dump(mode="json")
    doc.update(packet_id=packet.packet_id, tenant=packet.tenant, as_of=packet.as_of)
    doc["meta"] = packet.meta
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str)


def cite(ref: SourceRef) -> str:
    """``[tenant/stream#seq hash8]``."""
    return f"[{ref.tenant}/{ref.stream}#{ref.seq} {ref.hash[:8]}]"


def _flat(text: object) -> str:
    return " ".join(str(text).split())


def _cell(text: object) -> str:
    return _flat(text).replace("|", "\\|")


def _value(value: object, unit: str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return fmt_amount(float(value), unit)
    shown = json.dumps(value, ensure_ascii=False) if isinstance(value, list) else str(value)
    return f"{shown} {unit}" if unit else shown


def _refs(packet: CheckoutPacket) -> dict[str, SourceRef]:
    out: dict[str, SourceRef] = {}
    for f in packet.facts:
        out.setdefault(f.fact_id, f.ref)
    for r in packet.evidence:
        out.setdefault(r.support_id, r.ref)
    for s in packet.snippets:
        out.setdefault(s.item_id, s.ref)
    return out


def _ids(ids: list[str], refs: dict[str, SourceRef]) -> str:
    return ", ".join(cite(refs[i]) if i in refs else f"`{i}`" for i in ids)


def _head(packet: CheckoutPacket) -> list[str]:
    p = packet.synthesis_plan
    plan = f"{p.operation} → {p.answer_type}" + (f" ({p.unit})" if p.unit else "")
    parts = [f"**Answerability:** {packet.answerability}", f"**Plan:** {plan}"]
    if p.time_window is not None:
        w = p.time_window
        parts.append(f"**Window:** {w.start or '…'} – {w.end or '…'} {w.text}".rstrip())
    if packet.as_of:
        parts.append(f"**As of:** {packet.as_of}")
    return [" · ".join(parts), f"**Query:** {_flat(p.query)}"]


def _answers(packet: CheckoutPacket, refs: dict[str, SourceRef]) -> list[str]:
    lines = ["", "## Answer"]
    if not packet.answer_candidates:
        return [*lines, "- none from memory"]
    for n, a in enumerate(packet.answer_candidates, 1):
        line = f"{n}. **{_flat(a.answer)}** — confidence {a.confidence:.2f}"
        value = _value(a.value, a.unit)
        if value and not isinstance(a.value, str) and value != _flat(a.answer):
            line += f" · value {value}"
        if a.support_ids:
            line += f" · support: {_ids(a.support_ids, refs)}"
        if a.excluded_ids:
            excl = ", ".join(f"`{e.item_id}` ({e.reason})" for e in a.excluded_ids)
            line += f" · excluded: {excl}"
        lines.append(line)
    return lines


def _body(packet: CheckoutPacket, refs: dict[str, SourceRef]) -> list[str]:
    out: list[str] = []
    if packet.warnings:
        out += ["", "## Warnings"]
        out += [
            f"- **{w.kind}**: {_flat(w.message)}" + (f" ({_ids(w.ids, refs)})" if w.ids else "")
            for w in packet.warnings
        ]
    if packet.facts:
        out += ["", "## Facts"]
        for f in packet.facts:
            until = f", until {f.valid_to}" if f.valid_to else ""
            value = _value(f.value_text, f.unit)
            out.append(
                f"- {f.subject} · {f.predicate.replace('_', ' ')} · {_flat(value)} "
                f"(from {f.valid_from}{until}, confidence {f.confidence:.2f}) {cite(f.ref)}"
            )
    if packet.evidence:
        out += [
            "",
            "## Evidence",
            "| label | value | entity | time | source |",
            "|---|---|---|---|---|",
        ]
        out += [
            f"| {_cell(r.label)} | {_cell(_value(r.value, r.unit))} | {_cell(r.entity or '')} "
            f"| {_cell(r.time or '')} | {cite(r.ref)} |"
            for r in packet.evidence
        ]
    if packet.snippets:
        out += ["", "## Snippets"]
        out += [
            f"- {cite(s.ref)} {s.occurred_at} {s.agent} ({s.type}): {_flat(s.text)}"
            for s in packet.snippets
        ]
    if packet.latent_context:
        out += ["", "## Latent context (suggestive only: not evidence, never cite as proof)"]
        for x in packet.latent_context:
            sources = ", ".join(cite(r) for r in x.source_event_refs)
            out.append(
                f"- {x.artifact_type}: {_flat(x.summary)} "
                f"(confidence {x.confidence:.2f}; derived from {sources or 'nothing'})"
            )
    return out


def _budget_line(packet: CheckoutPacket) -> str:
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
    latent context (labelled suggestive) and a budget line."""
    refs = _refs(packet)
    lines = [
        *_head(packet),
        *_answers(packet, refs),
        *_body(packet, refs),
        "",
        _budget_line(packet),
    ]
    return "\n".join(lines) + "\n"


# --- "Gathered Context" (seed 003 §4-§6) ------------------------------------------------------

CONFIDENCE_FLOOR = 0.30  # nodes below are EXPIRED and left out
DEFAULT_CONFIDENCE = 0.50  # a node without confidence counts as MEDIUM, with a warning line
RAW_QUERY = "§0.raw_query"
_SECTIONS = (
    ("Session Preferences", "preference"),
    ("Relevant Prior Turns", "turn_summary"),
    ("Cached Research", "research_cache"),
    ("Visit Data", "fact"),
    ("Visit Data", "visit_record"),
)


@dataclass(frozen=True)
class _Node:
    node_id: str
    source_type: str
    confidence: float | None  # None = unknown
    time: str
    ref: SourceRef
    line: str

    @property
    def effective(self) -> float:
        return DEFAULT_CONFIDENCE if self.confidence is None else self.confidence


def _level(confidence: float) -> str:
    return "high" if confidence >= 0.8 else "medium" if confidence >= 0.5 else "low"


def _provenance(ref: SourceRef) -> str:
    return cite(ref)[1:-1]


def _snippet_confidence(s: Snippet) -> float | None:
    v = s.metadata.get("confidence")
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _snippet_type(s: Snippet) -> str:
    if s.type == "preference.set":
        return "preference"
    return "research_cache" if s.type.startswith("tool.") else "turn_summary"


def _nodes(packet: CheckoutPacket) -> list[_Node]:
    """Every packet item as a memory node (latent context is suggestive and stays out)."""
    unknown = {i for w in packet.warnings if w.kind == "default_confidence" for i in w.ids}
    nodes: list[_Node] = []
    conf: dict[str, float | None] = {}
    for f in packet.facts:
        c = None if f.fact_id in unknown else f.confidence
        conf[f.fact_id] = c
        key = f.predicate.removeprefix("prefers:")
        pref = f.predicate.startswith("prefers:")
        value = _flat(_value(f.value_text, f.unit))
        level = f"{_level(DEFAULT_CONFIDENCE if c is None else c)} confidence"
        line = (
            f"- {key.replace('_', ' ')}: {value} ({f.subject}; {level}) {cite(f.ref)}"
            if pref
            else f"- {f.subject} {f.predicate.replace('_', ' ')}: {value} "
            f"(valid from {f.valid_from}; {level}) {cite(f.ref)}"
        )
        kind = "preference" if pref else "fact"
        nodes.append(_Node(f.fact_id, kind, c, f.valid_from, f.ref, line))
    fact_events = {f.ref.event_id for f in packet.facts}
    for s in packet.snippets:
        c = None if s.item_id in unknown else _snippet_confidence(s)
        conf[s.item_id] = c
        if s.item_id in fact_events:
            continue  # the fact stands for its source event
        line = f"- {s.occurred_at} {s.agent} ({s.type}): {_flat(s.text)} {cite(s.ref)}"
        nodes.append(_Node(s.item_id, _snippet_type(s), c, s.occurred_at, s.ref, line))
    facts = {f.fact_id for f in packet.facts}
    for r in packet.evidence:
        if r.support_id in facts:
            continue  # shown as the fact itself
        c = None if r.support_id in unknown else conf.get(r.support_id)
        value = _value(r.value, r.unit)
        what = f"{_flat(r.label)}" + (f" = {value}" if value else "")
        line = f"- {r.entity or 'unknown'}: {what} ({r.time or 'time unknown'}) {cite(r.ref)}"
        nodes.append(_Node(r.support_id, "visit_record", c, r.time or "", r.ref, line))
    return nodes


def confidence_avg(nodes: list[_Node]) -> float:
    """Recency-weighted mean (weights 1..n, oldest to newest); plain mean without times."""
    times = [parse_ts(n.time) for n in nodes]
    if not nodes:
        return 0.0
    if any(t is None for t in times):
        return round(sum(n.effective for n in nodes) / len(nodes), 2)
    order = sorted(range(len(nodes)), key=lambda i: (times[i], i))
    weights = {i: rank for rank, i in enumerate(order, 1)}
    total = sum(nodes[i].effective * w for i, w in weights.items())
    return round(total / sum(weights.values()), 2)


def _meta(source_type: str, ids: list[str], provenance: list[str], avg: float | None) -> list[str]:
    lines = ["```yaml", "_meta:", f"  source_type: {source_type}"]
    lines.append(f"  node_ids: {json.dumps(list(dict.fromkeys(ids)), ensure_ascii=False)}")
    if avg is not None:
        lines.append(f"  confidence_avg: {avg:.2f}")
    prov = json.dumps(list(dict.fromkeys(provenance)), ensure_ascii=False)
    return [*lines, f"  provenance: {prov}", "```"]


def _section(title: str, source_type: str, nodes: list[_Node]) -> list[str]:
    ids = [n.node_id for n in nodes]
    provenance = [_provenance(n.ref) for n in nodes]
    out = ["", f"### {title}", *_meta(source_type, ids, provenance, confidence_avg(nodes))]
    missing = list(dict.fromkeys(n.node_id for n in nodes if n.confidence is None))
    if missing:
        out.append(
            f"> warning: no confidence on {', '.join(missing)}; "
            f"{DEFAULT_CONFIDENCE:.2f} (MEDIUM) assumed"
        )
    return out + list(dict.fromkeys(n.line for n in nodes))


def _constraints(packet: CheckoutPacket, shown: list[_Node], expired: int) -> list[str]:
    by_id = {n.node_id: n for n in shown}
    p = packet.synthesis_plan
    lines = [f"- answerability: {packet.answerability}"]
    cited: list[str] = []
    for a in packet.answer_candidates:
        lines.append(f"- memory answer: {_flat(a.answer)} ({_level(a.confidence)} confidence)")
        cited += [i for i in a.support_ids if i in by_id]
    lines.append(
        f"- operation: {p.operation} → {p.answer_type}" + (f" in {p.unit}" if p.unit else "")
    )
    if p.entities:
        lines.append(f"- about: {', '.join(p.entities)}")
    if (tw := p.time_window) is not None:
        lines.append(f"- time window: {tw.start or '…'} – {tw.end or '…'} {tw.text}".rstrip())
    if packet.as_of:
        lines.append(f"- as of: {packet.as_of}")
    for w in packet.warnings:
        ids = f" ({', '.join(w.ids)})" if w.ids else ""
        lines.append(f"- warning ({w.kind}): {_flat(w.message)}{ids}")
        cited += [i for i in w.ids if i in by_id]
    if expired:
        lines.append(f"- left out: {expired} node(s) under confidence {CONFIDENCE_FLOOR:.2f}")
    nodes = [by_id[i] for i in dict.fromkeys(cited)]
    types = list(dict.fromkeys(["user_query", *(n.source_type for n in nodes)]))
    kind = types[0] if len(types) == 1 else "[" + ", ".join(types) + "]"
    provenance = [RAW_QUERY, *(_provenance(n.ref) for n in nodes)]
    meta = _meta(kind, [n.node_id for n in nodes], provenance, None)
    return ["", "### Constraints", *meta, *lines]


def render_gathered(packet: CheckoutPacket) -> str:
    """ "## Gathered Context" per seed 003: canonical sections with ``_meta`` blocks.

    Mapping: preference facts and ``preference.set`` events → Session Preferences; tool
    results → Cached Research; other events (messages, observations, tasks) → Relevant Prior
    Turns; other current facts → Visit Data (``fact``); evidence rows not already shown as a
    fact → Visit Data (``visit_record``: value, entity, time, source); the answer, the plan
    and the warnings → Constraints (``user_query`` plus the nodes they cite). Nodes under
    0.30 confidence are left out; unknown confidence counts as 0.50 with a warning line.
    With no nodes left only Constraints remains. Latent context is suggestive and left out.
    """
    nodes = _nodes(packet)
    shown = [n for n in nodes if n.effective >= CONFIDENCE_FLOOR]
    expired = len({n.node_id for n in nodes} - {n.node_id for n in shown})
    out = ["## Gathered Context"]
    for title, source_type in _SECTIONS:
        group = [n for n in shown if n.source_type == source_type]
        if group:
            out += _section(title, source_type, group)
    out += _constraints(packet, shown, expired)
    return "\n".join(out) + "\n"
