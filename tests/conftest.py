"""Shared fixtures: real servers started by the test suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from memstream.stack.net import free_port
from memstream.stack.servers import Server, falkordb_password, start_falkordb, start_tansu
from messages_standin import MessagesStandin, llm_env, running_standin
from stackproc import RunningStack, start_stack


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Tansu broker for the session; yields its bootstrap address."""
    logs = tmp_path_factory.mktemp("tansu")
    server = start_tansu(free_port(), logs)
    try:
        yield f"127.0.0.1:{server.port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def falkordb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real FalkorDB server (AOF on) for the session, with a password as the stack's."""
    root: Path = tmp_path_factory.mktemp("falkordb")
    password = falkordb_password(root)
    server = start_falkordb(free_port(), root / "data", root, password=password)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    """``memstream up`` as a real process, one per test module, stopped after it."""
    s = start_stack(tmp_path_factory.mktemp(request.module.__name__) / "data")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def standin() -> Iterator[MessagesStandin]:
    """A local stand-in of the Anthropic Messages API (tests never reach the real one)."""
    with running_standin() as s:
        yield s


@pytest.fixture(scope="module")
def llm_stack(
    request: pytest.FixtureRequest,
    standin: MessagesStandin,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningStack]:
    """``memstream up`` with summarize_recall on, its model being ``standin``."""
    data = tmp_path_factory.mktemp(f"{request.module.__name__}-llm") / "data"
    s = start_stack(data, env=llm_env(standin))
    try:
        yield s
    finally:
        s.stop()
