"""How the adapters we cannot run here (Neo4j, a Qdrant server) sort their clients' errors:
refused (the data's: dead-lettered), unavailable (retried) or neither (a bug: raised)."""

from __future__ import annotations

import httpx
import pytest
from memstream.graph.neo4j_store import classify as neo4j_classify
from memstream.graph.port import GraphRefused, GraphUnavailable
from memstream.store_errors import StoreRefused, StoreUnavailable
from memstream.vectors.port import VectorRefused, VectorUnavailable
from memstream.vectors.qdrant_server import classify as qdrant_classify
from neo4j.exceptions import (
    AuthError,
    ClientError,
    IncompleteCommit,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
)
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse


def neo4j_error(code: str, message: str = "m") -> Neo4jError:
    return Neo4jError._hydrate_neo4j(code=code, message=message)  # the driver's own factory


@pytest.mark.parametrize(
    "code",
    [
        "Neo.ClientError.Statement.TypeError",
        "Neo.ClientError.Schema.ConstraintValidationFailed",
        "Neo.ClientError.Statement.ArgumentError",
    ],
)
def test_neo4j_refuses_values(code: str) -> None:
    err = neo4j_classify(neo4j_error(code, "Property value is too large"))
    assert isinstance(err, GraphRefused) and isinstance(err, StoreRefused)
    assert code in err.reason and "too large" in err.reason


@pytest.mark.parametrize(
    "exc",
    [
        neo4j_error("Neo.TransientError.Transaction.DeadlockDetected"),
        neo4j_error("Neo.TransientError.General.DatabaseUnavailable"),
        ServiceUnavailable("no route"),
        SessionExpired("gone"),
        IncompleteCommit("connection lost during commit"),
    ],
)
def test_neo4j_down_or_busy_is_unavailable(exc: Exception) -> None:
    err = neo4j_classify(exc)
    assert isinstance(err, GraphUnavailable) and isinstance(err, StoreUnavailable)


@pytest.mark.parametrize(
    "exc",
    [
        neo4j_error("Neo.ClientError.Statement.SyntaxError"),  # our Cypher
        neo4j_error("Neo.ClientError.Security.Unauthorized"),  # our configuration
        AuthError("wrong password"),
        KeyError("typo"),
        TypeError("Values of type <class 'object'> are not supported"),
    ],
)
def test_neo4j_bugs_and_configuration_errors_are_neither(exc: Exception) -> None:
    assert neo4j_classify(exc) is None


def test_neo4j_driver_refuses_what_it_cannot_pack() -> None:
    surrogate = UnicodeEncodeError("utf-8", "a\ud800", 1, 2, "surrogates not allowed")
    assert isinstance(neo4j_classify(surrogate), GraphRefused)
    assert isinstance(neo4j_classify(OverflowError("Integer out of range")), GraphRefused)
    assert isinstance(neo4j_error("Neo.ClientError.Statement.TypeError"), ClientError)


def response(status: int, body: bytes) -> UnexpectedResponse:
    return UnexpectedResponse(status, "x", body, httpx.Headers())


@pytest.mark.parametrize("status", [400, 413, 422])
def test_qdrant_refuses_bad_points(status: int) -> None:
    err = qdrant_classify(response(status, b'{"status":{"error":"Wrong input: bad vector"}}'))
    assert isinstance(err, VectorRefused) and f"({status})" in err.reason
    assert "bad vector" in err.reason


@pytest.mark.parametrize(
    "exc",
    [
        response(503, b"restarting"),
        response(502, b"bad gateway"),
        response(429, b"slow down"),
        ResponseHandlingException(httpx.ConnectError("connection refused")),
    ],
)
def test_qdrant_down_or_busy_is_unavailable(exc: Exception) -> None:
    assert isinstance(qdrant_classify(exc), VectorUnavailable)


@pytest.mark.parametrize(
    "exc", [response(500, b"internal"), response(404, b"no collection"), KeyError("x")]
)
def test_qdrant_other_failures_are_neither(exc: Exception) -> None:
    assert qdrant_classify(exc) is None


def test_qdrant_client_refuses_what_it_cannot_serialise() -> None:
    err = qdrant_classify(ValueError("str is not valid UTF-8: surrogates not allowed"))
    assert isinstance(err, VectorRefused)
