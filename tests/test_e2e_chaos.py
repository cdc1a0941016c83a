"""Kill -9 under HTTP load in one running stack that nobody restarts by hand: the broker, then
the graph server, then the sequencer. The API stays up and answers every write 202 (no
refused connection, no error: the outbox accepts while the broker is restored); every event
answered lands in the ledger exactly once, the chain verifies, and the projections converge
to the ledger."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from loadgen import Load
from memstream.client import MemoryHttpClient
from memstream.ops.loops import SETTLED_S
from memstream.stack.children import ORPHAN_GRACE_S
from stackproc import (
    RunningStack,
    healthy_status,
    memstream,
    owned_stack,
    pid_alive,
    start_stack,
    wait_until,
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """This module owns its stack: it kills the broker, the graph server and the sequencer, and
    asserts on every event of the stack."""
    yield from owned_stack(tmp_path_factory, "chaos")


def kill_and_wait(stack: RunningStack, component: str) -> None:
    before = stack.pid(component)
    os.kill(before, signal.SIGKILL)
    wait_until(lambda: stack.pid(component) != before, 60, f"{component} restarted")
    wait_until(lambda: healthy(stack), 90, f"the API to answer after {component}")


def healthy(stack: RunningStack) -> bool:
    try:
        return httpx.get(f"{stack.api_url}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_broker_graph_and_sequencer_deaths_lose_and_duplicate_nothing(
    stack: RunningStack,
) -> None:
    keys = {
        t: memstream("keys", "create", "--tenant", t, data_dir=stack.data_dir).stdout.strip()
        for t in ("calm", "storm")
    }
    load = Load(stack, keys)
    thread = threading.Thread(target=load.run)
    thread.start()
    try:
        wait_until(lambda: sum(map(len, load.accepted.values())) >= 200, 60, "load running")
        api = stack.pid("api")
        for component in ("tansu", "falkordb", "sequencer"):
            kill_and_wait(stack, component)
            seen = sum(map(len, load.accepted.values()))
            wait_until(lambda s=seen: sum(map(len, load.accepted.values())) > s + 100, 60,  # type: ignore[misc]
                       f"load accepted again after {component}")  # fmt: skip
    finally:
        load.stop.set()
        thread.join(60)
    assert stack.pid("api") == api, "the API was restarted"
    load.answered_every_write()
    load.lost_nothing_and_doubled_nothing()


def test_status_is_healthy_again_once_a_broker_killed_three_times_has_settled(
    stack: RunningStack,
) -> None:
    """Status judges the present: a broker restarted again and again is "restarting in a
    loop" while its current run is young, and healthy once it has run ``SETTLED_S``."""
    for _ in range(3):
        kill_and_wait(stack, "tansu")
    doc = status(stack)
    tansu = doc["components"]["tansu"]
    assert tansu["restarts"] >= 3, tansu
    # Within the settling window plus the time status itself may take under load: the rule
    # of 300 s this replaced failed here.
    settled = healthy_status(stack.data_dir, timeout=SETTLED_S + 90)
    assert settled["components"]["tansu"]["healthy"] is True, settled["problems"]
    assert settled["components"]["tansu"]["restarts"] == tansu["restarts"]


def status(stack: RunningStack) -> dict[str, Any]:
    out = memstream("status", "--json", data_dir=stack.data_dir, check=False)
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def test_children_die_with_a_supervisor_killed_while_the_broker_is_down(tmp_path: Path) -> None:
    """Its own stack: the supervisor is killed. Stopped (SIGSTOP) so that it cannot restart
    the broker it then loses, the supervisor is killed while the API holds accepted events
    in its outbox; every child is gone within seconds, and a new stack on the same data dir
    ledgers every accepted event."""
    data = tmp_path / "data"
    first = start_stack(data)
    key = memstream("keys", "create", "--tenant", "orphans", data_dir=data).stdout.strip()
    accepted: list[str] = []
    try:
        with MemoryHttpClient(first.api_url, key, timeout=60) as client:
            accepted += client.emit([_note(i) for i in range(3)])
            children = [p for name, p in _children(first).items() if name != "supervisor"]
            os.kill(first.proc.pid, signal.SIGSTOP)
            os.kill(first.pid("tansu"), signal.SIGKILL)
            accepted += client.emit([_note(i) for i in range(3, 6)])  # into the outbox
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(30)
        gone = time.monotonic()
        wait_until(lambda: not any(pid_alive(p) for p in children), 30, "every child gone")
        took = time.monotonic() - gone
        assert took < ORPHAN_GRACE_S + 10, f"children outlived the supervisor by {took:.1f} s"
    finally:
        for pid in _children(first).values():
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
    # A killed supervisor leaves its stack.json; start_stack waits for the new one.
    (data / "stack.json").unlink()
    second = start_stack(data)
    try:
        ledgered = lambda: {e["id"] for e in second.ledger() if e["tenant"] == "orphans"}  # noqa: E731
        wait_until(lambda: set(accepted) <= ledgered(), 120, "every accepted event ledgered")
        assert len(accepted) == 6
    finally:
        second.stop()


def _note(i: int) -> dict[str, Any]:
    return {"stream": "s", "type": "observation", "payload": {"text": f"orphan note {i}"}}


def _children(stack: RunningStack) -> dict[str, int]:
    info = json.loads((stack.data_dir / "stack.json").read_text())
    return {name: int(c["pid"]) for name, c in info["components"].items()}
