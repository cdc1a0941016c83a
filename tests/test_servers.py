"""The embedded servers start from the wheels and answer."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient
from falkordb import FalkorDB
from memstream.stack.servers import Server


def test_broker_answers_metadata(broker: str) -> None:
    md = AdminClient({"bootstrap.servers": broker}).list_topics(timeout=5)
    assert md.brokers, "Tansu returned no broker in its metadata"


def test_falkordb_runs_cypher(falkordb_server: Server) -> None:
    graph = FalkorDB(port=falkordb_server.port).select_graph("probe")
    assert graph.query("RETURN 1 + 1").result_set == [[2]]
