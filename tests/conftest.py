"""Shared fixtures: real servers started by the test suite.

Stacks (``memstream up`` as a process) take seconds to start and stop, so modules share them:

- ``stack`` (also ``llm_stack``): one stack per session (per xdist worker) with
  summarize_recall on, its model the session's Messages API stand-in (``shared_standin``), for
  modules that only add data under tenants of their own and read it back; one stack, not
  two, because an idle stack still costs CPU (its consumers poll the broker);
- a module that must own a stack (it kills or restarts processes, replays and promotes a
  projection version, needs settings of its own, or asserts on the whole stack's contents)
  defines its own ``stack`` fixture with :func:`owned_stack`, and its docstring says why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from memstream.stack.net import free_port
from memstream.stack.servers import Server, falkordb_password, start_falkordb, start_tansu
from messages_standin import MessagesStandin, llm_env, running_standin
from pgserver import Postgres, running_postgres
from stackproc import RunningStack, owned_stack


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
def stack(shared_llm_stack: RunningStack) -> RunningStack:
    """The session's shared stack (see the module docstring)."""
    return shared_llm_stack


@pytest.fixture(scope="module")
def standin() -> Iterator[MessagesStandin]:
    """A local stand-in of the Anthropic Messages API (tests never reach the real one)."""
    with running_standin() as s:
        yield s


@pytest.fixture(scope="session")
def shared_standin() -> Iterator[MessagesStandin]:
    """The stand-in the session's ``llm_stack`` asks."""
    with running_standin() as s:
        yield s


@pytest.fixture(scope="session")
def shared_llm_stack(
    shared_standin: MessagesStandin, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    yield from owned_stack(tmp_path_factory, "shared-llm", llm_env(shared_standin))


@pytest.fixture(scope="module")
def llm_stack(shared_llm_stack: RunningStack) -> RunningStack:
    """``memstream up`` with summarize_recall on, its model being ``shared_standin``."""
    return shared_llm_stack


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Postgres]:
    """A real PostgreSQL server (Debian's package) for the session; each user makes a fresh
    database of its own in it."""
    with running_postgres() as server:
        yield server
