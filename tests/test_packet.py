"""Packet assembly and renderings on hand-written candidates (no servers, no benchmark text)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from memstream.checkout.packet import (
    assemble_packet,
    render_gathered,
    render_json,
    render_markdown,
)
from memstream.checkout.packet.assemble import SECTIONS
from memstream.checkout.packet.budget import measure
from memstream.checkout.packet.json_form import FIELD_ORDER
from memstream.checkout.packet.prompt import body_lines, head_lines, item_line
from memstream.checkout.packet.snippets import trim_text
from memstream.embed.registry import get_embedder
from memstream.records.packet import (
    AnswerCandidate,
    Candidate,
    CheckoutPacket,
    EvidenceRow,
    Exclusion,
    LatentItem,
    PacketWarning,
    SynthesisPlan,
    SynthesisResult,
    TimeWindow,
)
from memstream.records.projected import SourceRef

Counter = Callable[[str], int]
TENANT = "acme"


def words_counter(text: str) -> int:
    return len(re.findall(r"\w+|[^\w\s]", text))


@pytest.fixture(scope="module")
def wordpiece() -> Counter:
    return get_embedder("minilm-static-256").count_tokens


def ref(item_id: str, stream: str = "kitchen", seq: int = 1) -> SourceRef:
    event_id = item_id.split("#", 1)[0]
    digest = hashlib.sha256(event_id.encode()).hexdigest()
    return SourceRef(tenant=TENANT, stream=stream, seq=seq, hash=digest, event_id=event_id)


def event(item_id: str, text: str, seq: int, score: float, **kw: Any) -> Candidate:
    fields: dict[str, Any] = {
        "type": "message.user",
        "agent": "robin",
        "occurred_at": f"2030-03-{seq:02d}T10:00:00Z",
        "confidence": 1.0,
    }
    fields.update(kw)
    return Candidate(
        item_id=item_id,
        kind="event",
        text=text,
        ref=ref(item_id, seq=seq),
        score=score,
        **fields,
    )


def fact(item_id: str, predicate: str, value: str, seq: int, score: float, **kw: Any) -> Candidate:
    fields: dict[str, Any] = {
        "subject": "robin",
        "valid_from": f"2030-02-{seq:02d}T00:00:00Z",
        "confidence": 0.9,
    }
    fields.update(kw)
    return Candidate(
        item_id=item_id,
        kind="fact",
        text=f"robin {predicate} {value}",
        ref=ref(item_id, seq=seq),
        type="fact",
        agent="robin",
        occurred_at=fields["valid_from"],
        predicate=predicate,
        value=value,
        value_text=value,
        score=score,
        **fields,
    )


LONG = (
    "We cleared out the garage on Saturday morning. The weather was grey and cold. "
    "Later the neighbours came by to borrow the ladder. "
    + "Nothing else of note happened that afternoon. " * 12
    + "In the evening I bought a cast iron kettle for 38 euros at the flea market. "
    + "Then we had soup."
)

CANDIDATES = [
    event("ev-kettle", LONG, 3, 0.9),
    event("ev-mugs", "Ordered six ceramic mugs online, 24 euros in total.", 4, 0.7),
    event("ev-mugs-again", "Reminder: the mugs were 24 euros.", 5, 0.8),
    event(
        "ev-search",
        "Search results: three shops sell kettles between 30 and 60 euros.",
        6,
        0.5,
        type="tool.result",
        agent="shopper-bot",
    ),
    event("ev-pref", "robin prefers tea: green", 7, 0.3, type="preference.set"),
    event("ev-unsure", "I think the toaster was around 15 euros?", 8, 0.4, confidence=None),
    fact("ev-city#0", "lives_in", "Ghent", 1, 0.6),
    fact(
        "ev-city-old#0",
        "lives_in",
        "Bruges",
        2,
        0.2,
        valid_from="2029-01-01T00:00:00Z",
        valid_to="2030-02-01T00:00:00Z",
        superseded_by="ev-city#0",
    ),
    fact("ev-pref#0", "prefers:tea", "green", 7, 0.35),
    fact("ev-rumour#0", "owns", "a canoe", 9, 0.45, confidence=0.2),
    fact("ev-guess#0", "works_at", "the bakery", 10, 0.4, confidence=None),
]
BY_ID = {c.item_id: c for c in CANDIDATES}

PLAN = SynthesisPlan(
    query="How much did I spend on the kettle and the mugs?",
    operation="sum",
    answer_type="money",
    terms=["kettle", "mugs"],
    unit="EUR",
)


def row(item_id: str, value: float, label: str) -> EvidenceRow:
    c = BY_ID[item_id]
    return EvidenceRow(
        row_id=f"{item_id}:q0",
        support_id=item_id,
        label=label,
        value=value,
        unit="EUR",
        entity="robin",
        time=c.occurred_at,
        ref=c.ref,
    )


RESULT = SynthesisResult(
    answerability="answer_from_memory",
    answer_candidates=[
        AnswerCandidate(
            answer="€62",
            value=62.0,
            unit="EUR",
            confidence=0.8,
            support_ids=["ev-kettle", "ev-mugs"],
            excluded_ids=[Exclusion(item_id="ev-mugs-again", reason="duplicate")],
        )
    ],
    warnings=[PacketWarning(kind="stale", message="the kettle price is old", ids=["ev-kettle"])],
    evidence=[
        row("ev-kettle", 38.0, "cast iron kettle for 38 euros"),
        row("ev-mugs", 24.0, "six ceramic mugs online, 24 euros"),
        row("ev-mugs-again", 24.0, "the mugs were 24 euros"),
    ],
)

LATENT = [
    LatentItem(
        artifact_id="lat-1",
        artifact_type="episode_latent",
        summary="Robin furnishes a new kitchen in early spring.",
        confidence=0.6,
        source_event_refs=[BY_ID["ev-kettle"].ref, BY_ID["ev-mugs"].ref],
    )
]


def build(
    max_tokens: int = 5000,
    count: Counter = words_counter,
    *,
    as_of: str | None = None,
    plan: SynthesisPlan = PLAN,
    result: SynthesisResult = RESULT,
    candidates: list[Candidate] | None = None,
    max_snippet_chars: int = 400,
) -> CheckoutPacket:
    return assemble_packet(
        packet_id="pk-1",
        tenant=TENANT,
        as_of=as_of,
        plan=plan,
        result=result,
        candidates=CANDIDATES if candidates is None else candidates,
        latent=LATENT,
        max_tokens=max_tokens,
        count_tokens=count,
        max_snippet_chars=max_snippet_chars,
    )


def ranked_ids(packet: CheckoutPacket) -> list[tuple[str, str]]:
    """(section, id) of every whole item in the packet, in priority order."""
    out: list[tuple[str, str]] = []
    out += [
        ("answer_candidates", f"answer_candidates[{n}]")
        for n, _ in enumerate(packet.answer_candidates)
    ]
    out += [("warnings", f"warnings[{n}]") for n, _ in enumerate(packet.warnings)]
    out += [("facts", f.fact_id) for f in packet.facts]
    out += [("evidence", r.row_id) for r in packet.evidence]
    out += [("snippets", s.item_id) for s in packet.snippets]
    out += [("latent_context", x.artifact_id) for x in packet.latent_context]
    return out


CANDIDATE_REFS = {c.ref for c in CANDIDATES}
CITATION = re.compile(r"\[?(\w[\w-]*)/([\w-]+)#(\d+) ([0-9a-f]{8})\]?")


def cited_refs(text: str) -> set[tuple[str, str, int, str]]:
    return {(t, s, int(q), h) for t, s, q, h in CITATION.findall(text)}


def short(r: SourceRef) -> tuple[str, str, int, str]:
    return (r.tenant, r.stream, r.seq, r.hash[:8])


# --- assembly ------------------------------------------------------------------------------


def test_sections_hold_what_they_should() -> None:
    p = build()
    assert p.answer_candidates == RESULT.answer_candidates
    assert p.evidence == RESULT.evidence
    facts = [f.fact_id for f in p.facts]
    assert "ev-city-old#0" not in facts  # superseded, not current
    assert facts == ["ev-city#0", "ev-rumour#0", "ev-guess#0", "ev-pref#0"]  # by score
    snippets = [s.item_id for s in p.snippets]
    assert snippets[:2] == ["ev-kettle", "ev-mugs"]  # supporting first, by score
    assert snippets[2] == "ev-search"  # then by score (excluded duplicates last)
    assert snippets[-1] == "ev-mugs-again"
    assert p.latent_context == LATENT
    warned = [w for w in p.warnings if w.kind == "default_confidence"]
    assert warned and set(warned[0].ids) == {"ev-unsure", "ev-guess#0"}


def test_as_of_selects_the_fact_valid_then() -> None:
    facts = {f.fact_id for f in build(as_of="2029-06-01T00:00:00Z").facts}
    assert "ev-city-old#0" in facts and "ev-city#0" not in facts


def test_long_snippets_are_trimmed_around_the_query() -> None:
    kettle = next(s for s in build().snippets if s.item_id == "ev-kettle")
    assert len(kettle.text) <= 400 and "kettle for 38 euros" in kettle.text
    assert kettle.text.startswith("…")
    assert kettle.ref == BY_ID["ev-kettle"].ref and kettle.metadata["confidence"] == 1.0
    tiny = next(s for s in build(max_snippet_chars=40).snippets if s.item_id == "ev-kettle")
    assert len(tiny.text) <= 40 and "kettle" in tiny.text and "…" in tiny.text


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(st.sampled_from(list("abc kettle 42. !?\n")), max_size=600),
    limit=st.integers(1, 300),
)
def test_trim_never_exceeds_the_limit(text: str, limit: int) -> None:
    out = trim_text(text, frozenset({"kettl"}), limit)
    assert len(out) <= limit
    flat = " ".join(text.split())
    assert out == flat or "…" in out


def test_json_has_design_field_order_and_round_trips() -> None:
    p = build()
    doc = json.loads(render_json(p))
    assert list(doc) == list(FIELD_ORDER)
    assert CheckoutPacket.model_validate_json(render_json(p)) == p


def test_used_is_the_measured_size(wordpiece: Counter) -> None:
    for count in (wordpiece, words_counter):
        p = build(count=count)
        body = "\n".join(body_lines(p))
        assert p.budget.used == count(body) == measure(p, count)
        # the measured text is the prompt rendering minus its closing budget line
        md = render_markdown(p)
        assert md.startswith(body) and md[len(body) :].strip().startswith("_Budget:")
        assert p.budget.counted == "markdown"
        assert not p.budget.dropped


def test_every_item_has_its_line_in_the_prompt_rendering() -> None:
    p = build()
    md = render_markdown(p)
    for x in items(p):
        assert item_line(x) in md
    for s in p.snippets:
        assert f"`{s.item_id}`" in md
    for a in p.answer_candidates:
        assert all(f"`{i}`" in md for i in a.support_ids)


def check_budget(p: CheckoutPacket, full: CheckoutPacket, count: Counter, limit: int) -> None:
    assert p.budget.max_tokens == limit
    assert p.budget.used == measure(p, count) <= limit
    everything = ranked_ids(full)
    kept = ranked_ids(p)
    whole = [(d.section, d.item_id) for d in p.budget.dropped if d.section in SECTIONS]
    # the kept items are a prefix of the full ranking; the dropped ones the rest, lowest first
    assert kept == everything[: len(kept)]
    assert whole == everything[len(kept) :][::-1]
    costs = {(s, i): count(item_line(x)) for (s, i), x in zip(everything, items(full), strict=True)}
    for d in p.budget.dropped:
        if d.section in SECTIONS:
            assert d.tokens == costs[(d.section, d.item_id)]
        assert d.tokens >= 0


def items(p: CheckoutPacket) -> list[Any]:
    return [x for section in SECTIONS for x in getattr(p, section)]


@pytest.mark.parametrize("limit", [64, 70, 90, 120, 200, 300, 500, 800, 1200, 4000])
def test_budget_with_the_wordpiece_counter(wordpiece: Counter, limit: int) -> None:
    full = build(count=wordpiece)
    p = build(limit, wordpiece)
    check_budget(p, full, wordpiece, limit)


@settings(max_examples=150, deadline=None)
@given(limit=st.integers(64, 1500), chars=st.integers(20, 500))
def test_budget_is_never_exceeded(limit: int, chars: int) -> None:
    full = build(count=words_counter, max_snippet_chars=chars)
    p = build(limit, words_counter, max_snippet_chars=chars)
    check_budget(p, full, words_counter, limit)


def test_lower_priorities_go_first() -> None:
    full = build()
    head = measure(full.model_copy(update={s: [] for s in SECTIONS}), words_counter)
    answer = words_counter(item_line(full.answer_candidates[0]))
    warnings = sum(words_counter(item_line(w)) for w in full.warnings)
    warnings += words_counter("## Warnings")
    p = build(head + answer + warnings + 1)
    assert p.answer_candidates == full.answer_candidates and p.warnings == full.warnings
    assert not p.facts and not p.snippets and not p.latent_context
    order = [d.section for d in p.budget.dropped]
    assert order[0] == "latent_context" and order[-1] == "facts"
    assert order.index("snippets") < order.index("evidence") < order.index("facts")


def test_a_tight_budget_slims_the_top_answer() -> None:
    excluded = [Exclusion(item_id=f"ev-x{n}", reason="stale") for n in range(30)]
    answer = RESULT.answer_candidates[0].model_copy(
        update={"answer": "€62 in total " * 20, "excluded_ids": excluded}
    )
    result = RESULT.model_copy(update={"answer_candidates": [answer]})
    bare = build(result=result.model_copy(update={"answer_candidates": []}))
    head = measure(bare.model_copy(update={s: [] for s in SECTIONS}), words_counter)
    smallest = answer.model_copy(update={"answer": "…", "excluded_ids": []})
    limit = head + words_counter(item_line(smallest)) + 5
    p = build(limit, result=result)
    assert p.budget.used <= limit
    top = p.answer_candidates[0]
    assert top.excluded_ids == [] and top.answer.endswith("…")
    assert top.support_ids == answer.support_ids
    sections = {d.section for d in p.budget.dropped}
    assert {"answer_candidates.excluded_ids", "answer_candidates.answer"} <= sections
    gone = [d.item_id for d in p.budget.dropped if d.section == "answer_candidates.excluded_ids"]
    assert sorted(gone) == sorted(e.item_id for e in excluded)  # each named once


def test_a_long_query_is_cut_to_fit(wordpiece: Counter) -> None:
    window = TimeWindow(start="2030-03-01", end="2030-04-01", text="last month")
    plan = PLAN.model_copy(
        update={
            "query": "kettle and mugs and plates " * 200,
            "entities": ["robin"],
            "time_window": window,
            "as_of": "2030-04-01T00:00:00Z",
        }
    )
    p = build(64, wordpiece, plan=plan)
    assert p.budget.used == measure(p, wordpiece) <= 64
    assert p.synthesis_plan.query.endswith("…")
    steps = [d.item_id for d in p.budget.dropped if d.section == "synthesis_plan"]
    assert steps[:3] == ["time_window.text", "as_of", "query"]
    # terms and entities are not in the prompt rendering: dropping them would save nothing
    assert p.synthesis_plan.entities == ["robin"]
    assert p.synthesis_plan.operation == "sum"
    with pytest.raises(ValueError, match="below the smallest packet head"):
        build(3, wordpiece)


def test_a_head_that_fits_is_left_alone(wordpiece: Counter) -> None:
    head = sum(wordpiece(x) for x in head_lines(RESULT.answerability, PLAN))
    head += wordpiece("## Answer") + wordpiece("- none from memory")
    p = build(head, wordpiece)
    assert p.synthesis_plan == PLAN and p.budget.used == head
    assert all(d.section != "synthesis_plan" for d in p.budget.dropped)


# --- renderings ----------------------------------------------------------------------------


def test_markdown_puts_the_answer_first_and_cites_ledger_refs() -> None:
    p = build()
    md = render_markdown(p)
    marks = [
        "**Answerability:**",
        "## Answer",
        "## Warnings",
        "## Facts",
        "## Evidence",
        "## Snippets",
        "## Latent context (suggestive",
        "_Budget:",
    ]
    positions = [md.index(m) for m in marks]
    assert positions == sorted(positions)
    assert "**€62**" in md and f"_Budget: {p.budget.used} of 5000 tokens" in md
    kettle = BY_ID["ev-kettle"].ref
    assert f"[acme/kitchen#{kettle.seq} {kettle.hash[:8]}]" in md


def test_markdown_reports_what_was_dropped() -> None:
    p = build(150)
    assert p.budget.dropped
    assert f"dropped {len(p.budget.dropped)} (" in render_markdown(p)


def test_every_ref_in_a_rendering_belongs_to_a_candidate(wordpiece: Counter) -> None:
    known = {short(r) for r in CANDIDATE_REFS}
    ids = set(BY_ID)
    for limit in (120, 400, 5000):
        p = build(limit, wordpiece)
        for text in (render_markdown(p), render_gathered(p)):
            assert cited_refs(text) <= known
        if p.snippets:
            assert short(p.snippets[0].ref) in cited_refs(render_markdown(p))
        doc = json.loads(render_json(p))
        json_refs = [x["ref"] for s in ("facts", "evidence", "snippets") for x in doc[s]]
        json_refs += [r for x in doc["latent_context"] for r in x["source_event_refs"]]
        assert {SourceRef.model_validate(r) for r in json_refs} <= CANDIDATE_REFS
        for block in meta_blocks(render_gathered(p)):
            assert set(block["node_ids"]) <= ids


def meta_blocks(text: str) -> list[dict[str, Any]]:
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    return [yaml.safe_load(b)["_meta"] for b in blocks]


def sections_of(text: str) -> list[str]:
    return re.findall(r"^### (.+)$", text, re.M)


def test_gathered_has_canonical_sections_with_meta_blocks() -> None:
    g = render_gathered(build())
    assert g.startswith("## Gathered Context\n")
    titles = sections_of(g)
    assert titles == [
        "Session Preferences",
        "Relevant Prior Turns",
        "Cached Research",
        "Visit Data",
        "Visit Data",
        "Constraints",
    ]
    metas = meta_blocks(g)
    assert len(metas) == len(titles)
    kinds = [m["source_type"] for m in metas]
    assert kinds[:5] == ["preference", "turn_summary", "research_cache", "fact", "visit_record"]
    assert "user_query" in (kinds[5] if isinstance(kinds[5], list) else [kinds[5]])
    for m in metas[:5]:
        assert m["node_ids"] and m["provenance"] and 0.0 <= m["confidence_avg"] <= 1.0
    assert metas[0]["node_ids"] == ["ev-pref#0"]  # its source event is not repeated
    assert "ev-search" in metas[2]["node_ids"]
    assert metas[5]["provenance"][0] == "§0.raw_query"
    assert {"ev-kettle", "ev-mugs"} <= set(metas[5]["node_ids"])  # cited by the answer
    assert "memory answer: €62" in g


def test_gathered_excludes_nodes_under_030() -> None:
    g = render_gathered(build())
    assert "ev-rumour#0" not in g and "canoe" not in g
    assert "left out: 1 node(s) under confidence 0.30" in g


def test_gathered_defaults_missing_confidence_to_050_with_a_warning() -> None:
    g = render_gathered(build())
    facts = next(m for m in meta_blocks(g) if m["source_type"] == "fact")
    assert facts["node_ids"] == ["ev-city#0", "ev-guess#0"]
    # valid_from 2030-02-01 (0.9, weight 1) and 2030-02-10 (0.5 assumed, weight 2)
    assert facts["confidence_avg"] == pytest.approx(round((0.9 + 2 * 0.5) / 3, 2))
    assert "> warning: no confidence on ev-guess#0; 0.50 (MEDIUM) assumed" in g
    assert "> warning: no confidence on ev-unsure; 0.50 (MEDIUM) assumed" in g


def test_gathered_empty_state_is_constraints_only() -> None:
    empty = SynthesisResult(
        answerability="no_memory", answer_candidates=[], warnings=[], evidence=[]
    )
    p = assemble_packet(
        packet_id="pk-0",
        tenant=TENANT,
        as_of=None,
        plan=PLAN,
        result=empty,
        candidates=[],
        latent=[],
        max_tokens=500,
        count_tokens=words_counter,
    )
    g = render_gathered(p)
    assert sections_of(g) == ["Constraints"]
    (meta,) = meta_blocks(g)
    assert meta == {"source_type": "user_query", "node_ids": [], "provenance": ["§0.raw_query"]}
    assert "- answerability: no_memory" in g


def test_gathered_with_only_low_confidence_nodes_is_constraints_only() -> None:
    low = [fact("ev-rumour#0", "owns", "a canoe", 9, 0.45, confidence=0.1)]
    result = RESULT.model_copy(update={"answer_candidates": [], "evidence": [], "warnings": []})
    g = render_gathered(build(result=result, candidates=low))
    assert sections_of(g) == ["Constraints"] and "canoe" not in g


HOSTILE = "<script>alert('x')</script> <img src=x onerror=alert(1)> <b>mugs</b> & kettle"
TAG = re.compile(r"<\s*/?\s*[A-Za-z!]")


def test_markdown_and_gathered_never_pass_html_from_memory_through() -> None:
    hostile_event = event("ev-html", f"I bought {HOSTILE} for 9 euros", 7, 0.95)
    hostile_fact = fact(
        "ev-html#0", "bought", "<script>v()</script>", 7, 0.95, subject="<i>Zoë</i> & co"
    )
    result = RESULT.model_copy(
        update={
            "answer_candidates": [
                RESULT.answer_candidates[0].model_copy(update={"answer": "<script>a()</script>"})
            ],
            "warnings": [PacketWarning(kind="stale", message=HOSTILE, ids=["ev-html"])],
            "evidence": [
                *RESULT.evidence,
                EvidenceRow(
                    row_id="ev-html:q0",
                    support_id="ev-html",
                    label=HOSTILE,
                    value=9.0,
                    unit="EUR",
                    entity="<u>robin</u>",
                    time=hostile_event.occurred_at,
                    ref=hostile_event.ref,
                ),
            ],
        }
    )
    plan = PLAN.model_copy(update={"query": "How much <script>q()</script> on mugs?"})
    p = build(candidates=[*CANDIDATES, hostile_event, hostile_fact], result=result, plan=plan)
    assert "ev-html" in [s.item_id for s in p.snippets] and p.facts
    for rendered in (render_markdown(p), render_gathered(p)):
        assert TAG.search(rendered) is None, TAG.findall(rendered)
        assert "&lt;script&gt;alert('x')&lt;/script&gt;" in rendered
        assert "&lt;i&gt;Zoë&lt;/i&gt; &amp; co" in rendered
    md = render_markdown(p)
    assert "**&lt;script&gt;a()&lt;/script&gt;**" in md
    assert "**Query:** How much &lt;script&gt;q()&lt;/script&gt; on mugs?" in md


# -- text rows --------------------------------------------------------------------------------

LOOKUP = SynthesisPlan(
    query="Where did Søren leave the spare key?", operation="lookup", answer_type="text"
)
SPARE_KEY = [
    event("ev-q", "Søren, where is the spare key now?", 11, 0.2),
    event("ev-reply", "Under the blue flowerpot by the back door.", 12, 0.9, agent="søren"),
    event("ev-key-old", "The spare key used to hang in the shed.", 13, 0.5),
    event("ev-receipt", "Paid 12 euros for a second spare key.", 14, 0.4),
]


def text_row_of(c: Candidate) -> EvidenceRow:
    return EvidenceRow(
        row_id=f"{c.item_id}:text",
        support_id=c.item_id,
        label=c.text,
        ref=c.ref,
        time=c.occurred_at,
    )


def lookup_result() -> SynthesisResult:
    """Relevant rows ranked by the words they share with the question, the reply last."""
    by_id = {c.item_id: c for c in SPARE_KEY}
    receipt = EvidenceRow(
        row_id="ev-receipt:q0", support_id="ev-receipt", label="Paid 12 euros", value=12.0,
        unit="EUR", ref=by_id["ev-receipt"].ref, time=by_id["ev-receipt"].occurred_at,
    )  # fmt: skip
    return SynthesisResult(
        answerability="answer_from_memory",
        answer_candidates=[
            AnswerCandidate(answer="in the shed", confidence=0.6, support_ids=["ev-key-old"])
        ],
        warnings=[],
        evidence=[*(text_row_of(by_id[i]) for i in ("ev-key-old", "ev-q", "ev-reply")), receipt],
    )


def test_an_event_text_is_shown_once_as_a_snippet_ranked_by_retrieval() -> None:
    packet = build(plan=LOOKUP, result=lookup_result(), candidates=SPARE_KEY)
    # the evidence section keeps the rows carrying a value, not a second copy of each text
    assert [r.row_id for r in packet.evidence] == ["ev-receipt:q0"]
    # the answer's support, the event behind a value row, then by retrieval score: the reply
    # (no word of the question) above the question it answers
    assert [s.item_id for s in packet.snippets] == ["ev-key-old", "ev-receipt", "ev-reply", "ev-q"]


def test_text_rows_on_keeps_every_relevant_text_in_the_evidence_section() -> None:
    packet = assemble_packet(
        packet_id="pk-2", tenant=TENANT, as_of=None, plan=LOOKUP, result=lookup_result(),
        candidates=SPARE_KEY, latent=[], max_tokens=5000, count_tokens=words_counter,
        text_rows=True,
    )  # fmt: skip
    assert [r.row_id for r in packet.evidence] == [
        "ev-key-old:text", "ev-q:text", "ev-reply:text", "ev-receipt:q0"
    ]  # fmt: skip


def test_an_answer_lists_a_few_exclusions_of_each_reason_and_budget_names_the_rest() -> None:
    out_of_window = [
        Exclusion(item_id=f"ev-day{n}", reason="out_of_window", detail=f"2030-01-{n + 1:02d}")
        for n in range(25)
    ]
    superseded = [Exclusion(item_id=f"ev-old{n}", reason="superseded") for n in range(2)]
    answer = RESULT.answer_candidates[0].model_copy(
        update={"excluded_ids": [*out_of_window, *superseded]}
    )
    p = build(result=RESULT.model_copy(update={"answer_candidates": [answer]}))
    listed = p.answer_candidates[0].excluded_ids
    assert [e.item_id for e in listed] == ["ev-day0", "ev-day1", "ev-day2", "ev-old0", "ev-old1"]
    gone = [d.item_id for d in p.budget.dropped if d.section == "answer_candidates.excluded_ids"]
    assert gone == [f"ev-day{n}" for n in range(3, 25)]
    assert len(p.snippets) == len({c.item_id for c in CANDIDATES if c.kind == "event"})
