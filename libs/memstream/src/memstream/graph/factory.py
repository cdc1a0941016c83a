"""Pick the graph backend from settings: Neo4j when configured, FalkorDB otherwise."""

from __future__ import annotations

from memstream.graph.port import GraphStore
from memstream.settings import Settings


class GraphNotConfiguredError(RuntimeError):
    """Neither ``MEMSTREAM_NEO4J_URI`` nor ``MEMSTREAM_FALKORDB_URL`` is set."""


def open_graph_store(settings: Settings, namespace: str) -> GraphStore:
    """A store for ``namespace`` (FalkorDB graph name / Neo4j database name); no I/O yet."""
    if settings.neo4j_uri:
        import neo4j

        from memstream.graph.neo4j_store import Neo4jGraphStore

        driver = neo4j.GraphDatabase.driver(
            settings.neo4j_uri, auth=(settings.neo4j_user, settings.neo4j_password)
        )
        return Neo4jGraphStore(driver, namespace)
    if settings.falkordb_url:
        import falkordb

        from memstream.graph.falkor import FalkorGraphStore

        return FalkorGraphStore(falkordb.FalkorDB.from_url(settings.falkordb_url), namespace)
    raise GraphNotConfiguredError(
        "no graph backend configured: set MEMSTREAM_NEO4J_URI or MEMSTREAM_FALKORDB_URL "
        "(the embedded stack sets the FalkorDB URL it started)"
    )
