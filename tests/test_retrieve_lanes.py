"""Retrieval lanes over a real FalkorDB graph and a Qdrant Edge index (hand-written talk)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from lanedata import chat_entries, filler, projected
from memstream.checkout.plan import plan_query
from memstream.checkout.plan.entities import Lexicon
from memstream.checkout.retrieve.lanes import Retriever
from memstream.latent.builder import LatentBuilder, latent_input
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.projection.extract import extract, graph_batch
from memstream.projection.latents import latent_changes
from memstream.projection.projectors import vector_points
from memstream.records.projected import VectorHit, VectorPoint
from memstream.stack.servers import Server

# Idris keeps addressing Noor by name with the question's words; Noor's own answer never
# names herself. Filler turns make the tenant large enough for ranks to matter.
TALK = [
    ("Idris", "Noor, got summer plans yet? Summer plans make the whole year worth it."),
    ("Noor", "This summer I'm restoring an old sailing boat with my uncle."),
    ("Idris", "Summer plans sound great, Noor! My summer plans are mostly sleeping."),
    ("Idris", "Noor, did you ever finish those summer plans from last year?"),
    ("Idris", "Hey Noor, summer is nearly here, got plans?"),
    *filler("Noor", "Idris", 40),
]


def entries() -> list[dict[str, Any]]:
    return chat_entries("pals", TALK, "t")


@pytest.fixture
def retriever(falkordb_server: Server, tmp_path: Path) -> Iterator[Retriever]:
    with projected(falkordb_server, tmp_path, "lanes_test", entries()) as r:
        yield r


def test_the_speaker_lane_finds_what_a_named_person_said(retriever: Retriever) -> None:
    plan = plan_query("What summer plans does Noor have?", "2031-06-01T00:00:00Z")
    assert "noor" in plan.entities
    timings: dict[str, float] = {}
    pool = retriever.retrieve("pals", plan, timings=timings)
    by_id = {c.item_id: c for c in pool}
    # the one turn of hers that matches the question's words, among twenty of hers
    assert "speaker_sparse" in by_id["t1"].lanes
    assert "vectors" in timings and "fact" in timings
    # every speaker-lane hit was said by Noor
    assert {c.agent for c in pool if any(x.startswith("speaker") for x in c.lanes)} == {"Noor"}
    # addressing Noor does not make Idris's turns about her
    for i in ("t0", "t2", "t3", "t4"):
        if i in by_id:
            assert not any(x.startswith("mention") for x in by_id[i].lanes)


def test_without_named_people_there_is_no_speaker_lane(retriever: Retriever) -> None:
    plan = plan_query("what about the weather and groceries?", "2031-06-01T00:00:00Z")
    timings: dict[str, float] = {}
    pool = retriever.retrieve("pals", plan, timings=timings)
    assert pool and not any(x.startswith("speaker") for c in pool for x in c.lanes)
    assert "fact" not in timings  # no entity named: no fact lane either


def test_latent_points_in_the_index_never_crowd_out_events(retriever: Retriever) -> None:
    # Artifacts that match the question better than any turn (their text is the question):
    # lanes that forgot to ask for events would fill their pool with them and find no turn.
    query = "What summer plans does Noor have?"
    vec = retriever.embedder.embed([query])[0].tolist()
    payload = {
        "tenant": "pals", "kind": "latent", "altitude": "episode", "stream": "chat",
        "actor_key": "noor", "entity_keys": ["noor"], "occurred_at": "2031-05-01T09:00:00Z",
    }  # fmt: skip
    retriever.index.upsert(
        [
            VectorPoint(
                point_key=f"latent:pals:lat-{i:024d}",
                dense=vec,
                text=f"{query} Noor summer plans",
                payload={**payload, "artifact_id": f"lat-{i:024d}"},
            )
            for i in range(30)
        ]
    )
    pool = retriever.retrieve("pals", plan_query(query, "2031-06-01T00:00:00Z"))
    assert "t1" in {c.item_id for c in pool} and all(c.kind == "event" for c in pool)
    for mode in ("dense", "sparse", "hybrid"):
        lane = retriever.lane("pals", query, mode, limit=10)  # type: ignore[arg-type]
        assert len(lane) == 10 and all(c.kind == "event" for c in lane)


def test_the_episode_lane_searches_inside_the_best_episodes(retriever: Retriever) -> None:
    """A second session (its own stream) about a sailing trip: with the lane on, its turns
    come in through the lane, and every turn the lane adds lies inside an episode the
    question found; off, the lane is not there."""
    trip = [
        ("Noor", "The sailing boat trip to the Frisian islands starts on Friday."),
        ("Idris", "I packed the life jackets and the tide tables for the boat trip."),
        ("Noor", "We anchor near Terschelling the first night of the trip."),
    ]
    state, docs = SequencerState(), []
    for i, (agent, text) in enumerate(trip):
        doc = {"id": f"trip{i}", "tenant": "pals", "stream": "boat-trip", "agent": agent,
               "type": "message.user", "occurred_at": f"2031-05-03T08:0{i}:00Z",
               "payload": {"text": text}}  # fmt: skip
        o = sequence(RawRecord(orjson.dumps(doc), 1, i, "raw"), state, "2031-05-04T00:00:00Z")
        assert isinstance(o, Sequenced)
        docs.append(o.entry)
    emb = retriever.embedder
    retriever.graph.write(graph_batch([extract(e) for e in docs]))
    retriever.index.upsert(vector_points([extract(e, light=True) for e in docs], emb))
    builder = LatentBuilder()
    now = datetime(2031, 6, 1, tzinfo=UTC)
    built = [b.artifact for e in entries() + docs for b in builder.observe(latent_input(e), now)]
    built += [b.artifact for b in builder.flush(now)]
    retriever.graph.write_latents(built)
    retriever.index.upsert(latent_changes(built, emb).upserts)
    plan = plan_query("Where do we anchor on the boat trip?", "2031-06-01T00:00:00Z")

    retriever.config = replace(retriever.config, episode_lane=True)
    found: list[VectorHit] = []
    pool = retriever.retrieve("pals", plan, latents=found)
    assert found[0].payload["stream"] == "boat-trip" and found[0].payload["altitude"] == "episode"
    from_lane = {c.item_id for c in pool if "episode" in c.lanes}
    inside = set()
    for h in found:
        if h.payload["altitude"] == "episode":
            episode = retriever.graph.latent("pals", h.payload["artifact_id"])
            assert episode is not None
            inside |= set(episode.source_ids)
    assert {"trip0", "trip1", "trip2"} <= from_lane <= inside

    retriever.config = replace(retriever.config, episode_lane=False)
    assert not any("episode" in c.lanes for c in retriever.retrieve("pals", plan))


# Both bought something at the market; only one of them is June. "June" is also a month
# (and a stopword), so the question names her only through what memory knows of her.
MARKET = [
    ("Idris", "I went to the market on Saturday and bought a bag of blood oranges."),
    ("June", "Same here! At the market I bought a little clay teapot."),
    ("Idris", "The market is always busy on Saturdays."),
    ("Idris", "Next time at the market I want to buy some honey."),
    *filler("June", "Idris", 30),
]


def test_a_person_named_like_a_month_is_the_one_asked_about(
    falkordb_server: Server, tmp_path: Path
) -> None:
    talk = chat_entries("stalls", MARKET, "m")
    with projected(falkordb_server, tmp_path, "june_lane_test", talk) as r:
        lexicon = Lexicon.build(r.graph.entities("stalls"))
        plan = plan_query(
            "What did June buy at the market?", "2031-06-01T00:00:00Z", lexicon=lexicon
        )
        assert plan.entities == ["june"] and plan.time_window is None
        pool = r.retrieve("stalls", plan)
    assert pool[0].item_id == "m1", [(c.item_id, c.agent, c.lanes) for c in pool[:4]]
    assert "speaker_sparse" in pool[0].lanes
