"""The graph port contract, run against every adapter on a real server.

FalkorDB always runs (the ``falkordb_server`` fixture). Neo4j joins the parametrization only
when ``MEMSTREAM_TEST_NEO4J_URI`` is set (plus ``..._USER``, ``..._PASSWORD``,
``..._DATABASE``); otherwise it is not collected at all rather than reported as skipped.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import latentdata
import neo4j
import pytest
from falkordb import FalkorDB
from leakscan import files_holding
from memstream.events.payloads import QuestionFamily
from memstream.graph import cypher
from memstream.graph.factory import GraphNotConfiguredError, open_graph_store
from memstream.graph.falkor import FALKOR_DDL, FalkorGraphStore
from memstream.graph.neo4j_store import NEO4J_DDL, Neo4jGraphStore, database_name
from memstream.graph.port import GraphStore, PurgeScope
from memstream.graph.store import CypherGraphStore
from memstream.records.latent import LatentArtifact
from memstream.records.projected import (
    EntityRecord,
    EventRecord,
    FactRecord,
    FactView,
    FeedbackRecord,
    GraphBatch,
    InvalidationRecord,
    JsonScalar,
    MentionRecord,
    SourceRef,
)
from memstream.scope import Scope
from memstream.settings import Settings
from memstream.stack.servers import Server
from memstream.times import iso_z
from pydantic import SecretStr

NEO4J_URI = os.environ.get("MEMSTREAM_TEST_NEO4J_URI")
ADAPTERS = ["falkordb"] + (["neo4j"] if NEO4J_URI else [])

A, B = "acme", "globex"


@pytest.fixture(params=ADAPTERS)
def store(request: pytest.FixtureRequest) -> Iterator[CypherGraphStore]:
    """A fresh, schema-ready namespace per test, dropped afterwards."""
    if request.param == "falkordb":
        server: Server = request.getfixturevalue("falkordb_server")
        client = FalkorDB(port=server.port, password=server.password)
        graph: CypherGraphStore = FalkorGraphStore(client, f"contract_{uuid.uuid4().hex[:12]}")
        graph.ensure_schema()
        try:
            yield graph
        finally:
            graph.drop()
        return
    assert NEO4J_URI is not None
    driver = neo4j.GraphDatabase.driver(
        NEO4J_URI,
        auth=(
            os.environ.get("MEMSTREAM_TEST_NEO4J_USER", "neo4j"),
            os.environ.get("MEMSTREAM_TEST_NEO4J_PASSWORD", ""),
        ),
    )
    # Community edition has one database: isolate tests by emptying it around each one.
    graph = Neo4jGraphStore(driver, os.environ.get("MEMSTREAM_TEST_NEO4J_DATABASE", "neo4j"))
    graph.drop()
    graph.ensure_schema()
    try:
        yield graph
    finally:
        graph.drop()
        driver.close()


# -- data -------------------------------------------------------------------------------------


def ev(seq: int, stream: str = "chat", tenant: str = A, text: str = "") -> EventRecord:
    return EventRecord(
        tenant=tenant,
        event_id=f"{stream}-{seq}",
        stream=stream,
        seq=seq,
        hash=f"{tenant}-{stream}-{seq:04d}",
        prev_hash=f"{tenant}-{stream}-{seq - 1:04d}",
        type="message.user",
        agent="marta",
        occurred_at=f"2024-03-{seq:02d}T09:00:00Z",
        ingested_at=f"2024-03-{seq:02d}T09:00:01.25Z",
        text=text or f"turn {seq} of {stream}",
        metadata={"turn": seq, "lang": "en"},
    )


def src(e: EventRecord) -> SourceRef:
    return SourceRef(tenant=e.tenant, stream=e.stream, seq=e.seq, hash=e.hash, event_id=e.event_id)


def fact(
    fact_id: str,
    subject: str,
    predicate: str,
    valid_from: str,
    obj: str | None = None,
    value: JsonScalar = None,
    tenant: str = A,
    seq: int = 1,
    recorded_at: str | None = None,
) -> FactRecord:
    return FactRecord(
        tenant=tenant,
        recorded_at=recorded_at or valid_from,
        fact_id=fact_id,
        subject_key=subject,
        predicate=predicate,
        object_key=obj,
        value=value,
        value_text=obj or str(value),
        valid_from=valid_from,
        source=src(ev(seq, tenant=tenant)),
    )


def mention(e: EventRecord, key: str, role: str = "mention") -> MentionRecord:
    return MentionRecord(tenant=e.tenant, event_id=e.event_id, entity_key=key, role=role)


def ids(facts: list[FactView]) -> list[str]:
    return [f.fact_id for f in facts]


def by_id(facts: list[FactView]) -> dict[str, FactView]:
    return {f.fact_id: f for f in facts}


def world(tenant: str = A) -> GraphBatch:
    """Marta lives in Lisbon then Porto, works at Acme; Joao knows Marta; events mention them."""
    events = [ev(s, tenant=tenant) for s in range(1, 7)]
    return GraphBatch(
        events=events,
        entities=[
            EntityRecord(tenant=tenant, key="marta", name="Marta", kind="person"),
            EntityRecord(tenant=tenant, key="joao", name="Joao", kind="person"),
            EntityRecord(tenant=tenant, key="lisbon", name="Lisbon", kind="place"),
            EntityRecord(tenant=tenant, key="porto", name="Porto", kind="place"),
            EntityRecord(tenant=tenant, key="acme", name="Acme", kind="org"),
        ],
        mentions=[
            mention(events[0], "marta", "subject"),
            mention(events[0], "lisbon", "object"),
            mention(events[1], "joao"),
            mention(events[2], "porto"),
            mention(events[3], "acme"),
            mention(events[4], "marta", "actor"),
            mention(events[4], "marta", "subject"),
        ],
        facts=[
            fact("f-lisbon", "marta", "lives_in", "2024-03-01T09:00Z", "lisbon", None, tenant, 1),
            fact("f-knows", "joao", "knows", "2024-03-02T09:00Z", "marta", None, tenant, 2),
            fact("f-porto", "marta", "lives_in", "2024-03-03T09:00Z", "porto", None, tenant, 3),
            fact("f-acme", "marta", "works_at", "2024-03-04T09:00Z", "acme", None, tenant, 4),
            fact("f-age", "marta", "age", "2024-03-01T09:00Z", value=41, tenant=tenant, seq=5),
        ],
    )


# -- write, idempotency, events ---------------------------------------------------------------


def test_event_round_trips_with_awkward_text(store: GraphStore) -> None:
    text = "She said \"no\" \\ then\nleft; café 😀 `x` {y} $z 'q'"
    e = ev(1, text=text).model_copy(update={"caused_by": ["evt-0", "evt-ø"]})
    plain = ev(2)
    store.write(GraphBatch(events=[e, plain]))
    got = store.event(A, e.event_id)
    assert got == e.model_copy(
        update={"occurred_at": iso_z(e.occurred_at), "ingested_at": iso_z(e.ingested_at)}
    )
    assert got is not None and got.ingested_at == "2024-03-01T09:00:01.250000Z"
    assert got.caused_by == ["evt-0", "evt-ø"]
    again = store.event(A, plain.event_id)
    assert again is not None and again.caused_by == []
    assert store.event(A, "missing") is None


def test_rewriting_the_same_batch_changes_nothing(store: GraphStore) -> None:
    batch = world()
    store.write(batch)
    counts = store.counts(A)
    history = store.facts(A, include_superseded=True)
    chain = store.chain(A, "chat-3", radius=5)
    store.write(batch)
    store.write(GraphBatch(facts=list(reversed(batch.facts))))
    assert store.counts(A) == counts == {"events": 6, "entities": 5, "facts": 5, "mentions": 7}
    assert store.facts(A, include_superseded=True) == history
    assert store.chain(A, "chat-3", radius=5) == chain


def test_counts_per_tenant_and_overall(store: GraphStore) -> None:
    assert store.counts() == {"events": 0, "entities": 0, "facts": 0, "mentions": 0}
    store.write(world(A))
    store.write(GraphBatch(events=[ev(1, tenant=B)]))
    # The value fact (age 41) has a value node that is not an entity.
    assert store.counts(A) == {"events": 6, "entities": 5, "facts": 5, "mentions": 7}
    assert store.counts(B) == {"events": 1, "entities": 0, "facts": 0, "mentions": 0}
    assert store.counts() == {"events": 7, "entities": 5, "facts": 5, "mentions": 7}


def test_mentions_and_facts_create_missing_entities(store: GraphStore) -> None:
    e = ev(1)
    store.write(
        GraphBatch(
            events=[e],
            mentions=[mention(e, "zed")],
            facts=[fact("f1", "zed", "likes", "2024-01-01T00:00:00Z", "tea")],
        )
    )
    assert store.counts(A) == {"events": 1, "entities": 2, "facts": 1, "mentions": 1}
    assert store.neighbourhood(A, ["tea"]) == ["chat-1"]


# -- NEXT chain -------------------------------------------------------------------------------


def test_next_chain_follows_seq_whatever_the_arrival_order(store: GraphStore) -> None:
    store.write(GraphBatch(events=[ev(5), ev(1), ev(3), ev(2)]))  # one batch, shuffled
    assert [e.seq for e in store.chain(A, "chat-2", radius=10)] == [1, 2, 3]  # 4 is missing
    store.write(GraphBatch(events=[ev(4)]))  # fills the gap from a later batch
    assert [e.seq for e in store.chain(A, "chat-1", radius=10)] == [1, 2, 3, 4, 5]
    assert [e.seq for e in store.chain(A, "chat-5", radius=10)] == [1, 2, 3, 4, 5]


def test_chain_stays_on_its_stream_and_tenant(store: GraphStore) -> None:
    store.write(GraphBatch(events=[ev(s) for s in (1, 2, 3)]))
    store.write(GraphBatch(events=[ev(s, stream="other") for s in (1, 2, 3)]))
    store.write(GraphBatch(events=[ev(s, tenant=B) for s in (1, 2, 3)]))
    chain = store.chain(A, "chat-2", radius=5)
    assert [(e.tenant, e.stream, e.seq) for e in chain] == [(A, "chat", s) for s in (1, 2, 3)]
    assert store.counts(A)["events"] == 6


def test_chain_radius(store: GraphStore) -> None:
    store.write(GraphBatch(events=[ev(s) for s in range(10, 0, -1)]))
    assert [e.seq for e in store.chain(A, "chat-5", radius=2)] == [3, 4, 5, 6, 7]
    assert [e.seq for e in store.chain(A, "chat-5")] == [3, 4, 5, 6, 7]  # default radius 2
    assert [e.seq for e in store.chain(A, "chat-5", radius=0)] == [5]
    assert [e.seq for e in store.chain(A, "chat-1", radius=3)] == [1, 2, 3, 4]
    assert [e.seq for e in store.chain(A, "chat-10", radius=1)] == [9, 10]
    assert [e.seq for e in store.chain(A, "chat-5", radius=500)] == list(range(1, 11))
    assert store.chain(A, "missing", radius=2) == []
    first = store.chain(A, "chat-1", radius=0)[0]
    assert first.text == "turn 1 of chat" and first.metadata == {"turn": 1, "lang": "en"}


def test_chains_read_each_chain_as_chain_would(store: GraphStore) -> None:
    store.write(GraphBatch(events=[ev(s) for s in range(1, 9)]))
    odd = "Ça va/ünïcode"
    store.write(GraphBatch(events=[ev(s, stream=odd, text="Æsir\u0001") for s in (1, 2)]))
    store.write(GraphBatch(events=[ev(s, tenant=B) for s in (1, 2, 3)]))
    ids = ["chat-5", "missing", "Ça va/ünïcode-2", "chat-1", "chat-5", "chat-8"]
    for radius, as_of in ((1, None), (2, None), (0, None), (3, "2024-03-04T00:00:00Z")):
        got = store.chains(A, ids, radius=radius, as_of=as_of)
        assert got == [store.chain(A, i, radius=radius, as_of=as_of) for i in ids]
    got = store.chains(A, ids, radius=1)
    assert [[e.seq for e in chain] for chain in got] == [
        [4, 5, 6],
        [],
        [1, 2],
        [1, 2],
        [4, 5, 6],
        [7, 8],
    ]
    assert got[2][1].text == "Æsir\u0001" and got[2][1].stream == "Ça va/ünïcode"
    assert store.chains(B, ["chat-2"], radius=1)[0][0].tenant == B
    assert store.chains(A, [], radius=1) == []


# -- supersession -----------------------------------------------------------------------------

JAN, FEB, MAR = "2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"
APR = "2024-04-01T00:00:00Z"


def test_newer_fact_supersedes_older(store: GraphStore) -> None:
    store.write(GraphBatch(facts=[fact("a", "marta", "lives_in", JAN, "lisbon")]))
    store.write(GraphBatch(facts=[fact("b", "marta", "lives_in", FEB, "porto")]))
    assert ids(store.facts(A)) == ["b"]
    hist = by_id(store.facts(A, include_superseded=True))
    assert (hist["a"].valid_to, hist["a"].superseded_by) == (iso_z(FEB), "b")
    assert (hist["b"].valid_to, hist["b"].superseded_by) == (None, None)
    assert hist["b"].object_key == "porto" and hist["b"].valid_from == iso_z(FEB)
    assert hist["b"].source == src(ev(1))
    # as_of picks the fact valid at that instant; the boundary belongs to the newer fact.
    assert ids(store.facts(A, as_of="2023-12-31T00:00:00Z")) == []
    assert ids(store.facts(A, as_of="2024-01-15T00:00:00Z")) == ["a"]
    assert ids(store.facts(A, as_of=FEB)) == ["b"]
    assert ids(store.facts(A, as_of="2024-06-01T00:00:00Z")) == ["b"]
    # With history, as_of still hides facts asserted later.
    assert ids(store.facts(A, as_of="2024-01-15T00:00:00Z", include_superseded=True)) == ["a"]


@pytest.mark.parametrize("order", [("c", "a", "b"), ("b", "c", "a"), ("a", "b", "c")])
def test_supersession_does_not_depend_on_arrival_order(
    store: GraphStore, order: tuple[str, str, str]
) -> None:
    facts = {
        "a": fact("a", "marta", "lives_in", JAN, "lisbon"),
        "b": fact("b", "marta", "lives_in", FEB, "porto"),
        "c": fact("c", "marta", "lives_in", MAR, "faro"),
    }
    for name in order:
        store.write(GraphBatch(facts=[facts[name]]))
        # An older fact arriving after a newer one is closed immediately.
        if name == "a" and "b" in order[: order.index("a")]:
            assert by_id(store.facts(A, include_superseded=True))["a"].superseded_by == "b"
    hist = by_id(store.facts(A, include_superseded=True))
    assert [(hist[k].valid_to, hist[k].superseded_by) for k in "abc"] == [
        (iso_z(FEB), "b"),
        (iso_z(MAR), "c"),
        (None, None),
    ]
    assert ids(store.facts(A)) == ["c"]


def test_supersession_within_one_batch(store: GraphStore) -> None:
    store.write(
        GraphBatch(
            facts=[
                fact("c", "marta", "lives_in", MAR, "faro"),
                fact("a", "marta", "lives_in", JAN, "lisbon"),
                fact("b", "marta", "lives_in", FEB, "porto"),
            ]
        )
    )
    hist = by_id(store.facts(A, include_superseded=True))
    assert [hist[k].superseded_by for k in "abc"] == ["b", "c", None]


def test_supersession_leaves_other_subjects_and_predicates_alone(store: GraphStore) -> None:
    store.write(
        GraphBatch(
            facts=[
                fact("works", "marta", "works_at", JAN, "acme"),
                fact("joao-lives", "joao", "lives_in", JAN, "lisbon"),
                fact("marta-lives", "marta", "lives_in", JAN, "lisbon"),
            ]
        )
    )
    store.write(GraphBatch(facts=[fact("marta-moves", "marta", "lives_in", FEB, "porto")]))
    # The same subject/predicate in another tenant is another group.
    store.write(GraphBatch(facts=[fact("b-moves", "marta", "lives_in", MAR, "faro", tenant=B)]))
    current = by_id(store.facts(A))
    assert sorted(current) == ["joao-lives", "marta-moves", "works"]
    assert all(f.valid_to is None and f.superseded_by is None for f in current.values())
    assert ids(store.facts(B)) == ["b-moves"]


def test_reasserting_the_same_object_is_a_new_fact(store: GraphStore) -> None:
    store.write(GraphBatch(facts=[fact("a", "marta", "lives_in", JAN, "porto")]))
    store.write(GraphBatch(facts=[fact("b", "marta", "lives_in", FEB, "porto")]))
    hist = by_id(store.facts(A, include_superseded=True))
    assert hist["a"].superseded_by == "b" and ids(store.facts(A)) == ["b"]


def test_rewriting_an_old_fact_changes_nothing(store: GraphStore) -> None:
    a = fact("a", "marta", "lives_in", JAN, "lisbon")
    store.write(GraphBatch(facts=[a, fact("b", "marta", "lives_in", FEB, "porto")]))
    before = store.facts(A, include_superseded=True)
    store.write(GraphBatch(facts=[a]))
    assert store.facts(A, include_superseded=True) == before


def test_timestamps_compare_as_instants_not_as_raw_strings(store: GraphStore) -> None:
    # As raw strings "…10:00:00Z" sorts after "…10:00:00.5Z" and "+02:00" hides the hour.
    store.write(
        GraphBatch(
            facts=[
                fact("whole", "marta", "mood", "2024-03-01T10:00:00Z", value="calm"),
                fact("half", "marta", "mood", "2024-03-01T10:00:00.5Z", value="busy"),
                fact("early", "marta", "mood", "2024-03-01T11:00:00+02:00", value="asleep"),
            ]
        )
    )
    assert ids(store.facts(A)) == ["half"]
    hist = by_id(store.facts(A, include_superseded=True))
    assert hist["early"].valid_from == "2024-03-01T09:00:00.000000Z"
    assert hist["early"].superseded_by == "whole" and hist["whole"].superseded_by == "half"
    assert ids(store.facts(A, as_of="2024-03-01T12:00:00.2+02:00")) == ["whole"]


def test_value_facts_keep_value_unit_and_no_object(store: GraphStore) -> None:
    rows = [
        fact("n", "marta", "age", JAN, value=41),
        fact("x", "marta", "height", JAN, value=1.72),
        fact("s", "marta", "nickname", JAN, value='"Mimi"'),
        fact("t", "marta", "vegan", JAN, value=True),
    ]
    unit = rows[1].model_copy(update={"unit": "m", "kind": "preference", "confidence": 0.4})
    store.write(GraphBatch(facts=[rows[0], unit, rows[2], rows[3]]))
    got = by_id(store.facts(A, subject_key="marta"))
    assert {k: f.value for k, f in got.items()} == {"n": 41, "x": 1.72, "s": '"Mimi"', "t": True}
    assert all(f.object_key is None for f in got.values())
    assert (got["x"].unit, got["x"].kind, got["x"].confidence) == ("m", "preference", 0.4)
    assert (got["n"].unit, got["n"].kind, got["n"].value_text) == (None, "fact", "41")


def test_fact_filters(store: GraphStore) -> None:
    store.write(world())
    assert ids(store.facts(A, subject_key="marta")) == ["f-age", "f-porto", "f-acme"]
    assert ids(store.facts(A, predicate="lives_in")) == ["f-porto"]
    assert ids(store.facts(A, subject_key="marta", predicate="lives_in", as_of=FEB)) == []
    history = store.facts(A, subject_key="marta", predicate="lives_in", include_superseded=True)
    assert ids(history) == ["f-lisbon", "f-porto"]
    assert ids(store.facts(A, subject_key="nobody")) == []


# -- neighbourhood ----------------------------------------------------------------------------


def test_neighbourhood_reaches_one_fact_hop_newest_first(store: GraphStore) -> None:
    store.write(world())
    # marta (1, 5) + her fact neighbours lisbon (1), porto (3), acme (4), joao (2).
    assert store.neighbourhood(A, ["marta"]) == ["chat-5", "chat-4", "chat-3", "chat-2", "chat-1"]
    # lisbon -> marta is one hop; marta's other neighbours are two hops away.
    assert store.neighbourhood(A, ["lisbon"]) == ["chat-5", "chat-1"]
    assert store.neighbourhood(A, ["joao", "acme"]) == ["chat-5", "chat-4", "chat-2", "chat-1"]
    assert store.neighbourhood(A, ["marta"], limit=2) == ["chat-5", "chat-4"]
    assert store.neighbourhood(A, []) == []
    assert store.neighbourhood(A, ["nobody"]) == []


# -- tenant isolation -------------------------------------------------------------------------


def test_every_read_is_scoped_to_its_tenant(store: GraphStore) -> None:
    store.write(world(A))
    other = world(B)
    store.write(
        other.model_copy(
            update={"events": [e.model_copy(update={"text": "B"}) for e in other.events]}
        )
    )
    store.write(GraphBatch(facts=[fact("b-new", "marta", "lives_in", APR, "faro", tenant=B)]))
    assert ids(store.facts(A, subject_key="marta", predicate="lives_in")) == ["f-porto"]
    assert ids(store.facts(B, subject_key="marta", predicate="lives_in")) == ["b-new"]
    assert {f.source.tenant for f in store.facts(A, include_superseded=True)} == {A}
    assert all(e.text != "B" for e in store.chain(A, "chat-3", radius=10))
    assert {e.tenant for e in store.chain(B, "chat-3", radius=10)} == {B}
    a_event, b_event = store.event(A, "chat-1"), store.event(B, "chat-1")
    assert a_event is not None and b_event is not None
    assert (a_event.tenant, b_event.text) == (A, "B")
    assert store.neighbourhood(A, ["marta"]) == store.neighbourhood(B, ["marta"])
    store.write(GraphBatch(events=[ev(9, tenant=B)], mentions=[mention(ev(9, tenant=B), "marta")]))
    assert "chat-9" not in store.neighbourhood(A, ["marta"])
    assert store.neighbourhood(B, ["marta"])[0] == "chat-9"
    assert store.counts(A) == {"events": 6, "entities": 5, "facts": 5, "mentions": 7}
    assert store.event("nobody", "chat-1") is None
    assert store.facts("nobody") == [] and store.chain("nobody", "chat-1") == []


# -- purge and drop ---------------------------------------------------------------------------


def test_purge_removes_subject_its_facts_and_events(store: GraphStore) -> None:
    store.write(world(A))
    store.write(world(B))
    # Facts about someone else: one drawn from event 1 (which mentions lisbon), one not.
    store.write(GraphBatch(facts=[fact("joao-was", "joao", "lives_in", JAN, "braga", seq=1)]))
    store.write(GraphBatch(facts=[fact("joao-now", "joao", "lives_in", FEB, "faro", seq=3)]))
    report = store.purge_tenant_subject(A, "lisbon")
    # Event 1 and its two mentions (marta, lisbon); f-lisbon (about lisbon) and joao-was (its
    # only evidence was event 1, so keeping it would cite a deleted event).
    assert report == {"events": 1, "entities": 1, "facts": 2, "mentions": 2}
    assert store.event(A, "chat-1") is None and store.event(B, "chat-1") is not None
    history = store.facts(A, include_superseded=True)
    assert sorted(ids(history)) == ["f-acme", "f-age", "f-knows", "f-porto", "joao-now"]
    assert by_id(history)["joao-now"].superseded_by is None
    assert store.neighbourhood(A, ["lisbon"]) == []
    # braga stays (only a fact pointed at it); the value node of f-age is not an entity.
    assert store.counts(A) == {"events": 5, "entities": 6, "facts": 5, "mentions": 5}
    assert store.counts(B) == {"events": 6, "entities": 5, "facts": 5, "mentions": 7}
    assert [e.seq for e in store.chain(A, "chat-3", radius=5)] == [2, 3, 4, 5, 6]
    assert store.purge_tenant_subject(A, "lisbon") == {
        "events": 0,
        "entities": 0,
        "facts": 0,
        "mentions": 0,
    }


def test_purge_reopens_the_fact_a_purged_fact_had_superseded(store: GraphStore) -> None:
    e1, e2 = ev(1), ev(2)
    store.write(GraphBatch(events=[e1, e2], mentions=[mention(e2, "porto")]))
    store.write(
        GraphBatch(
            facts=[
                fact("a", "marta", "lives_in", JAN, "lisbon", seq=1),
                fact("b", "marta", "lives_in", FEB, "porto", seq=2),
            ]
        )
    )
    report = store.purge_tenant_subject(A, "porto")
    assert report == {"events": 1, "entities": 1, "facts": 1, "mentions": 1}
    current = store.facts(A)
    assert ids(current) == ["a"] and current[0].superseded_by is None


def invalidation(
    event_id: str,
    targets: list[str],
    at: str,
    status: str = "accepted",
    reason: str = "wrong",
    proposal_id: str | None = None,
    tenant: str = A,
) -> list[InvalidationRecord]:
    return [
        InvalidationRecord(
            tenant=tenant,
            invalidation_id=f"{event_id}#{i}",
            event_id=event_id,
            target_id=t,
            reason=reason,
            status=status,  # type: ignore[arg-type]
            proposal_id=proposal_id,
            at=at,
        )
        for i, t in enumerate(targets)
    ]


LATER = "2024-06-01T00:00:00Z"


def test_invalidation_closes_the_fact_and_reopens_the_one_it_superseded(
    store: GraphStore,
) -> None:
    store.write(
        GraphBatch(
            facts=[
                fact("a", "marta", "lives_in", JAN, "lisbon", seq=1),
                fact("b", "marta", "lives_in", FEB, "porto", seq=2),
            ]
        )
    )
    store.write(GraphBatch(invalidations=invalidation("inv-1", ["b"], LATER, reason="typo")))
    hist = by_id(store.facts(A, include_superseded=True))
    b = hist["b"]
    assert (b.valid_to, b.invalidated_at, b.invalidation_reason, b.invalidated_by) == (
        iso_z(LATER),
        iso_z(LATER),
        "typo",
        "inv-1",
    )
    assert b.superseded_by is None  # never deleted, out of the chain
    assert (hist["a"].valid_to, hist["a"].superseded_by) == (None, None)
    assert ids(store.facts(A)) == ["a"]
    # Before the invalidation, memory held "b" as current.
    assert ids(store.facts(A, as_of="2024-03-15T00:00:00Z")) == ["b"]
    # A newer fact arriving later supersedes "a", not the invalidated "b".
    store.write(GraphBatch(facts=[fact("c", "marta", "lives_in", MAR, "faro", seq=3)]))
    hist = by_id(store.facts(A, include_superseded=True))
    assert hist["a"].superseded_by == "c" and hist["b"].valid_to == iso_z(LATER)


def test_invalidating_an_event_closes_every_fact_drawn_from_it(store: GraphStore) -> None:
    store.write(world())
    store.write(GraphBatch(invalidations=invalidation("inv-2", [ev(4).event_id], LATER)))
    facts = by_id(store.facts(A, include_superseded=True))
    assert facts["f-acme"].invalidated_by == "inv-2"
    assert [f for f in facts.values() if f.invalidated_at] == [facts["f-acme"]]
    assert "f-acme" not in ids(store.facts(A))


@pytest.mark.parametrize("status", ["proposed", "rejected"])
def test_proposals_and_rejections_change_no_fact(store: GraphStore, status: str) -> None:
    store.write(world())
    store.write(GraphBatch(invalidations=invalidation("p-1", ["f-porto"], LATER, status)))
    facts = by_id(store.facts(A, include_superseded=True))
    assert not any(f.invalidated_at for f in facts.values())
    assert "f-porto" in ids(store.facts(A))
    assert [v.status for v in store.invalidations(A, ["f-porto"], status=None)] == [status]
    assert store.invalidations(A, ["f-porto"]) == []


def test_a_fact_arriving_after_its_invalidation_is_born_closed(store: GraphStore) -> None:
    # The invalidation names the source event; its stream was projected first.
    early = invalidation("inv-3", [ev(2).event_id], "2024-02-20T00:00:00Z")
    later = invalidation("inv-4", [ev(2).event_id], LATER)
    store.write(GraphBatch(invalidations=later))
    store.write(GraphBatch(invalidations=early))
    store.write(
        GraphBatch(
            facts=[
                fact("a", "marta", "lives_in", JAN, "lisbon", seq=1),
                fact("b", "marta", "lives_in", FEB, "porto", seq=2),
            ]
        )
    )
    hist = by_id(store.facts(A, include_superseded=True))
    assert hist["b"].invalidated_by == "inv-3"  # the earliest holds, whatever the order
    assert hist["b"].valid_to == "2024-02-20T00:00:00.000000Z"
    assert hist["a"].superseded_by is None and ids(store.facts(A)) == ["a"]


def test_an_invalidation_before_the_fact_was_valid_closes_it_at_once(store: GraphStore) -> None:
    store.write(GraphBatch(facts=[fact("a", "marta", "lives_in", MAR, "lisbon")]))
    store.write(GraphBatch(invalidations=invalidation("inv-5", ["a"], JAN)))
    a = by_id(store.facts(A, include_superseded=True))["a"]
    assert a.valid_to == a.valid_from == iso_z(MAR)


def test_invalidation_entries_show_open_and_decided_proposals(store: GraphStore) -> None:
    store.write(
        GraphBatch(
            invalidations=[
                *invalidation("p-1", ["f-1", "f-2"], JAN, "proposed", "fails tasks"),
                *invalidation("p-2", ["f-3"], FEB, "proposed"),
                *invalidation("d-1", ["f-1", "f-2"], MAR, "accepted", "checked", "p-1"),
                *invalidation("other", ["x"], MAR, "proposed", tenant=B),
            ]
        )
    )
    proposals = store.invalidation_entries(A, status="proposed")
    assert [(p.event_id, p.target_ids, p.decisions) for p in proposals] == [
        ("p-2", ["f-3"], []),
        ("p-1", ["f-1", "f-2"], ["d-1 accepted"]),
    ]
    assert proposals[1].reason == "fails tasks" and proposals[1].at == iso_z(JAN)
    accepted = store.invalidation_entries(A, status="accepted")
    assert [(d.event_id, d.proposal_id) for d in accepted] == [("d-1", "p-1")]
    assert len(store.invalidation_entries(A)) == 3


def test_rewriting_invalidations_changes_nothing(store: GraphStore) -> None:
    store.write(world())
    batch = GraphBatch(invalidations=invalidation("inv-6", ["f-porto"], LATER))
    store.write(batch)
    before = by_id(store.facts(A, include_superseded=True))
    store.write(batch)
    store.write(world())
    assert by_id(store.facts(A, include_superseded=True)) == before
    assert len(store.invalidations(A, ["f-porto"])) == 1


ELOISE = "eloise martin-duval"  # an accented, multi-word name, as the extractor keys it


def subjects_world(tenant: str) -> tuple[GraphBatch, list[LatentArtifact]]:
    """Éloïse (events 1-2) and Joao (event 3, and a fact drawn from event 1 that supersedes
    his older one), with artifacts derived from them."""
    e1 = ev(1, tenant=tenant, text="Éloïse Martin-Duval moved to Lisbon; Joao lives in Faro")
    e2 = ev(2, tenant=tenant, text="Joao knows Éloïse Martin-Duval")
    e3 = ev(3, tenant=tenant, text="Joao lives in Braga")
    batch = GraphBatch(
        events=[e1, e2, e3],
        entities=[EntityRecord(tenant=tenant, key=ELOISE, name="Éloïse Martin-Duval", kind="name")],
        mentions=[
            mention(e1, ELOISE),
            mention(e1, "lisbon"),
            mention(e2, "joao"),
            mention(e2, ELOISE),
            mention(e3, "joao"),
            mention(e3, "braga"),
        ],
        facts=[
            fact("f-lisbon", ELOISE, "lives_in", JAN, "lisbon", tenant=tenant, seq=1),
            fact("f-age", ELOISE, "age", JAN, value=41, tenant=tenant, seq=1),
            fact("f-faro", "joao", "lives_in", FEB, "faro", tenant=tenant, seq=1),
            fact("f-knows", "joao", "knows", JAN, ELOISE, tenant=tenant, seq=2),
            fact("f-braga", "joao", "lives_in", JAN, "braga", tenant=tenant, seq=3),
        ],
    )
    both = latentdata.episode(tenant, "chat", "Éloïse moved; Joao", [src(e1), src(e3)])
    older = latentdata.episode(tenant, "chat", "Éloïse moved", [src(e1)], group="g-older")
    joao = latentdata.episode(tenant, "chat", "Joao in Braga", [src(e3)], group="g-joao")
    return batch, [latentdata.stale(older), both, joao]


def test_purge_events_removes_what_they_hold_and_nothing_else(store: CypherGraphStore) -> None:
    for tenant in (A, B):
        batch, artifacts = subjects_world(tenant)
        store.write(batch)
        store.write_latents(artifacts)
    before_b = store.counts(B)
    report = store.purge_events(A, ["chat-1", "chat-2", "never-seen"])
    # Entities: Éloïse, Lisbon and Faro are left with nothing; Joao keeps event 3 and a fact.
    assert report == {"events": 2, "facts": 4, "entities": 3, "mentions": 4, "latents": 2}
    assert store.events(A, ["chat-1", "chat-2", "chat-3"]) == [
        ev(3, tenant=A).model_copy(
            update={
                "text": "Joao lives in Braga",
                "occurred_at": iso_z(ev(3).occurred_at),
                "ingested_at": iso_z(ev(3).ingested_at),
            }
        )
    ]
    assert ids(store.facts(A, include_superseded=True)) == ["f-braga"]
    assert store.facts(A)[0].valid_to is None  # Joao's older fact is current again
    keys = {e.key for e in store.entities(A)}
    assert ELOISE not in keys and {"joao", "braga"} <= keys and not {"lisbon", "faro"} & keys
    assert [a.summary for a in store.latents(A, include_stale=True)] == ["Joao in Braga"]
    assert store.mentioning(A, [ELOISE]) == [] and store.neighbourhood(A, ["joao"]) == ["chat-3"]
    assert store.counts(B) == before_b and len(store.latents(B, include_stale=True)) == 3
    assert store.purge_events(A, ["chat-1", "chat-2"]) == dict.fromkeys(report, 0)
    assert store.purge_events(A, []) == dict.fromkeys(report, 0)


def test_purge_takes_the_invalidations_written_by_or_naming_purged_events(
    store: CypherGraphStore,
) -> None:
    batch, _ = subjects_world(A)
    store.write(batch)
    store.write(
        GraphBatch(
            invalidations=[
                *invalidation("chat-2", ["f-knows"], LATER, reason="Éloïse never met Joao"),
                *invalidation("inv-x", ["chat-1"], LATER),
                *invalidation("inv-y", ["f-braga"], LATER, "proposed"),
            ]
        )
    )
    store.purge_events(A, ["chat-1", "chat-2"])
    left = store.invalidations(A, ["f-knows", "chat-1", "f-braga"], status=None)
    assert [v.event_id for v in left] == ["inv-y"]


def test_deleted_latents_take_their_edges_and_loose_stubs(store: CypherGraphStore) -> None:
    e1 = ev(1)
    store.write(GraphBatch(events=[e1]))
    # Event 9 is not projected yet: the artifact's DERIVED_FROM made a stub of it.
    a = latentdata.episode(A, "chat", "Éloïse at the kiln", [src(e1), src(ev(9))])
    store.write_latents([a])
    assert store.delete_latents(A, [a.artifact_id, "lat-unknown"]) == 1
    assert store.latent(A, a.artifact_id) is None and linked(store, "DERIVED_FROM", A) == []
    stubs = store._read("MATCH (e:Event) WHERE e.tenant = $t RETURN e.event_id AS id", {"t": A})
    assert [r["id"] for r in stubs] == ["chat-1"]
    assert store.delete_latents(A, [a.artifact_id]) == 0


def test_compact_leaves_no_purged_text_in_the_falkordb_files(falkordb_server: Server) -> None:
    client = FalkorDB(port=falkordb_server.port, password=falkordb_server.password)
    graph = FalkorGraphStore(client, f"purge_{uuid.uuid4().hex[:12]}")
    graph.ensure_schema()
    marker = f"Éloïse Martin-Duval déménage à Lisbonne {uuid.uuid4().hex}"
    kept = f"Joao reste à Braga {uuid.uuid4().hex}"
    try:
        graph.write(GraphBatch(events=[ev(1, text=marker), ev(2, text=kept)]))
        data_dir = Path(str(client.connection.config_get("dir")["dir"]))
        assert files_holding(data_dir, (marker,))  # appendfsync always: it is on disk already
        graph.purge_events(A, ["chat-1"])
        graph.compact()
        assert files_holding(data_dir, (marker,)) == {}
        assert files_holding(data_dir, (kept,)) and graph.event(A, "chat-2") is not None
        graph.compact()  # again, with nothing new: still fine
    finally:
        graph.drop()


def test_drop_empties_the_namespace(store: GraphStore) -> None:
    store.write(world(A))
    store.write(world(B))
    store.drop()
    assert store.counts() == {"events": 0, "entities": 0, "facts": 0, "mentions": 0}
    store.drop()  # dropping an empty namespace is fine
    store.ensure_schema()
    store.ensure_schema()  # idempotent
    store.write(world(A))
    assert store.counts(A)["events"] == 6


def test_progress_is_max_merged_per_tenant_and_goes_with_the_namespace(store: GraphStore) -> None:
    e1, e2 = "1764090000000000000", "1764099999000000000"
    assert store.applied_raw(A) == {}
    store.record_progress({(e1, A, 0): 5, (e1, A, 1): 9, (e1, B, 0): 70, (e2, A, 0): 1})
    store.record_progress({(e1, A, 0): 3, (e1, A, 1): 12, (e1, A, 3): 0})
    store.record_progress({})
    assert store.applied_raw(A) == {(e1, 0): 5, (e1, 1): 12, (e1, 3): 0, (e2, 0): 1}
    assert store.applied_raw(B) == {(e1, 0): 70}
    store.record_progress({(e1, B, 0): 2**63 - 1})  # the largest Kafka offset
    assert store.applied_raw(B) == {(e1, 0): 2**63 - 1}
    store.write(world(A))
    # No content: a purge of everything the tenant holds leaves it, and counts ignore it.
    store.purge_events(A, [e.event_id for e in store.recent(A, limit=100)])
    assert store.counts(A) == {"events": 0, "entities": 0, "facts": 0, "mentions": 0}
    assert store.applied_raw(A)[(e1, 1)] == 12
    store.drop()
    assert store.applied_raw(A) == {} and store.applied_raw(B) == {}


# -- offline checks (no server) ---------------------------------------------------------------


def _queries() -> dict[str, str]:
    return {
        name: value
        for name, value in vars(cypher).items()
        if name.isupper() and isinstance(value, str) and re.search(r"\b(MATCH|MERGE)\b", value)
    }


def test_queries_take_values_only_as_params_and_filter_by_tenant() -> None:
    queries = _queries()
    assert len(queries) >= 15
    for name, query in queries.items():
        assert "%" not in query and "{}" not in query, name
        if name != "DELETE_SOME_NODES":  # drops the whole namespace on purpose
            assert "tenant" in query, name
    assert f"*1..{cypher.MAX_CHAIN_RADIUS}]" in cypher.CHAINS
    # one text per radius, walking no further than it (radius 0 walks one step, kept by none)
    assert sorted(cypher.CHAINS_WITHIN) == list(range(cypher.MAX_CHAIN_RADIUS + 1))
    for radius, query in cypher.CHAINS_WITHIN.items():
        bound = max(radius, 1)
        assert query == cypher.CHAINS.replace(f"*1..{cypher.MAX_CHAIN_RADIUS}]", f"*1..{bound}]")
        assert query.count(f"*1..{bound}]") == 2 and "$radius" in query, radius
    assert f"'{cypher.VALUE_KIND}'" in cypher.COUNTS and f"'{cypher.VALUE_KIND}'" in cypher.FACTS


def test_iso_z_is_fixed_width_utc() -> None:
    assert iso_z("2024-03-01T10:00:00Z") == "2024-03-01T10:00:00.000000Z"
    assert iso_z("2024-03-01T12:00:00.5+02:00") == "2024-03-01T10:00:00.500000Z"
    assert iso_z("2024-03-01T10:00:00") == "2024-03-01T10:00:00.000000Z"
    assert iso_z("2024-03-01") == "2024-03-01T00:00:00.000000Z"
    with pytest.raises(ValueError, match="not an ISO 8601"):
        iso_z("yesterday")


def test_neo4j_adapter_shares_the_dialect_and_has_its_own_ddl() -> None:
    shared = {"write", "facts", "neighbourhood", "chain", "chains", "event", "counts"}
    for adapter in (Neo4jGraphStore, FalkorGraphStore):
        assert issubclass(adapter, CypherGraphStore)
        assert not shared & set(vars(adapter)), f"{adapter.__name__} must not redefine reads"
    names = [
        re.match(r"CREATE (?:CONSTRAINT|INDEX) (\w+) IF NOT EXISTS FOR ", s) for s in NEO4J_DDL
    ]
    assert all(names) and len({m.group(1) for m in names if m}) == len(NEO4J_DDL)
    assert any("(n.tenant, n.event_id) IS UNIQUE" in s for s in NEO4J_DDL)
    assert any("(n.tenant, n.key) IS UNIQUE" in s for s in NEO4J_DDL)
    assert all(s.startswith("CREATE INDEX FOR ") for s in FALKOR_DDL)


def test_factory_picks_neo4j_when_configured_without_connecting() -> None:
    settings = Settings(neo4j_uri="neo4j://127.0.0.1:1", neo4j_password="pw", falkordb_url=None)
    graph = open_graph_store(settings, "memstream_v2")
    assert isinstance(graph, Neo4jGraphStore) and graph.namespace == "memstream_v2"
    assert graph.database == "memstream-v2"  # Neo4j database names allow no underscore
    assert [database_name(n) for n in ("neo4j", "Proj.V3", "2x")] == ["neo4j", "proj.v3", "m2x"]
    graph.driver.close()
    with pytest.raises(GraphNotConfiguredError):
        open_graph_store(Settings(neo4j_uri=None, falkordb_url=None), "x")


def test_factory_opens_falkordb_from_its_url(falkordb_server: Server) -> None:
    url = f"redis://127.0.0.1:{falkordb_server.port}"
    password = SecretStr(falkordb_server.password or "")
    settings = Settings(neo4j_uri=None, falkordb_url=url, falkordb_password=password)
    graph = open_graph_store(settings, "factory_probe")
    assert isinstance(graph, FalkorGraphStore)
    try:
        graph.ensure_schema()
        graph.write(GraphBatch(events=[ev(1)]))
        assert graph.counts() == {"events": 1, "entities": 0, "facts": 0, "mentions": 0}
    finally:
        graph.drop()


def test_events_by_ids_and_recent_are_tenant_scoped(store: GraphStore) -> None:
    store.write(GraphBatch(events=[ev(1), ev(2), ev(3), ev(1, stream="other"), ev(4, tenant=B)]))
    got = store.events(A, ["chat-2", "chat-1", "missing", "chat-4"])
    assert sorted(e.event_id for e in got) == ["chat-1", "chat-2"]
    assert store.events(B, ["chat-1"]) == []
    # The count a purge's watch asks: the tenant's events among the ids, duplicates once.
    assert store.events_held(A, ["chat-2", "chat-1", "missing", "chat-4", "chat-1"]) == 2
    assert store.events_held(B, ["chat-1", "chat-4"]) == 1 and store.events_held(A, []) == 0
    store.purge_events(A, ["chat-1"])
    assert store.events_held(A, ["chat-2", "chat-1"]) == 1
    assert [e.event_id for e in store.recent(A, limit=2)] == ["chat-3", "chat-2"]
    assert [e.event_id for e in store.recent(A, limit=5, stream="other")] == ["other-1"]
    assert [e.event_id for e in store.recent(B)] == ["chat-4"]


def test_a_streams_pages_follow_write_order_and_end(store: GraphStore) -> None:
    # Written out of order, and one backdated: the page follows the ledger's seq.
    late = ev(5).model_copy(update={"occurred_at": "2024-01-01T00:00:00Z"})
    store.write(GraphBatch(events=[ev(3), late, ev(1), ev(2), ev(4), ev(9, stream="other")]))
    store.write(GraphBatch(events=[ev(6, tenant=B)]))
    first = store.stream_page(A, "chat", 2)
    assert [e.event_id for e in first] == ["chat-5", "chat-4"]
    assert [e.event_id for e in store.stream_page(A, "chat", 2, before=4)] == ["chat-3", "chat-2"]
    assert [e.event_id for e in store.stream_page(A, "chat", 2, before=2)] == ["chat-1"]
    assert store.stream_page(A, "chat", 5, before=1) == []
    assert [e.event_id for e in store.stream_page(A, "other", 10)] == ["other-9"]
    assert [e.event_id for e in store.stream_page(B, "chat", 10)] == ["chat-6"]
    assert store.stream_page(A, "nobody's", 10) == []


def test_fact_by_id_whatever_its_validity(store: GraphStore) -> None:
    store.write(world())
    history = store.facts(A, include_superseded=True)
    old = next(f for f in history if f.valid_to is not None)
    assert store.fact(A, old.fact_id) == old
    assert store.fact(B, old.fact_id) is None
    assert store.fact(A, "no-such#0") is None


def test_recent_facts_and_direct_mentions_are_bounded(store: GraphStore) -> None:
    store.write(world())
    history = store.facts(A, include_superseded=True)
    subject = history[0].subject_key
    own = [f for f in history if f.subject_key == subject]
    newest = store.recent_facts(A, subject, limit=1)
    assert len(newest) == 1 and newest[0].valid_from == max(f.valid_from for f in own)
    assert sorted(f.fact_id for f in store.recent_facts(A, subject, limit=50)) == sorted(
        f.fact_id for f in own
    )
    assert store.recent_facts(B, subject) == []
    direct = store.mentioning(A, [subject], limit=50)
    assert direct, "the world has events mentioning the subject"
    hop = store.neighbourhood(A, [subject], limit=50)
    assert set(direct) <= set(hop)
    assert store.mentioning(A, [subject], limit=1) == direct[:1]
    assert store.mentioning(B, [subject]) == []


def test_changed_facts_are_the_closed_ones_then_their_successors(store: GraphStore) -> None:
    store.write(world())
    history = store.facts(A, include_superseded=True)
    closed = sorted(
        (f for f in history if f.superseded_by is not None and f.invalidated_at is None),
        key=lambda f: (f.valid_to or "", f.fact_id),
        reverse=True,
    )
    assert closed, "the world has a superseded fact"
    found = store.changed_facts(A, limit=50)
    assert [f.fact_id for f in found[: len(closed)]] == [f.fact_id for f in closed]
    successors = {f.superseded_by for f in closed} - {f.fact_id for f in closed}
    assert {f.fact_id for f in found[len(closed) :]} == successors
    assert all(f.valid_to is None or f.superseded_by for f in found[len(closed) :])
    assert [f.fact_id for f in store.changed_facts(A, limit=1)][:1] == [closed[0].fact_id]
    assert store.changed_facts(B) == []
    # As of the first closed fact's start, only closed facts recorded by then count.
    cut = min(f.recorded_at or f.valid_from for f in closed)
    then = [f.fact_id for f in closed if (f.recorded_at or f.valid_from) <= cut]
    assert then and [f.fact_id for f in store.changed_facts(A, as_of=cut)][: len(then)] == then


# -- as_of reads and entity resolution --------------------------------------------------------


def test_event_reads_stop_at_as_of(store: GraphStore) -> None:
    store.write(world())
    # world(): chat-N happens on 2024-03-0N; marta is mentioned by chat-1 and chat-5.
    cut = "2024-03-03T09:00:00Z"
    assert [e.event_id for e in store.recent(A, limit=10, as_of=cut)] == [
        "chat-3",
        "chat-2",
        "chat-1",
    ]
    assert [e.event_id for e in store.chain(A, "chat-2", radius=5, as_of=cut)] == [
        "chat-1",
        "chat-2",
        "chat-3",
    ]
    assert store.chain(A, "chat-5", radius=1, as_of=cut) == []  # it had not happened yet
    assert store.mentioning(A, ["marta"], as_of=cut) == ["chat-1"]
    assert "chat-5" not in store.neighbourhood(A, ["marta"], as_of=cut)
    assert store.mentioning(A, ["marta"]) == ["chat-5", "chat-1"]


def test_facts_as_of_are_those_recorded_by_then(store: GraphStore) -> None:
    # Recorded in June that Marta had lived in Faro since February: in April memory knew
    # only Lisbon, and that is what a read as of April must give.
    store.write(
        GraphBatch(
            facts=[
                fact("f-lisbon", "marta", "lives_in", JAN, "lisbon"),
                fact("f-faro", "marta", "lives_in", FEB, "faro", recorded_at="2024-06-01T00:00Z"),
            ]
        )
    )
    april = "2024-04-15T00:00:00Z"
    history = store.recent_facts(A, "marta", as_of=april)
    assert ids(history) == ["f-lisbon"]
    assert history[0].recorded_at is not None and history[0].recorded_at.startswith("2024-01")
    assert ids(store.facts(A, subject_key="marta", as_of=april, include_superseded=True)) == [
        "f-lisbon"
    ]
    assert sorted(ids(store.recent_facts(A, "marta"))) == ["f-faro", "f-lisbon"]


def test_entities_carry_their_role_flags_whatever_the_order(store: GraphStore) -> None:
    e1, e2 = ev(1), ev(2)
    first = EntityRecord(tenant=A, key="marta", name="Marta", kind="agent", actor=True, side="user")
    later = EntityRecord(tenant=A, key="marta", name="Marta", kind="name")
    store.write(GraphBatch(events=[e1, e2], entities=[first]))
    store.write(GraphBatch(entities=[later]))  # a plain mention later keeps the flags
    store.write(
        GraphBatch(
            entities=[
                EntityRecord(tenant=A, key="payments service", name="payments service",
                             kind="thing", subject=True),
                EntityRecord(tenant=A, key="assistant", name="assistant", kind="agent",
                             actor=True, side="assistant"),
                EntityRecord(tenant=B, key="other", name="Other", kind="name"),
            ],
            facts=[fact("f-v", "payments service", "region", JAN, value="eu-west")],
        )
    )  # fmt: skip
    got = {e.key: e for e in store.entities(A)}
    assert sorted(got) == ["assistant", "marta", "payments service"]  # no value node, no B
    assert got["marta"].actor and got["marta"].user_side and not got["marta"].subject
    assert got["payments service"].subject and not got["payments service"].actor
    assert got["assistant"].assistant_side and not got["assistant"].user_side
    assert [e.key for e in store.entities(A, limit=1)] == ["assistant"]
    assert [e.key for e in store.entities(B)] == ["other"]


def _feedback(tenant: str, event_id: str, target: str, signal: float, at: str) -> FeedbackRecord:
    return FeedbackRecord(
        tenant=tenant,
        feedback_id=f"{event_id}#0",
        event_id=event_id,
        target_id=target,
        signal=signal,
        certainty=0.5,
        source="retrospective",
        task_id="task-7",
        outcome="failure",
        family=QuestionFamily(operation="lookup", entities=["zoë"], terms=["port"]),
        at=at,
    )


def test_feedback_round_trips_per_target_tenant_and_as_of(store: GraphStore) -> None:
    early = _feedback(A, "fb-1", "ev-1", -1.0, "2024-05-01T10:00:00Z")
    late = _feedback(A, "fb-2", "ev-1", 0.5, "2024-05-03T10:00:00+02:00")
    other = _feedback(B, "fb-3", "ev-1", 1.0, "2024-05-02T10:00:00Z")
    elsewhere = _feedback(A, "fb-4", "ev-2", 1.0, "2024-05-02T10:00:00Z")
    store.write(GraphBatch(feedback=[late, early, other, elsewhere]))
    store.write(GraphBatch(feedback=[early]))  # redelivery writes nothing new
    got = store.feedback(A, ["ev-1", "ev-1", "missing"])
    assert [b.feedback_id for b in got] == ["fb-1#0", "fb-2#0"]  # oldest first, this tenant
    assert got[0] == early.model_copy(update={"at": iso_z(early.at)})
    assert got[1].at == "2024-05-03T08:00:00.000000Z"
    assert [b.feedback_id for b in store.feedback(A, ["ev-1"], as_of="2024-05-02T00:00:00Z")] == [
        "fb-1#0"
    ]
    assert store.feedback(A, []) == [] and store.feedback(B, ["ev-2"]) == []


# -- latent artifacts -------------------------------------------------------------------------

ATELIER = "atelier de céramique"  # a multi-word, accented stream


def linked(store: CypherGraphStore, rel: str, tenant: str) -> list[tuple[str, str]]:
    """(artifact id, far end id) of the tenant's ``rel`` edges out of Latent nodes."""
    far = "coalesce(x.event_id, x.artifact_id)"
    rows = store._read(
        "MATCH (l:Latent)-[r]->(x) WHERE r.tenant = $tenant AND type(r) = $rel "
        f"RETURN l.artifact_id AS a, {far} AS b ORDER BY a, b",
        {"tenant": tenant, "rel": rel},
    )
    return [(str(r["a"]), str(r["b"])) for r in rows]


def test_latents_read_back_exactly_newest_first_and_per_tenant(store: CypherGraphStore) -> None:
    e1, e2, e3 = ev(1, stream=ATELIER), ev(2, stream=ATELIER), ev(3)
    store.write(GraphBatch(events=[e1, e2, e3]))
    early = latentdata.episode(
        A, ATELIER, "Inès glazed three bowls", [src(e1), src(e2)], key_terms=["glaze", "bowls"]
    )
    later = latentdata.episode(
        A, "chat", "Inès booked the kiln", [src(e3)], start=latentdata.T0 + timedelta(days=2)
    )
    pref = latentdata.preference(A, "Inès", {"clay": "grès"}, [src(e3)])
    theirs = latentdata.episode(B, ATELIER, "someone else", [src(ev(1, tenant=B))])
    store.write_latents([early, pref, later, theirs])
    assert store.latent(A, early.artifact_id) == early  # every field, details included
    assert store.latent(B, early.artifact_id) is None
    assert store.latent(A, "lat-000000000000000000000000") is None
    # many at once, in the order asked, unknown ids left out
    missing = "lat-000000000000000000000000"
    asked = [later.artifact_id, missing, early.artifact_id, theirs.artifact_id]
    assert store.latents_by_id(A, asked) == [later, early]
    assert store.latents_by_id(A, []) == []
    # brief: the first source refs only, every other field as stored
    brief = store.latents_by_id(A, [early.artifact_id], refs=1)
    assert brief == [early.model_copy(update={"source_event_refs": [src(e1)]})]
    # newest valid_from first; ties (early and pref start together) by id
    tied = sorted([early.artifact_id, pref.artifact_id])
    assert [a.artifact_id for a in store.latents(A)] == [later.artifact_id, *tied]
    assert store.latents(A, types=["preference_latent"]) == [pref]
    assert store.latents(A, types=["episode_latent"], stream=ATELIER) == [early]
    assert store.latents(A, types=[]) == []
    assert store.latents(A, limit=1) == [later]
    assert store.latents(B) == [theirs]
    # the graph's own event count is untouched by artifacts
    assert store.counts(A)["events"] == 3


def test_a_record_sent_again_with_stale_at_updates_the_artifact(store: CypherGraphStore) -> None:
    e1 = ev(1)
    a = latentdata.preference(A, "Inès", {"tea": "genmaicha"}, [src(e1)])
    store.write(GraphBatch(events=[e1]))
    store.write_latents([a])
    gone = latentdata.stale(a)
    store.write_latents([gone])
    store.write_latents([gone])  # redelivery changes nothing
    assert store.latents(A) == []
    assert store.latents(A, include_stale=True) == [gone]
    assert store.latent(A, a.artifact_id) == gone
    # within one batch the last record of an id counts
    b = latentdata.preference(A, "Zoë", {"tea": "oolong"}, [src(e1)])
    store.write_latents([b, latentdata.stale(b)])
    assert store.latent(A, b.artifact_id) == latentdata.stale(b)
    assert linked(store, "DERIVED_FROM", A) == sorted(
        [(a.artifact_id, e1.event_id), (b.artifact_id, e1.event_id)]
    )


def test_an_artifact_before_its_events_links_them_when_they_arrive(
    store: CypherGraphStore,
) -> None:
    e1, e2 = ev(1, stream=ATELIER), ev(2, stream=ATELIER)
    a = latentdata.episode(A, ATELIER, "Inès fired the kiln", [src(e1), src(e2)])
    store.write_latents([a])
    # the events are not in the graph yet: no event read sees the stubs the links made
    assert store.event(A, e1.event_id) is None and store.events(A, [e1.event_id]) == []
    assert store.recent(A) == [] and store.chain(A, e1.event_id) == []
    assert store.counts(A)["events"] == 0
    store.write(GraphBatch(events=[e1, e2]))
    assert store.event(A, e1.event_id) == e1.model_copy(
        update={"occurred_at": iso_z(e1.occurred_at), "ingested_at": iso_z(e1.ingested_at)}
    )
    assert [e.event_id for e in store.chain(A, e2.event_id)] == [e1.event_id, e2.event_id]
    assert store.counts(A)["events"] == 2
    expected = sorted([(a.artifact_id, e1.event_id), (a.artifact_id, e2.event_id)])
    assert linked(store, "DERIVED_FROM", A) == expected
    # the other order: events first, then an artifact; no second node per event
    e3 = ev(3, stream=ATELIER)
    store.write(GraphBatch(events=[e3]))
    b = latentdata.episode(A, ATELIER, "Inès sold a vase", [src(e3)], group="later")
    store.write_latents([b])
    store.write(GraphBatch(events=[e3]))  # a redelivered entry after the link
    assert store.counts(A)["events"] == 3
    assert (b.artifact_id, e3.event_id) in linked(store, "DERIVED_FROM", A)


def test_supersedes_links_artifacts_whichever_arrives_first(store: CypherGraphStore) -> None:
    e1, e2 = ev(1), ev(2)
    old = latentdata.preference(A, "Inès", {"tea": "sencha"}, [src(e1)])
    new = latentdata.preference(
        A, "Inès", {"tea": "hōjicha"}, [src(e2)], supersedes=[old.artifact_id]
    )
    store.write_latents([new])
    assert store.latents(A) == [new]  # the superseded one is not listed before it arrives
    store.write_latents([latentdata.stale(old)])
    assert linked(store, "SUPERSEDES", A) == [(new.artifact_id, old.artifact_id)]
    assert store.latents(A) == [new]
    assert {a.artifact_id for a in store.latents(A, include_stale=True)} == {
        old.artifact_id,
        new.artifact_id,
    }


def test_facts_from_events_are_those_valid_then(store: CypherGraphStore) -> None:
    store.write(world(A))
    store.write(world(B))
    # chat-1 stated f-lisbon (superseded by f-porto, stated by chat-3)
    assert ids(store.facts_from(A, ["chat-1", "chat-3", "chat-9"])) == ["f-porto"]
    then = store.facts_from(A, ["chat-1", "chat-3"], as_of="2024-03-02T00:00:00Z")
    assert ids(then) == ["f-lisbon"]  # valid then; its valid_to says when that ended
    assert ids(store.facts_from(A, ["chat-5", "chat-5"])) == ["f-age"]
    assert store.facts_from(A, []) == []
    assert all(f.source.tenant == B for f in store.facts_from(B, ["chat-3"]))


def test_purge_scope_covers_mentions_facts_and_named_events(store: GraphStore) -> None:
    key = "ines øverland-quist"
    said = [
        ev(1, text="Lunch with Ines Øverland-Quist."),  # linked by a mention
        ev(2, text="Her passport is in the drawer."),  # the fact below is drawn from it
        ev(3, text="ines øverland-quist prefers window seats"),  # named, never linked
        ev(4, text="Bartholomew fixed the lamp."),
    ]
    other = ev(1, tenant=B, text="Ines Øverland-Quist of tenant B")
    store.write(GraphBatch(events=[*said, other], mentions=[mention(said[0], key)]))
    store.write(GraphBatch(mentions=[mention(other, key)]))
    store.write(GraphBatch(facts=[fact("f-pass", key, "keeps", JAN, "drawer", seq=2)]))
    scope = store.purge_scope(A, key, ["chat-3"])
    assert scope.event_ids == ["chat-1", "chat-2", "chat-3"]
    assert scope.fact_ids == ["f-pass"] and scope.latent_ids == []
    assert store.purge_scope(A, "nobody here", []) == PurgeScope([], [], [])


def test_a_scope_reaches_its_events_their_facts_and_artifacts(store: CypherGraphStore) -> None:
    mine = [ev(1).model_copy(update={"user": "zoë"}), ev(2).model_copy(update={"user": "zoë"})]
    theirs = ev(3).model_copy(update={"user": "Ana Lúcia"})
    desk = ev(1, stream="desk")  # no user
    other = ev(1, tenant=B).model_copy(update={"user": "zoë"})
    store.write(GraphBatch(events=[*mine, theirs, desk, other]))
    store.write(GraphBatch(facts=[fact("f-z", "zoë", "likes", JAN, "tea", seq=2)]))
    built = latentdata.episode(A, "chat", "Zoë and Ana talked", [src(mine[0]), src(theirs)])
    only_desk = latentdata.episode(A, "desk", "desk notes", [src(desk)], group="desk")
    store.write_latents([built, only_desk])
    zoe = Scope(user=["zoë"])
    assert store.scope_events(A, zoe) == ["chat-1", "chat-2"]
    assert store.scope_events(A, Scope(stream=["desk"])) == ["desk-1"]
    assert store.scope_events(A, Scope(user=["nobody"])) == []
    reach = store.derived_from(A, store.scope_events(A, zoe))
    assert reach == PurgeScope(["chat-1", "chat-2"], ["f-z"], [built.artifact_id])
    assert store.derived_from(A, []) == PurgeScope([], [], [])
    # an artifact counts in a scope when one of its sources does
    assert [a.artifact_id for a in store.latents_in(A, zoe)] == [built.artifact_id]
    assert [a.artifact_id for a in store.latents_in(A, Scope(user=["Ana Lúcia"]))] == [
        built.artifact_id
    ]
    assert [a.artifact_id for a in store.latents_in(A, Scope(stream=["desk"]))] == [
        only_desk.artifact_id
    ]
    assert store.latents_in(B, zoe) == []
