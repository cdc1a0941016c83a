"""Neo4j 5 adapter (the distributed backend) over the shared Cypher of ``cypher.py``."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, TypeVar

import neo4j
from neo4j.exceptions import (
    ClientError,
    ConnectionPoolError,
    ServiceUnavailable,
    SessionExpired,
    TransientError,
)

from memstream.graph.cypher import DELETE_SOME_NODES
from memstream.graph.port import GraphRefused, GraphUnavailable
from memstream.graph.store import CypherGraphStore, Row, Run

_T = TypeVar("_T")
log = logging.getLogger(__name__)

# Composite uniqueness constraints exist in Community edition and back the MERGE keys.
NEO4J_DDL: tuple[str, ...] = (
    "CREATE CONSTRAINT memstream_event_key IF NOT EXISTS "
    "FOR (n:Event) REQUIRE (n.tenant, n.event_id) IS UNIQUE",
    "CREATE CONSTRAINT memstream_entity_key IF NOT EXISTS "
    "FOR (n:Entity) REQUIRE (n.tenant, n.key) IS UNIQUE",
    "CREATE INDEX memstream_event_seq IF NOT EXISTS FOR (n:Event) ON (n.tenant, n.stream, n.seq)",
    "CREATE INDEX memstream_relates_fact IF NOT EXISTS FOR ()-[f:RELATES]-() ON (f.fact_id)",
    "CREATE INDEX memstream_relates_source IF NOT EXISTS FOR ()-[f:RELATES]-() ON (f.src_event_id)",
    "CREATE CONSTRAINT memstream_feedback_key IF NOT EXISTS "
    "FOR (n:Feedback) REQUIRE (n.tenant, n.feedback_id) IS UNIQUE",
    "CREATE INDEX memstream_feedback_target IF NOT EXISTS FOR (n:Feedback) ON (n.target_id)",
    "CREATE CONSTRAINT memstream_latent_key IF NOT EXISTS "
    "FOR (n:Latent) REQUIRE (n.tenant, n.artifact_id) IS UNIQUE",
    "CREATE CONSTRAINT memstream_invalidation_key IF NOT EXISTS "
    "FOR (n:Invalidation) REQUIRE (n.tenant, n.invalidation_id) IS UNIQUE",
    "CREATE INDEX memstream_invalidation_target IF NOT EXISTS "
    "FOR (n:Invalidation) ON (n.target_id)",
    "CREATE INDEX memstream_invalidation_proposal IF NOT EXISTS "
    "FOR (n:Invalidation) ON (n.proposal_id)",
    "CREATE CONSTRAINT memstream_progress_key IF NOT EXISTS "
    "FOR (n:Progress) REQUIRE (n.tenant, n.epoch, n.partition) IS UNIQUE",
)
CREATE_DATABASE = "CREATE DATABASE $name IF NOT EXISTS WAIT"
DROP_BATCH = 10_000
# Server codes that judge the values a query carries, not the query: a value of a type or size
# the database cannot store, a uniqueness constraint the data breaks. A syntax or semantic
# error is ours (the Cypher is fixed) and propagates.
REFUSED_CODES = frozenset(
    {
        "Neo.ClientError.Statement.TypeError",
        "Neo.ClientError.Statement.ArgumentError",
        "Neo.ClientError.Statement.ArithmeticError",
        "Neo.ClientError.Schema.ConstraintValidationFailed",
        "Neo.ClientError.Request.Invalid",
        "Neo.ClientError.Request.InvalidFormat",
    }
)
# Cannot write for now: the server or the cluster member is down, restarting or changing role
# (TransientError covers NotALeader, DatabaseUnavailable, a deadlock; ServiceUnavailable an
# IncompleteCommit, which a retry of our idempotent writes settles). ``execute_write`` has
# already retried these for up to 30 s when they reach us.
UNAVAILABLE = (ServiceUnavailable, SessionExpired, TransientError, ConnectionPoolError)
REASON_CHARS = 300


def database_name(namespace: str) -> str:
    """Neo4j database names allow only ``[a-z0-9.-]``: ``memstream_v1`` → ``memstream-v1``."""
    name = re.sub(r"[^a-z0-9.-]", "-", namespace.lower())
    return name if name[:1].isalpha() else "m" + name


class Neo4jGraphStore(CypherGraphStore):
    """One Neo4j database per ``namespace`` holding every tenant; a batch is one transaction.

    Concurrent batches adding facts to one subject serialise on the subject node's lock (creating a
    relationship locks both ends), so each supersession recompute sees the other's facts.
    Side-by-side projection versions need one database each, which only Enterprise edition
    can create; on Community use the default ``neo4j`` database.
    """

    def __init__(self, driver: neo4j.Driver, namespace: str) -> None:
        self.driver = driver
        self.namespace = namespace
        self.database = database_name(namespace)

    def ensure_schema(self) -> None:
        try:
            self.driver.execute_query(CREATE_DATABASE, {"name": self.database}, database_="system")
        except ClientError as exc:
            # Community edition or no admin rights: the database must already exist.
            log.info("not creating Neo4j database %s: %s", self.database, exc.message)
        for statement in NEO4J_DDL:
            self.driver.execute_query(statement, database_=self.database)

    def drop(self) -> None:
        """Delete every node and edge of the database (in batches); the database stays."""
        while True:
            rows = self._transact(lambda run: run(DELETE_SOME_NODES, {"limit": DROP_BATCH}))
            if not rows or int(rows[0]["deleted"]) == 0:
                return

    def compact(self) -> None:
        """Nothing to do from here: Neo4j reuses deleted records' space and prunes old
        transaction logs by ``db.tx_log.rotation.retention_policy``, a server setting (keep
        it short where purges must leave no trace in the logs)."""

    def _read(self, query: str, params: dict[str, Any]) -> list[Row]:
        try:
            records, _, _ = self.driver.execute_query(
                query, params, routing_=neo4j.RoutingControl.READ, database_=self.database
            )
        except Exception as exc:
            raise _mapped(exc) from exc
        return [record.data() for record in records]

    def _transact(self, work: Callable[[Run], _T]) -> _T:
        def unit(tx: neo4j.ManagedTransaction) -> _T:
            def run(query: str, params: dict[str, Any]) -> list[Row]:
                try:
                    return [record.data() for record in tx.run(query, params)]
                except (ClientError, UnicodeEncodeError, OverflowError) as exc:
                    # Refusals only: what execute_write retries must reach it unchanged.
                    refused = classify(exc)
                    if isinstance(refused, GraphRefused):
                        raise refused from exc
                    raise

            return work(run)

        try:
            with self.driver.session(database=self.database) as session:
                return session.execute_write(unit)
        except (GraphRefused, GraphUnavailable):
            raise
        except Exception as exc:
            raise _mapped(exc) from exc


def classify(exc: BaseException) -> GraphRefused | GraphUnavailable | None:
    """The port error an exception of the driver means; None: not the data, not the server
    (a bug of ours, or a configuration error such as a refused password): it propagates."""
    if isinstance(exc, UNAVAILABLE):
        return GraphUnavailable(f"Neo4j cannot write now: {exc}")
    if isinstance(exc, ClientError) and exc.code in REFUSED_CODES:
        return GraphRefused(f"Neo4j refused the query ({exc.code}): {exc.message}"[:REASON_CHARS])
    if isinstance(exc, (UnicodeEncodeError, OverflowError)):
        # Raised while the driver packs parameters: a string that is not UTF-8, an integer
        # beyond 64 bits. The server never saw the query.
        return GraphRefused(f"the Neo4j driver cannot send the parameters: {exc}", in_data=True)
    return None


def _mapped(exc: Exception) -> Exception:
    mapped = classify(exc)
    if mapped is None:
        raise exc
    return mapped
