"""One contract suite for both ``VectorIndex`` adapters (Qdrant Edge, Qdrant server API)."""

from __future__ import annotations

import math
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from leakscan import files_holding
from memstream.records.projected import VectorPoint
from memstream.settings import Settings
from memstream.vectors.edge import EdgeVectorIndex
from memstream.vectors.edge_shards import EdgeTenantShards
from memstream.vectors.factory import open_vector_index
from memstream.vectors.port import Search, VectorIndex
from memstream.vectors.qdrant_server import QdrantVectorIndex
from memstream.vectors.sparse import (
    AVG_DOC_LEN,
    K1,
    RRF_K,
    B,
    doc_vector,
    point_id,
    prefetch_limit,
    query_vector,
    term_id,
    tokenize,
)
from qdrant_client import QdrantClient

DIM = 8
Opener = Callable[[], VectorIndex]


def unit(i: int) -> list[float]:
    v = [0.0] * DIM
    v[i] = 1.0
    return v


def rand_vec(seed: int) -> list[float]:
    return [float(x) for x in np.random.default_rng(seed).standard_normal(DIM)]


def pt(
    tenant: str,
    key: str,
    text: str,
    dense: list[float],
    *,
    kind: str = "event",
    stream: str = "s1",
    **extra: Any,
) -> VectorPoint:
    payload: dict[str, Any] = {
        "tenant": tenant,
        "kind": kind,
        "stream": stream,
        "seq": 1,
        "hash": "h-" + key,
        "occurred_at": "2024-05-01T10:00:00Z",
        "valid_to": None,
        "entities": [],
        **extra,
    }
    return VectorPoint(point_key=f"{kind}:{tenant}:{key}", dense=dense, text=text, payload=payload)


def keys(hits: list[Any]) -> list[str]:
    return [h.point_key.rsplit(":", 1)[1] for h in hits]


@pytest.fixture(params=["edge", "edge-shards", "server"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens (or re-opens) one adapter on the same storage; closes what it opened."""
    opened: list[VectorIndex] = []

    def open_index() -> VectorIndex:
        index: VectorIndex
        if request.param == "edge":
            index = EdgeVectorIndex(tmp_path / "edge" / "memories", "memories", DIM)
        elif request.param == "edge-shards":  # 4 shards: the tests' tenants share some
            index = EdgeTenantShards(tmp_path / "shards" / "memories", "memories", DIM, shards=4)
        else:
            client = QdrantClient(path=str(tmp_path / "qdrant"))
            index = QdrantVectorIndex(client, "memories", DIM, owns_client=True)
        index.ensure()
        opened.append(index)
        return index

    yield open_index
    for index in opened:
        index.close()


@pytest.fixture
def index(opener: Opener) -> VectorIndex:
    return opener()


# -- writes ------------------------------------------------------------------------------


def test_upsert_is_idempotent_by_point_key(index: VectorIndex) -> None:
    index.upsert([pt("acme", "e1", "first draft of the plan", unit(0), seq=1)])
    final = pt(
        "acme",
        "e1",
        "final version of the plan",
        unit(0),
        seq=2,
        metadata={"lang": "pt", "turn": 7, "urgent": False, "score": 0.25},
        entity_keys=["joão", "ngozi adébáyọ̀"],
    )
    index.upsert([final])
    assert index.count() == 1
    (hit,) = index.query("acme", unit(0), "final version", limit=5)
    assert hit.point_key == "event:acme:e1"
    assert hit.payload == final.payload  # comes back exactly as given, types included
    (recent,) = index.recent("acme", 5)
    assert recent.payload == final.payload
    assert keys(index.query("acme", None, "draft", mode="sparse")) == []


def test_batches_larger_than_one_request(index: VectorIndex) -> None:
    index.upsert([pt("acme", f"e{i}", f"note number {i}", rand_vec(i)) for i in range(1500)])
    assert index.count("acme") == 1500


def test_wrong_dimension_is_rejected(index: VectorIndex) -> None:
    with pytest.raises(ValueError):
        index.upsert([pt("acme", "e1", "text", [1.0, 0.0])])
    with pytest.raises(ValueError):
        index.query("acme", [1.0, 0.0], None, mode="dense")


def test_reopen_keeps_points(opener: Opener) -> None:
    first = opener()
    first.upsert([pt("acme", f"e{i}", f"saved item {i}", rand_vec(i)) for i in range(5)])
    first.close()
    again = opener()
    assert again.count("acme") == 5
    assert keys(again.query("acme", None, "item 3", mode="sparse"))[0] == "e3"


# -- tenants -----------------------------------------------------------------------------


def test_tenant_isolation_and_counts(index: VectorIndex) -> None:
    same_text, same_vec = "the shared secret launch code", unit(2)
    index.upsert([pt("a", f"e{i}", same_text, same_vec) for i in range(3)])
    index.upsert([pt("b", f"e{i}", same_text, same_vec) for i in range(4)])
    assert (index.count("a"), index.count("b"), index.count("nobody"), index.count()) == (
        3,
        4,
        0,
        7,
    )
    for mode in ("hybrid", "dense", "sparse"):
        hits = index.query("a", same_vec, same_text, limit=20, mode=mode)
        assert len(hits) == 3
        assert all(h.payload["tenant"] == "a" and h.point_key.startswith("event:a:") for h in hits)
    assert index.query("c", same_vec, same_text, limit=20) == []


def test_idf_is_scoped_to_the_querying_tenant(index: VectorIndex) -> None:
    """Another tenant full of 'zeppelin' does not make the word common for tenant a."""
    index.upsert([pt("a", "common", "meeting meeting", unit(0))])
    index.upsert([pt("a", f"m{i}", f"meeting room {i}", unit(1)) for i in range(4)])
    index.upsert([pt("a", "rare", "zeppelin hangar", unit(2))])
    index.upsert([pt("b", f"z{i}", "zeppelin zeppelin", unit(3)) for i in range(20)])
    assert keys(index.query("a", None, "meeting zeppelin", mode="sparse"))[0] == "rare"


# -- lanes -------------------------------------------------------------------------------


def test_sparse_lane_prefers_rare_terms(index: VectorIndex) -> None:
    """Without IDF 'common' wins (higher tf); with IDF the rare 'zeppelin' dominates."""
    index.upsert([pt("acme", "common", "meeting meeting", unit(0))])
    index.upsert([pt("acme", f"m{i}", f"meeting agenda item {i}", unit(1)) for i in range(4)])
    index.upsert([pt("acme", "rare", "zeppelin hangar", unit(2))])
    index.upsert([pt("acme", "none", "quarterly budget review", unit(3))])
    hits = index.query("acme", None, "meeting zeppelin", limit=10, mode="sparse")
    assert keys(hits)[:2] == ["rare", "common"]
    assert "none" not in keys(hits)  # the sparse lane only returns matching documents
    assert index.query("acme", None, "the of and", mode="sparse") == []  # stopwords only


def test_related_words_find_what_the_question_words_do_not(index: VectorIndex) -> None:
    index.upsert([pt("acme", "said", "the wedding cake was lemon", unit(0))])
    index.upsert([pt("acme", "near", "her marriage in june", unit(1))])
    index.upsert([pt("acme", "both", "wedding and marriage", unit(2), stream="s2")])
    index.upsert([pt("other", "near", "marriage counselling", unit(1))])
    assert keys(index.query("acme", None, "wedding", mode="sparse")) == ["both", "said"]
    related = {"marriage": 0.2}
    hits = index.query("acme", None, "wedding", mode="sparse", related=related)
    assert keys(hits) == ["both", "said", "near"]  # a question word outweighs a related one
    hybrid = index.query("acme", unit(3), "wedding", related=related)
    assert set(keys(hybrid)) == {"both", "said", "near"}
    searches = [Search(10, "sparse"), Search(10, "sparse", streams=["s2"])]
    got = index.query_batch("acme", None, "wedding", searches, related=related)
    assert [keys(h) for h in got] == [["both", "said", "near"], ["both"]]
    with pytest.raises(ValueError, match="marriage"):
        index.query("acme", None, "wedding", mode="sparse", related={"marriage": 2.0})


def test_dense_lane_ranks_by_cosine(index: VectorIndex) -> None:
    index.upsert(
        [
            pt("acme", "same", "a", [5.0] + [0.0] * (DIM - 1)),  # magnitude does not matter
            pt("acme", "near", "b", [1.0, 1.0] + [0.0] * (DIM - 2)),
            pt("acme", "far", "c", [1.0, 2.0] + [0.0] * (DIM - 2)),
            pt("acme", "orth", "d", unit(1)),
            pt("acme", "opposite", "e", [-1.0] + [0.0] * (DIM - 1)),
        ]
    )
    hits = index.query("acme", unit(0), "ignored in dense mode", limit=5, mode="dense")
    assert keys(hits) == ["same", "near", "far", "orth", "opposite"]
    expected = [1.0, 1 / math.sqrt(2), 1 / math.sqrt(5), 0.0, -1.0]
    assert [h.score for h in hits] == pytest.approx(expected, abs=1e-4)


def test_hybrid_is_rrf_of_both_lanes(index: VectorIndex) -> None:
    """Union of the lanes, ranked by sum 1/(k+rank); includes single-lane finds."""
    q = unit(0)
    filler = [
        pt("acme", f"f{i}", f"weekly status {i}", [0.5, 1.0, *rand_vec(i)[2:]]) for i in range(45)
    ]
    index.upsert(
        [
            *filler,
            pt("acme", "dense_only", "lunch order", [1.0, 0.05] + [0.0] * (DIM - 2)),
            pt("acme", "both", "telescope calibration notes", [1.0, 0.3] + [0.0] * (DIM - 2)),
            pt("acme", "sparse_only", "telescope calibration", [-1.0] + [0.0] * (DIM - 1)),
        ]
    )
    text, limit = "telescope calibration", 3
    pool = prefetch_limit(limit)
    dense_lane = keys(index.query("acme", q, None, limit=pool, mode="dense"))
    sparse_lane = keys(index.query("acme", None, text, limit=pool, mode="sparse"))
    assert "sparse_only" not in dense_lane and "dense_only" not in sparse_lane
    expected: dict[str, float] = {}
    for lane in (dense_lane, sparse_lane):
        for rank, key in enumerate(lane):
            expected[key] = expected.get(key, 0.0) + 1.0 / (RRF_K + rank)

    hits = index.query("acme", q, text, limit=limit)
    assert keys(hits)[0] == "both"
    assert set(keys(hits)) == {"both", "dense_only", "sparse_only"}
    for hit in hits:
        assert hit.score == pytest.approx(expected[keys([hit])[0]], rel=1e-3)
    # with one lane's input missing, hybrid is that lane alone
    assert keys(index.query("acme", None, text, limit=2)) == sparse_lane[:2]
    assert keys(index.query("acme", q, None, limit=2)) == dense_lane[:2]
    assert index.query("acme", None, None) == []
    with pytest.raises(ValueError):
        index.query("acme", None, text, mode="dense")
    with pytest.raises(ValueError):
        index.query("acme", q, None, mode="sparse")


# -- filters, deletes --------------------------------------------------------------------


def test_kinds_and_streams_filters(index: VectorIndex) -> None:
    index.upsert(
        [
            pt("acme", "e1", "coffee order", unit(0), kind="event", stream="s1"),
            pt("acme", "e2", "coffee order", unit(0), kind="event", stream="s2"),
            pt("acme", "f1", "coffee order", unit(0), kind="fact", stream="s1"),
            pt("acme", "l1", "coffee order", unit(0), kind="latent", stream="s2"),
        ]
    )
    q = ("acme", unit(0), "coffee")
    for mode in ("hybrid", "dense", "sparse"):
        assert sorted(keys(index.query(*q, mode=mode, kinds=["fact"]))) == ["f1"]
        assert sorted(keys(index.query(*q, mode=mode, kinds=["fact", "latent"]))) == ["f1", "l1"]
        assert sorted(keys(index.query(*q, mode=mode, streams=["s2"]))) == ["e2", "l1"]
        both = index.query(*q, mode=mode, kinds=["event"], streams=["s1"])
        assert keys(both) == ["e1"]
        assert index.query(*q, mode=mode, kinds=[]) == []


def test_altitudes_filter_and_counts_per_kind(index: VectorIndex) -> None:
    index.upsert(
        [
            pt("a", "e1", "glazing bowls at the atelier", unit(0), kind="event"),
            pt(
                "a",
                "ep1",
                "glazing bowls at the atelier",
                unit(0),
                kind="latent",
                altitude="episode",
            ),
            pt(
                "a",
                "pr1",
                "glazing bowls at the atelier",
                unit(0),
                kind="latent",
                altitude="latent",
            ),
            pt(
                "b",
                "ep2",
                "glazing bowls at the atelier",
                unit(0),
                kind="latent",
                altitude="episode",
            ),
        ]
    )
    q = ("a", unit(0), "glazing bowls")
    for mode in ("hybrid", "dense", "sparse"):
        assert keys(index.query(*q, mode=mode, altitudes=["episode"])) == ["ep1"]
        got = index.query(*q, mode=mode, kinds=["latent"], altitudes=["episode", "latent"])
        assert sorted(keys(got)) == ["ep1", "pr1"]
        assert index.query(*q, mode=mode, kinds=["event"], altitudes=["episode"]) == []
        assert index.query(*q, mode=mode, altitudes=[]) == []
    assert index.count() == 4 and index.count("a") == 3
    assert index.count(kinds=["event"]) == 1 and index.count("a", kinds=["latent"]) == 2
    assert index.count("b", kinds=["event"]) == 0 and index.count(kinds=[]) == 0


def test_delete_by_key_removes_only_those_points(index: VectorIndex) -> None:
    index.upsert([pt("a", "e1", "one", unit(0)), pt("a", "e2", "two", unit(1))])
    index.upsert([pt("b", "e1", "one", unit(0))])
    index.delete(["event:a:e1", "event:a:missing"])
    index.delete([])
    assert keys(index.query("a", unit(0), "one two", limit=10)) == ["e2"]
    assert index.count("b") == 1
    index.delete(["event:a:e1"])  # gone already: nothing happens
    assert index.count() == 2


def test_actors_filter_keeps_points_said_by_them(index: VectorIndex) -> None:
    index.upsert(
        [
            pt("a", "e1", "kayak trip plans", unit(0), actor_key="noor"),
            pt("a", "e2", "kayak trip plans", unit(0), actor_key="idris"),
            pt("a", "e3", "kayak trip plans", unit(0), entities=["noor"]),
            pt("b", "e4", "kayak trip plans", unit(0), actor_key="noor"),
        ]
    )
    q = ("a", unit(0), "kayak")
    for mode in ("hybrid", "dense", "sparse"):
        assert keys(index.query(*q, mode=mode, actors=["noor"])) == ["e1"]
        got = index.query(*q, mode=mode, actors=["noor", "idris"])
        assert sorted(keys(got)) == ["e1", "e2"]
        assert index.query(*q, mode=mode, actors=["nobody"]) == []
        assert index.query(*q, mode=mode, actors=[]) == []


def test_entities_filter_keeps_points_naming_any_of_them(index: VectorIndex) -> None:
    index.upsert(
        [
            pt("a", "e1", "kayak trip plans", unit(0), entity_keys=["noor", "lake como"]),
            pt("a", "e2", "kayak trip plans", unit(0), entity_keys=["idris"]),
            pt("a", "e3", "kayak trip plans", unit(0), entity_keys=[]),
            pt("b", "e4", "kayak trip plans", unit(0), entity_keys=["noor"]),
        ]
    )
    q = ("a", unit(0), "kayak")
    for mode in ("hybrid", "dense", "sparse"):
        assert keys(index.query(*q, mode=mode, entities=["lake como"])) == ["e1"]
        got = index.query(*q, mode=mode, entities=["noor", "idris"])
        assert sorted(keys(got)) == ["e1", "e2"]
        assert index.query(*q, mode=mode, entities=["nobody"]) == []
        assert index.query(*q, mode=mode, entities=[]) == []


def test_kind_with_person_filters_takes_any_key_text(index: VectorIndex) -> None:
    """Checkout's lanes: kind plus a speaker or an entity, with keys as resolution makes them
    (lower case, accents and combining marks kept, several words, "/" and ":" inside)."""
    amara, user, team = "amara ọ̀kàfor-lindqvist", "user", "r&d/ops: east"
    index.upsert(
        [
            pt("a", "e1", "kiln schedule", unit(0), actor_key=amara, entity_keys=[team]),
            pt("a", "e2", "kiln schedule", unit(0), actor_key=user, entity_keys=[amara]),
            pt("a", "e3", "kiln schedule", unit(0), actor_key="user 2", entity_keys=["user"]),
            pt("a", "l1", "kiln schedule", unit(0), kind="latent", entity_keys=[amara]),
            pt("b", "e4", "kiln schedule", unit(0), actor_key=amara, entity_keys=[amara]),
        ]
    )
    q = ("a", unit(0), "kiln")
    for mode in ("hybrid", "dense", "sparse"):
        assert keys(index.query(*q, mode=mode, kinds=["event"], actors=[amara])) == ["e1"]
        assert keys(index.query(*q, mode=mode, kinds=["event"], actors=[user])) == ["e2"]
        assert keys(index.query(*q, mode=mode, kinds=["event"], entities=[amara])) == ["e2"]
        assert keys(index.query(*q, mode=mode, kinds=["event"], entities=[team])) == ["e1"]
        assert keys(index.query(*q, mode=mode, kinds=["event"], entities=["user"])) == ["e3"]
        got = index.query(*q, mode=mode, kinds=["event", "latent"], entities=[amara])
        assert sorted(keys(got)) == ["e2", "l1"]
        both = index.query(*q, mode=mode, kinds=["event"], actors=[user], entities=[amara])
        assert keys(both) == ["e2"]
        assert index.query(*q, mode=mode, kinds=["event"], actors=[user], entities=[team]) == []
        assert index.query(*q, mode=mode, kinds=["event"], actors=["ops"]) == []


def test_a_batch_answers_each_search_as_query_would(index: VectorIndex) -> None:
    index.upsert(
        [
            pt("a", "e1", "kayak trip to lake como", unit(0), actor_key="noor",
               entity_keys=["lake como"]),
            pt("a", "e2", "kayak rental prices", unit(1), actor_key="idris"),
            pt("a", "e3", "weekend kayak trip", rand_vec(3), stream="s2",
               occurred_at="2024-07-01T00:00:00Z"),
            pt("a", "l1", "a summer of kayak trips", unit(0), kind="latent", altitude="episode"),
            pt("b", "e4", "kayak trip", unit(0), actor_key="noor"),
        ]
    )  # fmt: skip
    searches = [
        Search(10, "dense", kinds=["event"]),
        Search(10, "dense", kinds=["event"], actors=["noor"]),
        Search(2, "hybrid", kinds=["event"], entities=["lake como"]),
        Search(5, "hybrid", kinds=["latent"]),
        Search(5, "hybrid", streams=["s2"]),
        Search(5, "dense", actors=[]),  # an empty filter matches nothing
        Search(0, "sparse"),
    ]
    cut = datetime(2024, 6, 1, tzinfo=UTC)
    for as_of in (None, cut):
        got = index.query_batch("a", unit(0), "kayak trip", searches, as_of=as_of)
        assert len(got) == len(searches)
        for search, hits in zip(searches, got, strict=True):
            alone = index.query(
                "a", unit(0), "kayak trip", limit=search.limit, mode=search.mode,
                kinds=search.kinds, streams=search.streams, actors=search.actors,
                entities=search.entities, as_of=as_of,
            )  # fmt: skip
            assert keys(hits) == keys(alone), search
    got = index.query_batch("a", unit(0), "kayak trip", searches)
    assert keys(got[1]) == ["e1"] and keys(got[3]) == ["l1"] and got[5] == got[6] == []
    assert keys(index.query_batch("a", unit(0), "kayak", searches, as_of=cut)[4]) == []
    assert index.query_batch("a", unit(0), "kayak", []) == []
    with pytest.raises(ValueError, match="dense"):
        index.query_batch("a", None, "kayak", [Search(3, "dense")])


def test_a_point_several_searches_find_is_each_ones_own_hit(index: VectorIndex) -> None:
    """The lanes of a checkout overlap: a point found by several searches of one batch comes
    back in each with that search's score and the payload a lone query gives, and a change
    to one hit's payload shows in no other."""
    index.upsert(
        [
            pt("a", "e1", "Noor booked the kayak trip", unit(0), actor_key="noor",
               entity_keys=["noor", "lake como"], metadata={"turn": 3, "tags": ["trip"]}),
            pt("a", "e2", "kayak rental prices in Como", rand_vec(2), actor_key="idris",
               entity_keys=["lake como"]),
            pt("a", "e3", "Ça va, Noor ?", rand_vec(3), actor_key="émile", entity_keys=["noor"]),
        ]
    )  # fmt: skip
    searches = [
        Search(10, mode, kinds=["event"], actors=actors, entities=entities)
        for mode in ("dense", "sparse", "hybrid")
        for actors, entities in ((None, None), (["noor"], None), (None, ["noor", "lake como"]))
    ]
    got = index.query_batch("a", unit(0), "noor kayak trip", searches)
    for search, hits in zip(searches, got, strict=True):
        alone = index.query(
            "a", unit(0), "noor kayak trip", limit=search.limit, mode=search.mode,
            kinds=search.kinds, actors=search.actors, entities=search.entities,
        )  # fmt: skip
        assert [(h.point_key, h.payload) for h in hits] == [
            (h.point_key, h.payload) for h in alone
        ], search
        # the engine's batched scan may round the last bit differently
        assert [h.score for h in hits] == pytest.approx([h.score for h in alone]), search
    e1 = [h for hits in got for h in hits if h.point_key.endswith(":e1")]
    assert len(e1) == len(searches)  # every search finds it
    assert len({id(h.payload) for h in e1}) == len(e1)
    e1[0].payload["actor_key"] = "changed"
    assert all(h.payload["actor_key"] == "noor" for h in e1[1:])


def test_recent_reads_the_newest_events_first(index: VectorIndex) -> None:
    index.upsert(
        [
            pt("a", "e1", "first", rand_vec(1), occurred_at="2024-05-01T10:00:00Z"),
            pt("a", "e2", "second", rand_vec(2), occurred_at="2024-05-01T10:00:00.500000Z"),
            pt("a", "e3", "third", rand_vec(3), stream="s2",
               occurred_at="2024-06-01T08:00:00+02:00"),
            pt("a", "e4", "fourth", rand_vec(4), occurred_at="2024-07-01T00:00:00Z"),
            pt("a", "l1", "newest latent", rand_vec(5), kind="latent",
               occurred_at="2024-08-01T00:00:00Z"),
            pt("b", "e5", "other tenant", rand_vec(6), occurred_at="2024-09-01T00:00:00Z"),
        ]
    )  # fmt: skip
    assert keys(index.recent("a", 10)) == ["e4", "e3", "e2", "e1"]
    assert keys(index.recent("a", 2)) == ["e4", "e3"]
    assert keys(index.recent("a", 10, streams=["s1"])) == ["e4", "e2", "e1"]
    cut = datetime(2024, 6, 1, 6, 0, tzinfo=UTC)  # e3 happened at 06:00 UTC
    assert keys(index.recent("a", 10, as_of=cut)) == ["e3", "e2", "e1"]
    assert index.recent("a", 10, streams=[]) == [] and index.recent("a", 0) == []
    assert index.recent("nobody", 10) == []
    [hit] = index.recent("b", 10)
    assert hit.payload["tenant"] == "b" and "point_key" not in hit.payload


def test_at_reads_event_points_by_position_whatever_their_time(index: VectorIndex) -> None:
    index.upsert(
        [
            pt("a", "e1", "first", rand_vec(1), seq=1),
            pt("a", "e2", "second", rand_vec(2), seq=2),  # the same time as e1
            pt("a", "e3", "third", rand_vec(3), seq=3, occurred_at="2020-01-01T00:00:00Z"),
            pt("a", "x2", "other stream", rand_vec(4), seq=2, stream="s2"),
            pt("a", "l2", "a latent", rand_vec(5), seq=2, kind="latent"),
            pt("b", "e9", "other tenant", rand_vec(6), seq=2),
        ]
    )  # fmt: skip
    assert keys(index.at("a", "s1", [2])) == ["e2"]
    assert sorted(keys(index.at("a", "s1", [3, 1, 3, 7]))) == ["e1", "e3"]
    assert keys(index.at("a", "s2", [2])) == ["x2"]
    assert index.at("a", "s1", []) == [] and index.at("c", "s1", [1]) == []
    [hit] = index.at("b", "s1", [2])
    assert hit.payload["seq"] == 2 and "point_key" not in hit.payload


def test_keyed_by_finds_points_whose_key_copies_an_event(index: VectorIndex) -> None:
    index.upsert(
        [
            pt("a", "e1", "asked", rand_vec(1), event_id="e1"),
            pt("a", "e2", "answer", rand_vec(2), event_id="e2", key_of=["e1"]),
            pt("a", "e3", "plain", rand_vec(3), event_id="e3"),
            pt("b", "e2", "other tenant", rand_vec(4), event_id="e2", key_of=["e1"]),
        ]
    )
    assert keys(index.keyed_by("a", ["e1"])) == ["e2"]
    assert index.keyed_by("a", ["e3"]) == [] and index.keyed_by("a", []) == []
    assert index.holding("a", ["e1"]) == 2  # its own point and the key that copies it
    index.upsert([pt("a", "e2", "answer", rand_vec(2), event_id="e2")])  # keyed again
    assert index.keyed_by("a", ["e1"]) == [] and index.holding("a", ["e1"]) == 1


def test_as_of_keeps_points_that_had_happened_by_then(index: VectorIndex) -> None:
    index.upsert(
        [
            pt("a", "e1", "kayak trip", unit(0), occurred_at="2024-05-01T10:00:00Z"),
            pt("a", "e2", "kayak trip", unit(0), occurred_at="2024-05-01T10:00:00.500000Z"),
            pt("a", "e3", "kayak trip", unit(0), occurred_at="2024-07-01T00:00:00+00:00"),
        ]
    )
    q = ("a", unit(0), "kayak")
    cut = datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=UTC)
    for mode in ("hybrid", "dense", "sparse"):
        assert sorted(keys(index.query(*q, mode=mode, as_of=cut))) == ["e1", "e2"]
        early = index.query(*q, mode=mode, as_of=datetime(2024, 1, 1, tzinfo=UTC))
        assert early == []
        assert sorted(keys(index.query(*q, mode=mode))) == ["e1", "e2", "e3"]
    with pytest.raises(ValueError, match="timezone"):
        index.query(*q, as_of=datetime(2024, 1, 1))


def test_delete_where_matches_values_and_list_members(index: VectorIndex) -> None:
    index.upsert(
        [
            pt("a", "e1", "alice and bob", unit(0), entities=["alice", "bob"]),
            pt("a", "e2", "alice alone", unit(0), entities=["alice"]),
            pt("a", "e3", "bob alone", unit(0), entities=["bob"], stream="s9"),
            pt("b", "e1", "alice elsewhere", unit(0), entities=["alice"]),
        ]
    )
    assert index.delete_where("a", "entities", "alice") == 2
    assert keys(index.query("a", unit(0), "alice bob", limit=10)) == ["e3"]
    assert index.count("b") == 1  # other tenants untouched
    assert index.delete_where("a", "entities", "alice") == 0
    assert index.delete_where("a", "stream", "s9") == 1
    assert index.count("a") == 0


def test_drop_removes_everything_and_can_be_recreated(index: VectorIndex) -> None:
    index.upsert([pt("a", "e1", "to be dropped", unit(0)), pt("b", "e1", "me too", unit(1))])
    index.drop()
    assert index.count() == 0
    assert index.query("a", unit(0), "dropped") == []
    assert index.delete_where("a", "kind", "event") == 0
    index.upsert([pt("a", "e2", "fresh start", unit(0))])
    assert index.count() == 1


# -- sparse encoding ---------------------------------------------------------------------


def test_tokenize_lowercases_drops_stopwords_and_folds_plurals() -> None:
    assert tokenize("The Tickets for the CITIES, don't be late! Café_menu 42 x") == [
        "ticket",
        "city",
        "late",
        "café_menu",
        "42",
    ]
    assert tokenize("boxes classes status analysis") == ["box", "class", "status", "analysis"]
    assert tokenize("") == []


def test_term_ids_and_point_ids_are_stable() -> None:
    assert term_id("ticket") == term_id("ticket") != term_id("tickets")
    assert 0 <= term_id("ticket") < 2**31
    assert (
        term_id("ticket")
        == int.from_bytes(__import__("hashlib").blake2b(b"ticket", digest_size=4).digest(), "big")
        & 0x7FFFFFFF
    )
    pid = point_id("event:acme:e1")
    assert pid == point_id("event:acme:e1") != point_id("event:acme:e2")
    assert uuid.UUID(pid).version == 5
    assert pid == "b4f998e7-7a75-5313-af16-7a509ffee7bc"  # stored ids must never change


def test_bm25_document_and_query_weights() -> None:
    vec = doc_vector("alpha alpha beta")
    norm = K1 * (1 - B + B * 3 / AVG_DOC_LEN)
    want = {
        term_id("alpha"): 2 * (K1 + 1) / (2 + norm),
        term_id("beta"): 1 * (K1 + 1) / (1 + norm),
    }
    assert vec.indices == sorted(want)
    assert vec.values == pytest.approx([want[i] for i in vec.indices])
    longer = doc_vector("alpha " + "filler " * 40)
    assert (
        dict(zip(longer.indices, longer.values, strict=True))[term_id("alpha")]
        < want[term_id("beta")]
    )  # longer documents weigh a single occurrence less
    q = query_vector("alpha beta alpha the")
    assert sorted(q.indices) == sorted([term_id("alpha"), term_id("beta")])
    assert q.values == [1.0, 1.0]
    assert not doc_vector("the and of") and not query_vector("")


# -- Edge specifics ----------------------------------------------------------------------


def edge_layout(layout: str, path: Path) -> EdgeVectorIndex | EdgeTenantShards:
    """Qdrant Edge as one shard, or in shards by tenant (4: "acme" and "globex" apart)."""
    if layout == "one":
        return EdgeVectorIndex(path, "memories", DIM)
    return EdgeTenantShards(path, "memories", DIM, shards=4)


EDGE_LAYOUTS = pytest.mark.parametrize("layout", ["one", "shards"])


@EDGE_LAYOUTS
def test_edge_is_safe_for_one_writer_and_concurrent_readers(tmp_path: Path, layout: str) -> None:
    index = edge_layout(layout, tmp_path / "shard")
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            while not done.is_set():
                for hit in index.query("acme", unit(1), "record", limit=5):
                    assert hit.payload["tenant"] == "acme"
                index.count("acme")
        except BaseException as exc:  # reported below
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in readers:
        thread.start()
    try:
        for start in range(0, 2000, 100):
            batch = [
                pt("acme", f"e{i}", f"record {i}", rand_vec(i)) for i in range(start, start + 100)
            ]
            index.upsert(batch)
            if start == 1000:
                index.optimize()
        assert index.delete_where("acme", "hash", "h-e7") == 1
    finally:
        done.set()
        for thread in readers:
            thread.join()
    assert errors == []
    assert index.count("acme") == 1999
    index.close()
    with pytest.raises(RuntimeError):
        index.count()


def test_factory_picks_edge_shards_without_qdrant_url(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, vector_shards=8)
    index = open_vector_index(settings, "events-v1", DIM)
    assert isinstance(index, EdgeTenantShards)
    assert index.path == tmp_path / "vectors" / "events-v1" and index.shards == 8
    index.upsert([pt("acme", "e1", "hello", unit(0))])
    assert index.count() == 1
    index.close()


def test_factory_keeps_a_collection_made_as_one_shard(tmp_path: Path) -> None:
    """A collection written before shards existed is read as it lies, not hidden behind an
    empty sharded one."""
    one = EdgeVectorIndex(tmp_path / "vectors" / "events-v1", "events-v1", DIM)
    one.upsert([pt("acme", "e1", "hello", unit(0))])
    one.close()
    index = open_vector_index(Settings(data_dir=tmp_path), "events-v1", DIM)
    assert isinstance(index, EdgeVectorIndex)
    assert keys(index.query("acme", unit(0), "hello")) == ["e1"]
    index.close()


# -- purge -------------------------------------------------------------------------------


def purge_world(index: VectorIndex, marker: str) -> None:
    """Éloïse's events e1-e2 and an artifact derived from e1 and e3; Joao's e3; e1 again
    under another tenant. ``said`` stands for the text payloads carry."""
    index.upsert(
        [
            pt("acme", "e1", marker, unit(0), event_id="e1", said=marker),
            pt("acme", "e2", "Éloïse Martin-Duval likes celadon", unit(1), event_id="e2"),
            pt(
                "acme",
                "e3",
                "Joao reste à Braga",
                unit(2),
                event_id="e3",
                said="Joao reste à Braga",
            ),
            pt(
                "acme",
                "lat-1",
                marker,
                unit(0),
                kind="latent",
                source_ids=["e1", "e3"],
                said=marker,
            ),
            pt("acme", "lat-2", "Joao in Braga", unit(2), kind="latent", source_ids=["e3"]),
            pt("globex", "e1", marker, unit(0), event_id="e1", said=marker),
        ]
    )


def test_purge_events_removes_their_points_and_derived_latents(index: VectorIndex) -> None:
    purge_world(index, "Éloïse Martin-Duval déménage à Lisbonne")
    assert index.holding("acme", ["e1", "e2", "never"]) == 3
    assert index.holding("acme", ["e3"]) == 3 and index.holding("acme", []) == 0
    assert index.purge_events("acme", ["e1", "e2", "never"]) == {"points": 2, "latents": 1}
    index.compact()
    assert index.holding("acme", ["e1", "e2"]) == 0 and index.holding("globex", ["e1"]) == 1
    assert sorted(keys(index.query("acme", unit(0), "Éloïse", limit=10))) == ["e3", "lat-2"]
    assert index.count("globex") == 1
    assert index.purge_events("acme", ["e1", "e2"]) == {"points": 0, "latents": 0}
    assert index.purge_events("acme", []) == {"points": 0, "latents": 0}
    index.compact()
    assert sorted(keys(index.query("acme", unit(2), "Braga", limit=10))) == ["e3", "lat-2"]


@EDGE_LAYOUTS
def test_edge_compact_leaves_no_purged_text_in_the_shard(tmp_path: Path, layout: str) -> None:
    root = tmp_path / "edge"
    index = edge_layout(layout, root / "memories")
    marker = f"Éloïse Martin-Duval déménage à Lisbonne {uuid.uuid4().hex}"
    try:
        index.ensure()
        purge_world(index, marker)
        index.flush()
        assert files_holding(root, (marker,))
        index.purge_events("acme", ["e1", "e2"])
        index.purge_events("globex", ["e1"])
        # nothing reads them any more, but their text is still in the files: not done yet
        assert index.count("globex") == 0 and files_holding(root, (marker,))
        assert index.holding("acme", ["e1", "e2", "e3"]) == 4  # e3 and lat-2 live, 2 owed
        assert index.holding("globex", ["e1"]) == 1 and index.holding("acme", ["e9"]) == 0
        index.compact()
        assert files_holding(root, (marker,)) == {}
        assert index.holding("acme", ["e1", "e2"]) == 0 and index.holding("globex", ["e1"]) == 0
        assert files_holding(root, ("Joao reste à Braga",))
        index.upsert([pt("acme", "e4", "after the compaction", unit(3))])
        assert index.count("acme") == 3
    finally:
        index.close()
    reopened = edge_layout(layout, root / "memories")
    try:
        assert reopened.count("acme") == 3 and reopened.count("globex") == 0
    finally:
        reopened.close()


def test_edge_shard_written_before_scopes_filters_kinds_until_compacted(tmp_path: Path) -> None:
    """Points stored without a scope (a shard from before scopes existed) still answer kind
    filters; a compaction gives them scopes, with the same answers."""
    import qdrant_edge as qe
    from memstream.vectors.edge import DENSE

    path = tmp_path / "edge" / "memories"
    path.mkdir(parents=True)
    old = qe.EdgeShard.create(str(path), EdgeVectorIndex(path, "memories", DIM)._config())
    old_points = [
        pt("acme", "e1", "kiln firing schedule", unit(0), kind="event", actor_key="noor"),
        pt("acme", "l1", "kiln firing schedule", unit(0), kind="latent"),
        pt("zenith", "e2", "kiln firing schedule", unit(0), kind="event", actor_key="noor"),
    ]
    raw = [
        qe.Point(point_id(p.point_key), {DENSE: p.dense}, {**p.payload, "point_key": p.point_key})
        for p in old_points
    ]
    old.update(qe.UpdateOperation.upsert_points(raw))
    old.flush()
    old.close()

    index = EdgeVectorIndex(path, "memories", DIM)
    try:
        later = pt("acme", "e3", "kiln firing schedule", unit(1), kind="event", actor_key="noor")
        index.upsert([later])

        def answers() -> list[list[str]]:
            searches = [
                Search(10, "dense", kinds=["event"]),
                Search(10, "dense", kinds=["latent"]),
                Search(10, "dense", kinds=["event"], actors=["noor"]),
            ]
            found = index.query_batch("acme", unit(0), "kiln", searches)
            recent = index.recent("acme", 10)
            return [sorted(keys(hits)) for hits in [*found, recent]]

        expected = [["e1", "e3"], ["l1"], ["e1", "e3"], ["e1", "e3"]]
        assert answers() == expected
        index.compact()
        assert answers() == expected
        hit = index.query("acme", unit(0), None, mode="dense", kinds=["event"])[0]
        assert hit.payload["tenant"] == "acme"
        assert not {"scope", "scoped_keys", "scope_keys"} & hit.payload.keys()
    finally:
        index.close()


def test_edge_shard_with_persons_keys_only_filters_a_user_until_compacted(
    tmp_path: Path,
) -> None:
    """A shard whose points carry the persons' scoped keys only (before users, agents and
    streams joined them) answers a user's scope on the point's own field, then, compacted,
    on the joined key: the same answers."""
    import qdrant_edge as qe
    from memstream.vectors.edge import DENSE

    path = tmp_path / "edge" / "memories"
    path.mkdir(parents=True)
    old = qe.EdgeShard.create(str(path), EdgeVectorIndex(path, "memories", DIM)._config())
    for name in ("scope", "scoped_keys"):
        old.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
    made = [("e1", "ana"), ("e2", "bo"), ("e3", "ana")]
    raw = []
    for eid, user in made:
        p = pt("acme", eid, "kiln firing schedule", unit(0), kind="event", actor_key="noor")
        payload = {**p.payload, "user": user, "point_key": p.point_key, "scope": "acme/event"}
        payload["scoped_keys"] = ["acme/event/actor_key:noor"]
        raw.append(qe.Point(point_id(p.point_key), {DENSE: p.dense}, payload))
    old.update(qe.UpdateOperation.upsert_points(raw))
    old.flush()
    old.close()

    index = EdgeVectorIndex(path, "memories", DIM)
    try:
        searches = [
            Search(10, "dense", kinds=["event"], users=["ana"]),
            Search(10, "dense", kinds=["event"], actors=["noor"], users=["bo"]),
        ]

        def answers() -> list[list[str]]:
            found = index.query_batch("acme", unit(0), "kiln", searches)
            return [sorted(keys(hits)) for hits in found]

        assert answers() == [["e1", "e3"], ["e2"]]
        index.compact()
        assert answers() == [["e1", "e3"], ["e2"]]
        hit = index.query("acme", unit(0), None, mode="dense", kinds=["event"])[0]
        assert not {"scope", "scoped_keys", "scope_keys"} & hit.payload.keys()
    finally:
        index.close()


def test_edge_refuses_payload_fields_it_uses_itself(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path / "edge" / "memories", "memories", DIM)
    try:
        for name in ("scope", "scoped_keys", "scope_keys", "packed"):
            with pytest.raises(ValueError, match=name):
                index.upsert([pt("acme", "e1", "kiln", unit(0), **{name: "x"})])
        assert index.count() == 0
    finally:
        index.close()


@pytest.mark.parametrize("killed_after", ["old_set_aside", "fresh_in_place"])
def test_edge_opens_whole_after_a_compaction_killed_between_renames(
    tmp_path: Path, killed_after: str
) -> None:
    path = tmp_path / "edge" / "memories"
    index = EdgeVectorIndex(path, "memories", DIM)
    index.upsert([pt("acme", f"e{i}", f"kiln firing {i}", unit(i % DIM)) for i in range(5)])
    index.close()
    old = path.with_name("memories.old")
    if killed_after == "old_set_aside":  # compact renamed the shard away and died
        path.rename(old)
    else:  # the fresh shard took its place; the old one was not removed yet
        shutil.copytree(path, old)
    reopened = EdgeVectorIndex(path, "memories", DIM)
    try:
        assert reopened.count("acme") == 5
        assert keys(reopened.query("acme", unit(1), None, mode="dense", limit=1)) == ["e1"]
        assert not old.exists()
    finally:
        reopened.close()
