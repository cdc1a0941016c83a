"""Retrieval over real servers for the lane tests: ledger entries sequenced from plain
event documents, projected into FalkorDB and Qdrant Edge, and a retriever over both."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from falkordb import FalkorDB
from memstream.checkout.retrieve.lanes import Retriever
from memstream.embed.registry import get_embedder
from memstream.graph.falkor import FalkorGraphStore
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.projection.extract import extract, graph_batch
from memstream.projection.projectors import vector_points
from memstream.stack.servers import Server
from memstream.vectors.edge import EdgeVectorIndex


def sequenced(docs: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    """The ledger entries the sequencer makes of ``docs``, in order."""
    state, out = SequencerState(), []
    for i, doc in enumerate(docs):
        o = sequence(RawRecord(orjson.dumps(doc), 0, i, "raw"), state, now)
        assert isinstance(o, Sequenced)
        out.append(o.entry)
    return out


def filler(first: str, second: str, n: int) -> list[tuple[str, str]]:
    """``n`` turns of small talk between two people: a tenant large enough for ranks to
    matter, saying nothing the tests ask about."""
    return [
        (second if i % 2 else first, f"Filler chat number {i} about groceries and the weather.")
        for i in range(n)
    ]


def chat_entries(tenant: str, talk: list[tuple[str, str]], prefix: str) -> list[dict[str, Any]]:
    """The ledger entries of a chat in one stream: each (speaker, text) a message a minute
    after the one before, ids ``<prefix><n>``."""
    docs = [
        {"id": f"{prefix}{i}", "tenant": tenant, "stream": "chat", "agent": agent,
         "type": "message.user", "occurred_at": f"2031-05-01T10:{i:02d}:00Z",
         "payload": {"text": text}}
        for i, (agent, text) in enumerate(talk)
    ]  # fmt: skip
    return sequenced(docs, "2031-05-02T00:00:00Z")


@contextmanager
def projected(
    falkordb_server: Server, path: Path, name: str, docs: list[dict[str, Any]]
) -> Iterator[Retriever]:
    """``docs`` (ledger entries) in a graph and a vector index named ``name``; a retriever
    over both (pool 10), dropped afterwards."""
    emb = get_embedder()
    graph = FalkorGraphStore(
        FalkorDB(port=falkordb_server.port, password=falkordb_server.password), name
    )
    index = EdgeVectorIndex(path / "edge", name, emb.dim)
    graph.ensure_schema()
    graph.write(graph_batch([extract(e) for e in docs]))
    index.ensure()
    index.upsert(vector_points([extract(e, light=True) for e in docs], emb))
    try:
        yield Retriever(graph=graph, index=index, embedder=emb, pool=10)
    finally:
        graph.drop()
        index.close()
