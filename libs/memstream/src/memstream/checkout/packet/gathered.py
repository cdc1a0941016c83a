"""The "Gathered Context" Markdown: canonical sections with ``_meta`` blocks."""

from __future__ import annotations

import json
from dataclasses import dataclass

from memstream.checkout.packet.prompt import cite
from memstream.checkout.packet.prompt import show_value as _value
from memstream.records.packet import DEFAULT_CONFIDENCE, CheckoutPacket, Snippet
from memstream.records.projected import SourceRef
from memstream.text.inert import fence, inert
from memstream.times import parse_ts

CONFIDENCE_FLOOR = 0.30  # nodes below are EXPIRED and left out
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
        key = inert(f.predicate.removeprefix("prefers:"))
        subject = inert(f.subject)
        pref = f.predicate.startswith("prefers:")
        value = inert(_value(f.value_text, f.unit))
        level = f"{_level(DEFAULT_CONFIDENCE if c is None else c)} confidence"
        line = (
            f"- {key.replace('_', ' ')}: {value} ({subject}; {level}) {cite(f.ref)}"
            if pref
            else f"- {subject} {inert(f.predicate).replace('_', ' ')}: {value} "
            f"(valid from {inert(f.valid_from)}; {level}) {cite(f.ref)}"
        )
        kind = "preference" if pref else "fact"
        nodes.append(_Node(f.fact_id, kind, c, f.valid_from, f.ref, line))
    fact_events = {f.ref.event_id for f in packet.facts}
    for s in packet.snippets:
        c = None if s.item_id in unknown else _snippet_confidence(s)
        conf[s.item_id] = c
        if s.item_id in fact_events:
            continue  # the fact stands for its source event
        who = f"{inert(s.occurred_at)} {inert(s.agent)} ({inert(s.type)})"
        line = f"- {who}: {inert(s.text)} {cite(s.ref)}"
        nodes.append(_Node(s.item_id, _snippet_type(s), c, s.occurred_at, s.ref, line))
    facts = {f.fact_id for f in packet.facts}
    for r in packet.evidence:
        if r.support_id in facts:
            continue  # shown as the fact itself
        c = None if r.support_id in unknown else conf.get(r.support_id)
        value = _value(r.value, r.unit)
        what = f"{inert(r.label)}" + (f" = {inert(value)}" if value else "")
        entity = inert(r.entity or "unknown")
        line = f"- {entity}: {what} ({inert(r.time or 'time unknown')}) {cite(r.ref)}"
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
    """A ``_meta`` block: YAML in a fence no id inside can close (ids are client-chosen)."""
    lines = ["_meta:", f"  source_type: {source_type}"]
    lines.append(f"  node_ids: {json.dumps(list(dict.fromkeys(ids)), ensure_ascii=False)}")
    if avg is not None:
        lines.append(f"  confidence_avg: {avg:.2f}")
    prov = json.dumps(list(dict.fromkeys(provenance)), ensure_ascii=False)
    return fence("yaml", [*lines, f"  provenance: {prov}"])


def _section(title: str, source_type: str, nodes: list[_Node]) -> list[str]:
    ids = [n.node_id for n in nodes]
    provenance = [_provenance(n.ref) for n in nodes]
    out = ["", f"### {title}", *_meta(source_type, ids, provenance, confidence_avg(nodes))]
    missing = list(dict.fromkeys(n.node_id for n in nodes if n.confidence is None))
    if missing:
        out.append(
            f"> warning: no confidence on {inert(', '.join(missing))}; "
            f"{DEFAULT_CONFIDENCE:.2f} (MEDIUM) assumed"
        )
    return out + list(dict.fromkeys(n.line for n in nodes))


def _constraints(packet: CheckoutPacket, shown: list[_Node], expired: int) -> list[str]:
    by_id = {n.node_id: n for n in shown}
    p = packet.synthesis_plan
    lines = [f"- answerability: {inert(packet.answerability)}"]
    cited: list[str] = []
    for a in packet.answer_candidates:
        lines.append(f"- memory answer: {inert(a.answer)} ({_level(a.confidence)} confidence)")
        cited += [i for i in a.support_ids if i in by_id]
    lines.append(
        f"- operation: {p.operation} → {p.answer_type}" + (f" in {p.unit}" if p.unit else "")
    )
    if p.entities:
        lines.append(f"- about: {inert(', '.join(p.entities))}")
    if (tw := p.time_window) is not None:
        window = f"{inert(tw.start or '…')} – {inert(tw.end or '…')} {inert(tw.text)}"
        lines.append(f"- time window: {window}".rstrip())
    if packet.as_of:
        lines.append(f"- as of: {inert(packet.as_of)}")
    for w in packet.warnings:
        ids = f" ({inert(', '.join(w.ids))})" if w.ids else ""
        lines.append(f"- warning ({inert(w.kind)}): {inert(w.message)}{ids}")
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
    """ "## Gathered Context": canonical sections with ``_meta`` blocks.

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
