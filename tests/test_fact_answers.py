"""Facts about whoever a question names: predicate relevance, facts as known then, and answers
through plan + synthesis for subjects written any way (hand-written and generated data)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from memstream.checkout.packet import assemble_packet
from memstream.checkout.plan import plan_query
from memstream.checkout.plan.entities import Lexicon
from memstream.checkout.retrieve.candidates import event_candidate, fact_candidate, known_by
from memstream.checkout.retrieve.facts import (
    PredicateRanker,
    predicate_words,
)
from memstream.checkout.synthesis import synthesize
from memstream.embed.registry import get_embedder
from memstream.graph.validity import known_at
from memstream.matching import PREDICATE_MATCH, focus_words
from memstream.records.packet import Candidate, SynthesisResult
from memstream.records.projected import EntityView, EventRecord, FactView, SourceRef
from memstream.text.names import entity_key
from memstream.text.words import STOPWORDS, fold_accents

NOW = "2025-03-01T12:00:00Z"


def ref(event_id: str) -> SourceRef:
    return SourceRef(tenant="t", stream="s", seq=1, hash="h" * 64, event_id=event_id)


def fact_view(
    fact_id: str,
    subject: str,
    predicate: str,
    value: str,
    valid_from: str,
    recorded_at: str | None = None,
    superseded_by: str | None = None,
    valid_to: str | None = None,
) -> FactView:
    return FactView(
        fact_id=fact_id,
        subject_key=entity_key(subject),
        predicate=predicate,
        object_key=None,
        value=value,
        value_text=value,
        unit=None,
        valid_from=valid_from,
        valid_to=valid_to,
        superseded_by=superseded_by,
        confidence=1.0,
        source=ref(fact_id.split("#")[0]),
        kind="fact",
        recorded_at=recorded_at or valid_from,
    )


def message(event_id: str, agent: str, text: str, at: str, kind: str = "message.user") -> Candidate:
    e = EventRecord(
        tenant="t",
        event_id=event_id,
        stream="s",
        seq=1,
        hash="h" * 64,
        prev_hash="",
        type=kind,
        agent=agent,
        occurred_at=at,
        ingested_at=at,
        text=text,
    )
    return event_candidate(e)


def ranker(query: str, lexicon: Lexicon) -> PredicateRanker:
    return PredicateRanker(get_embedder(), focus_words(plan_query(query, NOW, lexicon=lexicon)))


def answer(
    query: str, facts: list[FactView], lexicon: Lexicon, as_of: str | None = None,
    events: list[Candidate] | None = None,
) -> SynthesisResult:  # fmt: skip
    """What the retriever and synthesis make of ``facts`` (and ``events``) for ``query``."""
    plan = plan_query(query, NOW, as_of, lexicon)
    if as_of is not None:
        facts = known_at(facts, datetime.fromisoformat(as_of))
    rank = ranker(query, lexicon)
    cands = [fact_candidate(f, rank.relevance(f.predicate)) for f in facts] + (events or [])
    if as_of is not None:
        cands = [c for c in cands if known_by(c, datetime.fromisoformat(as_of))]
    return synthesize(plan, cands)


def lexicon_of(*names: str, user: str | None = None) -> Lexicon:
    views = [EntityView(key=entity_key(n), name=n, kind="thing", subject=True) for n in names]
    if user is not None:
        views.append(EntityView(key=entity_key(user), name=user, kind="agent", actor=True,
                                user_side=True))  # fmt: skip
    return Lexicon.build(views)


# -- predicate relevance ---------------------------------------------------------------------


def test_predicate_words_split_on_separators() -> None:
    assert predicate_words("lives_in") == "lives in"
    assert predicate_words("prefers:hot_drink") == "prefers hot drink"


def test_a_shared_word_makes_a_predicate_fully_relevant() -> None:
    lex = lexicon_of("Omar Haddad")
    assert ranker("Where does Omar live these days?", lex).relevance("lives_in") == 1.0
    assert ranker("what pet does omar haddad have", lex).relevance("owns_pet") == 1.0


def test_the_embedder_links_predicates_named_in_other_words() -> None:
    lex = lexicon_of("Omar")
    drink = ranker("What does Omar drink in the morning?", lex).relevance("prefers:beverage")
    old = ranker("How old is Omar?", lex).relevance("age")
    assert drink is not None and drink >= PREDICATE_MATCH
    assert old is not None and old >= PREDICATE_MATCH
    far = ranker("What pet does Omar have?", lex).relevance("lives_in")
    assert far is not None and far < PREDICATE_MATCH


def test_no_focus_means_no_ranking() -> None:
    assert ranker("Tell me about Omar", lexicon_of("Omar")).relevance("lives_in") is None


# -- facts as known at a time ----------------------------------------------------------------

CHAIN = [
    fact_view("f1#0", "user", "lives_in", "Ghent", "2023-01-01T00:00:00Z",
              superseded_by="f2#0", valid_to="2024-02-01T00:00:00Z"),
    # recorded a year after it became valid: back-dated
    fact_view("f2#0", "user", "lives_in", "Utrecht", "2024-02-01T00:00:00Z",
              recorded_at="2025-01-10T00:00:00Z"),
    fact_view("f3#0", "user", "age", "41", "2022-05-05T00:00:00Z"),
]  # fmt: skip


def test_a_fact_recorded_later_does_not_supersede_before_it_was_recorded() -> None:
    then = {f.fact_id: f for f in known_at(CHAIN, datetime(2024, 6, 1, tzinfo=UTC))}
    assert set(then) == {"f1#0", "f3#0"}
    assert then["f1#0"].valid_to is None and then["f1#0"].superseded_by is None
    later = {f.fact_id: f for f in known_at(CHAIN, datetime(2025, 2, 1, tzinfo=UTC))}
    assert later["f1#0"].superseded_by == "f2#0"
    assert later["f1#0"].valid_to == "2024-02-01T00:00:00Z"


def test_facts_not_yet_valid_are_not_known() -> None:
    assert known_at(CHAIN, datetime(2022, 1, 1, tzinfo=UTC)) == []


# -- answers through plan and synthesis ------------------------------------------------------


def test_the_user_answers_the_current_value_and_excludes_the_old_one() -> None:
    facts = [
        fact_view("a1#0", "user", "lives_in", "Ghent", "2023-01-01T00:00:00Z",
                  superseded_by="a2#0", valid_to="2024-02-01T00:00:00Z"),
        fact_view("a2#0", "the user", "lives_in", "Utrecht", "2024-02-01T00:00:00Z"),
        fact_view("a3#0", "user", "prefers:beverage", "mint tea", "2023-03-01T00:00:00Z"),
    ]  # fmt: skip
    said = message("m2", "sam", "We finally moved to Utrecht!", "2024-02-01T00:00:00Z")
    lex = lexicon_of("user", user="sam")
    for q in ("Where does the user live now?", "where does the user live", "Where do I live?"):
        res = answer(q, facts, lex, events=[said])
        top = res.answer_candidates[0]
        assert res.answerability == "answer_from_memory", (q, res)
        assert "Utrecht" in top.answer and top.support_ids[0] == "a2#0", (q, top)
        assert "m2" in top.support_ids  # the message stating the value corroborates it
        assert {(e.item_id, e.reason) for e in top.excluded_ids} >= {("a1#0", "superseded")}
    drink = answer("What does the user like to drink?", facts, lex).answer_candidates[0]
    assert drink.answer == "mint tea"
    then = answer("Where does the user live?", facts, lex, as_of="2023-06-01T00:00:00+00:00")
    assert "Ghent" in then.answer_candidates[0].answer
    assert all(not i.startswith(("a2", "m2")) for i in then.answer_candidates[0].support_ids)


def test_a_lower_case_multi_word_subject_answers_its_current_value() -> None:
    facts = [
        fact_view("b1#0", "billing pipeline", "runs_in", "eu-central", "2023-09-01T00:00:00Z",
                  superseded_by="b2#0", valid_to="2024-09-01T00:00:00Z"),
        fact_view("b2#0", "billing pipeline", "runs_in", "us-east", "2024-09-01T00:00:00Z"),
        fact_view("c1#0", "search pipeline", "runs_in", "ap-south", "2024-10-01T00:00:00Z"),
    ]  # fmt: skip
    lex = lexicon_of("billing pipeline", "search pipeline")
    res = answer("which region does the billing pipeline run in?", facts, lex)
    top = res.answer_candidates[0]
    assert top.answer == "us-east" and top.support_ids == ["b2#0"], res
    assert ("b1#0", "superseded") in {(e.item_id, e.reason) for e in top.excluded_ids}
    as_of = "2024-01-01T00:00:00+00:00"
    then = answer("Where does the Billing Pipeline run?", facts, lex, as_of=as_of)
    assert then.answer_candidates[0].answer == "eu-central"


_LETTERS = "abcdefghijklmnoprstuvwyzéèëïöüñçå"
# Words the planner reads as cues elsewhere ("how much did I spend"): in a name they are not.
_CUE_WORDS = ["spent", "spending", "price", "cost", "paid", "budget", "rent", "worth", "cheaper"]
_WORD = st.one_of(
    st.text(alphabet=_LETTERS, min_size=4, max_size=9), st.sampled_from(_CUE_WORDS)
).filter(lambda w: fold_accents(w) not in STOPWORDS)
_PHRASES = [
    ("Where does {s} live now?", "lives_in"),
    ("where is {s} living these days", "lives_in"),
    ("Where does {s} live?", "lives_in"),
    ("What tea does {s} prefer?", "prefers:tea"),
    ("which tea does {s} prefer now", "prefers:tea"),
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(_WORD, min_size=1, max_size=3),
    st.sampled_from(["as written", "lower", "upper first", "folded", "first name"]),
    st.sampled_from(_PHRASES),
    st.sampled_from(["Arvo", "Kestrel", "Quill"]),
    st.sampled_from(["Moss", "Brine", "Tallow"]),
)
def test_any_subject_written_any_way_gets_its_current_value(
    parts: list[str], form: str, phrase: tuple[str, str], old: str, new: str
) -> None:
    name = " ".join(p.capitalize() for p in parts)
    assume(len(set(parts)) == len(parts) and entity_key(name))
    asked = {
        "as written": name,
        "lower": name.lower(),
        "upper first": name,
        "folded": fold_accents(name),
        "first name": name.split()[0],
    }[form]
    template, predicate = phrase
    facts = [
        fact_view("p1#0", name, predicate, old, "2022-01-01T00:00:00Z",
                  superseded_by="p2#0", valid_to="2023-01-01T00:00:00Z"),
        fact_view("p2#0", name, predicate, new, "2023-01-01T00:00:00Z"),
        fact_view("q1#0", "Someone Else", predicate, "Elsewhere", "2024-01-01T00:00:00Z"),
    ]  # fmt: skip
    lex = lexicon_of(name, "Someone Else")
    query = template.format(s=asked)
    res = answer(query, facts, lex)
    assert res.answer_candidates, (query, res)
    top = res.answer_candidates[0]
    assert new in top.answer and top.support_ids == ["p2#0"], (query, top)
    assert ("p1#0", "superseded") in {(e.item_id, e.reason) for e in top.excluded_ids}
    then = answer(query, facts, lex, as_of="2022-06-01T00:00:00+00:00")
    assert old in then.answer_candidates[0].answer, (query, then)


# -- invalidation ----------------------------------------------------------------------------


def _invalidated(c: Candidate, by: str = "inv-1", reason: str = "a typo") -> Candidate:
    """``c`` as checkout marks it when an accepted memory.invalidate names it."""
    return c.model_copy(update={"invalidated_by": by, "invalidation_reason": reason})


# What the graph holds after "Zoë Håkansson-Bright moved to Tromsø" (wrong) was invalidated
# on 2025-02-01: the wrong fact closed then, out of the chain; the Oslo fact current again.
WRONG_MOVE = [
    fact_view("z1#0", "Zoë Håkansson-Bright", "lives_in", "Oslo", "2023-04-01T00:00:00Z"),
    fact_view("z2#0", "Zoë Håkansson-Bright", "lives_in", "Tromsø", "2024-10-01T00:00:00Z",
              valid_to="2025-02-01T00:00:00Z"),
]  # fmt: skip
WRONG_MOVE[1] = WRONG_MOVE[1].model_copy(
    update={"invalidated_at": "2025-02-01T00:00:00Z", "invalidated_by": "inv-1",
            "invalidation_reason": "she never moved"}
)  # fmt: skip


def test_an_invalidation_counts_only_from_when_it_was_made() -> None:
    then = {f.fact_id: f for f in known_at(WRONG_MOVE, datetime(2024, 12, 1, tzinfo=UTC))}
    assert then["z2#0"].invalidated_at is None and then["z2#0"].valid_to is None
    assert (then["z1#0"].superseded_by, then["z1#0"].valid_to) == ("z2#0", "2024-10-01T00:00:00Z")
    now = {f.fact_id: f for f in known_at(WRONG_MOVE, datetime(2025, 3, 1, tzinfo=UTC))}
    assert now["z1#0"].valid_to is None and now["z1#0"].superseded_by is None
    assert now["z2#0"].invalidated_by == "inv-1" and now["z2#0"].valid_to == "2025-02-01T00:00:00Z"


def test_an_invalidated_fact_is_excluded_with_its_reason_and_never_answers() -> None:
    lex = lexicon_of("Zoë Håkansson-Bright")
    rank = ranker("where does zoe hakansson-bright live?", lex)
    cands = [fact_candidate(f, rank.relevance(f.predicate)) for f in WRONG_MOVE]
    cands[1] = _invalidated(cands[1], reason="she never moved")
    for q in ("where does zoe hakansson-bright live?", "Where has Zoë Håkansson-Bright lived?"):
        res = synthesize(plan_query(q, NOW, lexicon=lex), cands)
        assert all("Tromsø" not in a.answer for a in res.answer_candidates), (q, res)
        assert all("z2#0" not in a.support_ids for a in res.answer_candidates), (q, res)
        excluded = {(e.item_id, e.reason, e.detail) for a in res.answer_candidates
                    for e in a.excluded_ids}  # fmt: skip
        assert ("z2#0", "invalidated", "she never moved") in excluded, (q, res)
        assert any(w.kind == "invalidated" and w.ids == ["z2#0"] for w in res.warnings), q
    current = synthesize(
        plan_query("where does zoe hakansson-bright live?", NOW, lexicon=lex), cands
    )
    assert "Oslo" in current.answer_candidates[0].answer


def test_an_invalidated_event_is_left_out_of_the_answer_and_the_packet() -> None:
    lex = lexicon_of("the user", user="sam")
    wrong = message("m1", "sam", "My locker code is 4471", "2024-05-01T00:00:00Z")
    right = message("m2", "sam", "My locker code is 9083", "2024-04-01T00:00:00Z")
    plan = plan_query("what is my locker code?", NOW, lexicon=lex)
    res = synthesize(plan, [_invalidated(wrong), right])
    assert res.answer_candidates and all(
        "m1" not in a.support_ids for a in res.answer_candidates
    ), res
    assert ("m1", "invalidated") in {
        (e.item_id, e.reason) for a in res.answer_candidates for e in a.excluded_ids
    }
    packet = assemble_packet(
        packet_id="p", tenant="t", as_of=None, plan=plan, result=res,
        candidates=[_invalidated(wrong), right], latent=[], max_tokens=2000,
        count_tokens=get_embedder().count_tokens,
    )  # fmt: skip
    assert [s.item_id for s in packet.snippets] == ["m2"]
    assert "4471" not in packet.model_dump_json().replace('"m1"', "")
