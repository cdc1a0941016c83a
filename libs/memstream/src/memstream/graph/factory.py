"""Pick the graph backend from settings: Neo4j when configured, FalkorDB otherwise."""

from __future__ import annotations

from memstream.graph.port import GraphStore, GraphUnavailable
from memstream.settings import Settings


class GraphNotConfiguredError(RuntimeError):
    """Neither ``MEMSTREAM_NEO4J_URI`` nor ``MEMSTREAM_FALKORDB_URL`` is set."""


def open_graph_store(settings: Settings, namespace: str) -> GraphStore:
    """A store for ``namespace`` (FalkorDB graph name / Neo4j database name). The FalkorDB
    client asks the server one question as it is built: GraphUnavailable if it is down."""
    if settings.neo4j_uri:
        import neo4j

        from memstream.graph.neo4j_store import Neo4jGraphStore

        driver = neo4j.GraphDatabase.driver(
            settings.neo4j_uri, auth=(settings.neo4j_user, settings.neo4j_password)
        )
        return Neo4jGraphStore(driver, namespace)
    if settings.falkordb_url:
        import falkordb
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        from memstream.graph.falkor import FalkorGraphStore

        secret = settings.falkordb_secret()
        password = secret.get_secret_value() if secret is not None else None
        try:
            # the client asks the server what it is (sentinel, cluster) as it is built
            # redis-py answers TimeoutError after 5 s by default: under load a purge plan or a
            # large write takes longer, and would be taken for a server that is down
            client = falkordb.FalkorDB.from_url(
                settings.falkordb_url,
                password=password,
                socket_timeout=settings.graph_timeout_s,
                socket_connect_timeout=5.0,
            )
        except (RedisConnectionError, RedisTimeoutError) as exc:
            raise GraphUnavailable(f"FalkorDB unreachable: {exc}") from exc
        return FalkorGraphStore(client, namespace)
    raise GraphNotConfiguredError(
        "no graph backend configured: set MEMSTREAM_NEO4J_URI or MEMSTREAM_FALKORDB_URL "
        "(the embedded stack sets the FalkorDB URL it started)"
    )
