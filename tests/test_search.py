"""Search by altitude: the ranking parts alone, then the searcher over real FalkorDB and Edge."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import latentdata
import orjson
import pytest
from falkordb import FalkorDB
from memstream.checkout.search import (
    Searcher,
    SearchHit,
    SearchRequest,
    event_hit,
    fact_hits,
    kept,
    latent_hit,
)
from memstream.embed.registry import get_embedder
from memstream.graph.falkor import FalkorGraphStore
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.projection.extract import extract, graph_batch
from memstream.projection.latents import latent_changes
from memstream.projection.projectors import vector_points
from memstream.records.projected import FactView, SourceRef, VectorHit
from memstream.stack.servers import Server
from memstream.vectors.edge import EdgeVectorIndex
from pydantic import ValidationError

T = "atelier"
STREAM = "cours-du-lundi"


def _hit(score: float, **payload: Any) -> VectorHit:
    return VectorHit(point_key="k", score=score, payload=payload)


def _fact(fact_id: str, event_id: str, kind: str = "fact") -> FactView:
    ref = SourceRef(tenant=T, stream=STREAM, seq=1, hash="h", event_id=event_id)
    return FactView(
        fact_id=fact_id, subject_key="inès", predicate="prefers:glaze", object_key=None,
        value="celadon", value_text="celadon", unit=None, valid_from="2025-03-01T09:00:00Z",
        valid_to=None, superseded_by=None, confidence=1.0, source=ref, kind=kind,
    )  # fmt: skip


# -- ranking parts ----------------------------------------------------------------------------


def test_event_hits_cite_themselves_and_skip_events_about_memory() -> None:
    hit = event_hit(_hit(0.5, event_id="e1", type="message.user", text="Inès glazed a bowl"))
    assert hit == SearchHit(
        id="e1", kind="message.user", altitude="event", text="Inès glazed a bowl", score=0.5,
        sources=["e1"],
    )  # fmt: skip
    assert event_hit(_hit(0.4, event_id="e2", type="memory.feedback", text="+1")) is None
    assert event_hit(_hit(0.4, artifact_id="lat-1", kind="latent")) is None
    tool = event_hit(_hit(0.3, event_id="e3", type="tool.call", text=""))
    assert tool is not None and tool.text == "tool.call"


def test_latent_hits_cite_the_events_they_were_derived_from() -> None:
    payload = {
        "kind": "latent", "altitude": "episode", "artifact_id": "lat-1",
        "artifact_type": "episode_latent", "text": "A glazing lesson", "source_ids": ["e1", "e2"],
    }  # fmt: skip
    hit = latent_hit(_hit(0.2, **payload))
    assert hit is not None and hit.altitude == "episode" and hit.sources == ["e1", "e2"]
    assert hit.kind == "episode_latent" and hit.id == "lat-1"
    pref = latent_hit(_hit(0.1, **{**payload, "altitude": "latent", "source_ids": []}))
    assert pref is not None and pref.altitude == "latent" and pref.sources == []
    assert latent_hit(_hit(0.3, event_id="e1", kind="event")) is None


def test_facts_take_their_source_events_score_best_first_once_each() -> None:
    facts = [_fact("e2#1", "e2"), _fact("e1#0", "e1", "preference"), _fact("e2#0", "e2")]
    facts += [_fact("e2#0", "e2"), _fact("e9#0", "e9")]  # a repeat; an event not among the hits
    hits = fact_hits(facts, {"e1": 0.3, "e2": 0.5}, k=10)
    assert [(h.id, h.score, h.sources) for h in hits] == [
        ("e2#0", 0.5, ["e2"]),
        ("e2#1", 0.5, ["e2"]),
        ("e1#0", 0.3, ["e1"]),
    ]
    assert hits[2].kind == "preference" and hits[0].text == "inès prefers glaze celadon"
    assert [h.id for h in fact_hits(facts, {"e1": 0.3, "e2": 0.5}, k=1)] == ["e2#0"]
    assert kept([None, hits[0], None, hits[1]], 1) == [hits[0]]


def test_the_request_is_as_strict_as_its_schema() -> None:
    assert SearchRequest(query="bols").altitude == "event"
    assert SearchRequest.model_validate({"query": "x", "k": 50.0}).k == 50
    for bad in (
        {"query": ""},
        {"query": "x" * 2001},
        {"query": "x", "k": 0},
        {"query": "x", "k": 51},
        {"query": "x", "k": "5"},
        {"query": "x", "altitude": "cloud"},
        {"query": "x", "as_of": "yesterday"},
        {"query": "x", "extra": 1},
    ):
        with pytest.raises(ValidationError):
            SearchRequest.model_validate(bad)


# -- the searcher over real stores ------------------------------------------------------------

TALK = [
    ("Inès", "message.user", {"text": "I glazed three bowls in celadon at the atelier today."}),
    ("Inès", "preference.set", {"subject": "Inès", "key": "glaze", "value": "celadon"}),
    ("Noé", "message.user", {"text": "The kiln reached cone 6 overnight, all pots survived."}),
    ("Inès", "preference.set", {"subject": "Inès", "key": "glaze", "value": "tenmoku"}),
    ("Noé", "message.user", {"text": "Groceries: leeks, lentils and a baguette."}),
]


def _entries() -> list[dict[str, Any]]:
    state, out = SequencerState(), []
    for i, (agent, type_, payload) in enumerate(TALK):
        doc = {
            "id": f"e{i}", "tenant": T, "stream": STREAM, "agent": agent, "type": type_,
            "occurred_at": f"2025-03-0{i + 1}T10:00:00Z", "payload": payload,
        }  # fmt: skip
        o = sequence(RawRecord(orjson.dumps(doc), 0, i, "raw"), state, "2025-04-01T00:00:00Z")
        assert isinstance(o, Sequenced)
        out.append(o.entry)
    return out


@pytest.fixture
def searcher(falkordb_server: Server, tmp_path: Path) -> Iterator[Searcher]:
    emb = get_embedder()
    graph = FalkorGraphStore(
        FalkorDB(port=falkordb_server.port, password=falkordb_server.password), "search_test"
    )
    index = EdgeVectorIndex(tmp_path / "edge", "search", emb.dim)
    entries = _entries()
    graph.ensure_schema()
    graph.write(graph_batch([extract(e) for e in entries]))
    index.ensure()
    index.upsert(vector_points([extract(e, light=True) for e in entries], emb))
    refs = [
        SourceRef(tenant=T, stream=STREAM, seq=e["seq"], hash=e["hash"], event_id=e["id"])
        for e in entries
    ]
    episode = latentdata.episode(
        T, STREAM, "Inès glazed bowls in celadon; the kiln fired them overnight", refs[:3],
        key_terms=["glaze", "kiln"], start=datetime(2025, 3, 1, 10, tzinfo=UTC),
    )  # fmt: skip
    later = latentdata.episode(
        T, STREAM, "Shopping list of leeks and lentils", refs[4:], group="shopping",
        start=datetime(2025, 3, 5, 10, tzinfo=UTC),
    )  # fmt: skip
    pref = latentdata.preference(
        T, "Inès", {"glaze": "tenmoku"}, refs[3:4], since=datetime(2025, 3, 4, 10, tzinfo=UTC)
    )
    artifacts = [episode, later, pref]
    graph.write_latents(artifacts)
    index.upsert(latent_changes(artifacts, emb).upserts)
    try:
        yield Searcher(graph, index, emb)
    finally:
        graph.drop()
        index.close()


def _search(s: Searcher, query: str, altitude: str, **kw: Any) -> list[SearchHit]:
    return s.search(T, SearchRequest.model_validate({"query": query, "altitude": altitude, **kw}))


def test_each_altitude_finds_its_own_items(searcher: Searcher) -> None:
    events = _search(searcher, "celadon bowls", "event", k=3)
    assert events[0].id == "e0" and all(h.altitude == "event" for h in events)
    assert len(events) == 3 and all(h.sources == [h.id] for h in events)

    episodes = _search(searcher, "glazing bowls in the kiln", "episode")
    assert [h.kind for h in episodes] == ["episode_latent", "episode_latent"]
    assert episodes[0].sources == ["e0", "e1", "e2"]

    latents = _search(searcher, "which glaze does Inès prefer", "latent")
    assert [(h.kind, h.sources) for h in latents] == [("preference_latent", ["e3"])]

    facts = _search(searcher, "Inès glaze preference", "fact")
    # the newer preference holds; the one it superseded is history, not a current fact
    assert [(h.id, h.kind, h.sources) for h in facts] == [("e3#0", "preference", ["e3"])]
    assert "tenmoku" in facts[0].text


def test_as_of_searches_what_memory_held_then(searcher: Searcher) -> None:
    then = datetime(2025, 3, 2, 12, tzinfo=UTC)
    events = _search(searcher, "celadon bowls kiln groceries", "event", as_of=then)
    assert {h.id for h in events} == {"e0", "e1"}
    facts = _search(searcher, "Inès glaze preference", "fact", as_of=then)
    assert [h.id for h in facts] == ["e1#0"] and "celadon" in facts[0].text
    episodes = _search(searcher, "leeks lentils bowls", "episode", as_of=then)
    assert len(episodes) == 1 and episodes[0].sources == ["e0", "e1", "e2"]
    assert _search(searcher, "glaze", "latent", as_of=then - timedelta(days=30)) == []
    # a naive time is read as UTC, as everywhere in the API
    naive = _search(searcher, "celadon", "event", as_of=then.replace(tzinfo=None))
    assert {h.id for h in naive} <= {"e0", "e1"}
