"""The time lane, the second hop and reranking over a real FalkorDB graph and a Qdrant Edge
index (hand-written talk over a few months, read two years later)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from lanedata import projected, sequenced
from memstream.checkout.plan import plan_query
from memstream.checkout.plan.entities import Lexicon
from memstream.checkout.retrieve.lanes import MAX_OFFSETS, TIME_SEARCHES, Retriever
from memstream.checkout.retrieve.rerank import rerank
from memstream.graph.port import GraphUnavailable
from memstream.stack.servers import Server

NOW = "2031-03-10T09:00:00Z"  # long after the talk: "last June" is not the June before now
# (id, day, speaker, text): sessions months apart, each baking something
TALK = [
    ("may1", "2029-05-12", "Zoë", "I baked a rhubarb pie for the neighbours."),
    ("may2", "2029-05-12", "the user", "Rhubarb pie sounds lovely, did you bake it alone?"),
    ("jun1", "2029-06-16", "Zoë", "This weekend I baked sourdough bread, two loaves."),
    ("jun2", "2029-06-16", "the user", "Two loaves! Baked bread is the best."),
    ("aug1", "2029-08-03", "Zoë", "I bought a waterproof bag for the river today."),
    ("aug2", "2029-08-20", "Zoë", "We finally did the kayak trip down the river, so cold!"),
    ("aug3", "2029-08-21", "Zoë", "I baked a lemon cake for my mum after the kayak trip."),
    ("mar1", "2029-03-01", "Zoë", "I bought new hiking boots, they pinch a bit."),
    ("men1", "2029-04-02", "Zoë", "My mentor Marc-André Dupuis is brilliant with glazes."),
    ("men2", "2029-04-09", "the user", "Marc-André Dupuis suggested reading Borges first."),
    ("wed1", "2029-07-04", "Zoë", "Tomás became my husband at the lighthouse, barefoot."),
    ("wed2", "2029-07-09", "the user", "Amira and I married young, in a barn."),
] + [
    (f"fill{i}", f"2029-0{3 + i % 6}-2{i % 8}", "the user" if i % 2 else "Zoë",
     f"Filler chat {i} about the weather and groceries.")
    for i in range(30)
]  # fmt: skip


def entries(talk: list[tuple[str, str, str, str]] = TALK) -> list[dict[str, Any]]:
    """Ledger entries of ``talk``: one stream a day, each turn a minute after the last."""
    docs = [
        {"id": eid, "tenant": "zoe", "stream": f"s-{day}", "agent": agent,
         "type": "message.user", "occurred_at": f"{day}T10:{i % 60:02d}:00Z",
         "payload": {"text": text}}
        for i, (eid, day, agent, text) in enumerate(talk)
    ]  # fmt: skip
    return sequenced(docs, "2031-01-01T00:00:00Z")


@pytest.fixture
def retriever(falkordb_server: Server, tmp_path: Path) -> Iterator[Retriever]:
    with projected(falkordb_server, tmp_path, "query_lanes", entries()) as r:
        yield r


def _lane(pool: list[Any], lane: str) -> list[str]:
    return [c.item_id for c in pool if lane in c.lanes]


def test_last_june_means_the_june_before_the_talk_not_before_now(retriever: Retriever) -> None:
    plan = plan_query("what did zoë bake last june?", NOW)
    retriever.config = replace(retriever.config, time_lane=True)
    timings: dict[str, float] = {}
    pool = retriever.retrieve("zoe", plan, timings=timings)
    timed = _lane(pool, "time")
    assert "jun1" in timed and "time" in timings
    assert not {"may1", "aug3"} & set(timed)  # baking, but not in June 2029
    order = [c.item_id for c in pool]
    assert order.index("jun1") < min(order.index("may1"), order.index("aug3"))

    retriever.config = replace(retriever.config, time_lane=False)
    assert _lane(retriever.retrieve("zoe", plan), "time") == []


def test_an_offset_counts_from_the_days_of_what_it_names(retriever: Retriever) -> None:
    retriever.config = replace(retriever.config, time_lane=True)
    plan = plan_query("What did Zoë buy two weeks before the kayak trip?", NOW)
    timed = _lane(retriever.retrieve("zoe", plan), "time")
    assert "aug1" in timed  # 17 days before the trip: "two weeks" is not exact
    assert "mar1" not in timed  # bought too, five months before


def test_a_question_without_dates_gets_no_time_lane(retriever: Retriever) -> None:
    retriever.config = replace(retriever.config, time_lane=True)
    pool = retriever.retrieve("zoe", plan_query("What did Zoë bake for her mum?", NOW))
    assert pool and _lane(pool, "time") == []


def test_related_words_let_the_keyword_lanes_find_a_turn_that_shares_no_word(
    retriever: Retriever,
) -> None:
    plan = plan_query("who got married in the summer?", NOW)
    assert _lane(retriever.retrieve("zoe", plan), "sparse") == ["wed2"]
    retriever.config = replace(retriever.config, expand=True)
    pool = retriever.retrieve("zoe", plan)
    # "husband" is near "married"; the turn saying the question's own word stays first
    assert _lane(pool, "sparse")[:2] == ["wed2", "wed1"]
    assert "wed1" in [c.item_id for c in pool[:3]]


def test_the_second_hop_finds_what_the_person_in_the_first_hits_said(
    retriever: Retriever,
) -> None:
    plan = plan_query("What did Zoë's mentor suggest?", NOW)
    retriever.config = replace(retriever.config, second_hop=True)
    timings: dict[str, float] = {}
    pool = retriever.retrieve("zoe", plan, timings=timings)
    hop = _lane(pool, "hop_sparse") + _lane(pool, "hop_dense")
    assert "men2" in hop and "hop" in timings  # names the mentor, not Zoë nor "mentor"

    retriever.config = replace(retriever.config, second_hop=False)
    assert not any(x.startswith("hop") for c in retriever.retrieve("zoe", plan) for x in c.lanes)


def test_rerank_reorders_the_fused_pool_it_returns(retriever: Retriever) -> None:
    plan = plan_query("Which cake did Zoë bake after the kayak trip?", NOW)
    plain = retriever.retrieve("zoe", plan)
    retriever.config = replace(retriever.config, rerank=True)
    ranked = retriever.retrieve("zoe", plan)
    assert [c.item_id for c in ranked] == [c.item_id for c in rerank(plan, plain)]
    assert ranked[0].item_id == "aug3"
    assert sorted(c.item_id for c in ranked) == sorted(c.item_id for c in plain)


class CountingIndex:
    """The real index, counting the single searches a checkout makes."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self.queries = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)

    def query(self, *args: Any, **kwargs: Any) -> Any:
        self.queries += 1
        return self.index.query(*args, **kwargs)


def test_a_question_full_of_dates_and_offsets_costs_a_bounded_number_of_searches(
    retriever: Retriever,
) -> None:
    offsets_ = " and ".join(f"{n} days before the trip number {n}" for n in range(1, 40))
    dates_ = ", ".join(f"{d} May 2030" for d in range(1, 29))
    question = f"What happened\x00 \x01{offsets_}, on {dates_}, last june\x7f?"
    assert len(question) < 4000  # what a checkout request accepts
    counting = CountingIndex(retriever.index)
    retriever.index = counting  # type: ignore[assignment]
    retriever.config = replace(retriever.config, time_lane=True)
    timings: dict[str, float] = {}
    pool = retriever.retrieve("zoe", plan_query(question, NOW), timings=timings)
    assert pool and "time" in timings
    assert counting.queries <= MAX_OFFSETS + TIME_SEARCHES


FACT_TALK = [
    ("f1", "fact.asserted", {"subject": "Zoë Ørsted", "predicate": "lives_in", "object": "Lisbon"}),
    ("f2", "fact.asserted", {"subject": "Zoë Ørsted", "predicate": "lives_in", "object": "Oslo"}),
    ("p1", "preference.set", {"subject": "Zoë Ørsted", "key": "channel", "value": "e-mail"}),
    ("f3", "fact.asserted", {"subject": "Tomás", "predicate": "lives_in", "object": "Lima"}),
    ("t1", "message.user", {"text": "Zoë Ørsted moved again\x01, to Oslo this time."}),
    ("t2", "message.user", {"text": "Tomás sent a postcard from Lima."}),
]  # fmt: skip


@pytest.fixture
def fact_retriever(falkordb_server: Server, tmp_path: Path) -> Iterator[Retriever]:
    docs = [
        {"id": eid, "tenant": "zoe", "stream": "s", "agent": "Zoë Ørsted", "type": type_,
         "occurred_at": f"2029-05-1{i}T10:00:00Z", "payload": payload}
        for i, (eid, type_, payload) in enumerate(FACT_TALK)
    ]  # fmt: skip
    with projected(falkordb_server, tmp_path, "query_facts", sequenced(docs, NOW)) as r:
        yield r


def test_the_fact_lane_holds_the_named_subjects_facts(fact_retriever: Retriever) -> None:
    """The lane holds every fact written about each subject the question names (the facts
    of FACT_TALK, by their ids), and nobody else's."""
    lexicon = Lexicon.build(fact_retriever.graph.entities("zoe"))
    plan = plan_query("where does zoë ørsted live now, and tomás?", NOW, None, lexicon)
    assert plan.entity_keys() == ["zoe ørsted", "tomas"]
    pool = fact_retriever.retrieve("zoe", plan)
    assert set(_lane(pool, "fact")) == {"f1#0", "f2#0", "p1#0", "f3#0"}
    alone = fact_retriever.retrieve("zoe", plan_query("where does tomás live?", NOW, None, lexicon))
    assert {c.item_id for c in alone if "fact" in c.lanes} == {"f3#0"}


class FailingFacts:
    """The graph store, failing its facts reads as a server gone away would."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def recent_facts(self, *args: Any, **kwargs: Any) -> Any:
        raise GraphUnavailable("the graph server went away")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)


def test_a_failing_facts_read_fails_the_retrieval(fact_retriever: Retriever) -> None:
    lexicon = Lexicon.build(fact_retriever.graph.entities("zoe"))
    plan = plan_query("where does zoë ørsted live?", NOW, None, lexicon)
    assert plan.entity_keys()
    fact_retriever.graph = FailingFacts(fact_retriever.graph)  # type: ignore[assignment]
    with pytest.raises(GraphUnavailable, match="went away"):
        fact_retriever.retrieve("zoe", plan)


# One day of talk where the answer is a long turn among short ones; other days around it.
ONE_DAY = [
    ("ok", "2029-09-14", "Zoë", "Ok!"),
    ("bye", "2029-09-14", "the user", "Bye Zoë, see you!"),
    ("cook", "2029-09-14", "Zoë",
     "This week was wild, the race got moved, so I tried some cooking instead: a homemade "
     "coconut dessert with sprinkles, and the sprinkles turned it a strange colour."),
    ("thx", "2029-09-14", "Zoë", "Thanks, love you!"),
    ("sep1", "2029-09-01", "Zoë", "I make coconut pancakes most weekends."),
    ("sep2", "2029-09-20", "Zoë", "Ok, bye!"),
]  # fmt: skip


@pytest.fixture
def day_retriever(falkordb_server: Server, tmp_path: Path) -> Iterator[Retriever]:
    with projected(falkordb_server, tmp_path, "query_lanes_day", entries(ONE_DAY)) as r:
        yield r


class _Recording:
    """The real index, with the texts of the searches bounded by time recorded."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self.bounded: list[str] = []

    def query(self, *args: Any, **kw: Any) -> Any:
        if kw.get("as_of") is not None:
            self.bounded.append(args[2])
        return self.index.query(*args, **kw)

    def query_batch(self, *args: Any, **kw: Any) -> Any:
        # (tenant, dense, text, searches, as_of, related): as_of by position or by name
        as_of = args[4] if len(args) > 4 else kw.get("as_of")
        if as_of is not None:
            self.bounded.append(args[2])
        return self.index.query_batch(*args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)


def test_inside_a_named_day_the_time_lane_searches_the_questions_other_words(
    day_retriever: Retriever,
) -> None:
    query = "What dish did Zoë make on 14 September, 2029?"
    recorder = _Recording(day_retriever.index)
    day_retriever.index = recorder  # type: ignore[assignment]
    day_retriever.config = replace(day_retriever.config, time_lane=True)
    pool = day_retriever.retrieve("zoe", plan_query(query, NOW))
    # every turn of the day carries the day in its key: the date words tell nothing there
    assert recorder.bounded == ["What dish did Zoë make on ?"]
    timed = _lane(pool, "time")
    assert "cook" in timed and set(timed) <= {"ok", "bye", "cook", "thx"}  # that day only
    assert {c.item_id for c in pool[:4]} == set(timed)  # the day's turns lead the pool


def test_a_question_that_is_only_a_date_searches_the_period_as_asked(
    day_retriever: Retriever,
) -> None:
    recorder = _Recording(day_retriever.index)
    day_retriever.index = recorder  # type: ignore[assignment]
    day_retriever.config = replace(day_retriever.config, time_lane=True)
    pool = day_retriever.retrieve("zoe", plan_query("2029-09-14?", NOW))
    assert recorder.bounded == ["2029-09-14?"]
    assert set(_lane(pool, "time")) == {"ok", "bye", "cook", "thx"}
