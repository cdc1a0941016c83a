"""Kill -9 under HTTP load in one running stack that nobody restarts by hand: the broker, then
the graph server, then the sequencer. The API stays up and answers every write 202 (no
refused connection, no error: the outbox accepts while the broker is restored); every event
answered lands in the ledger exactly once, the chain verifies, and the projections converge
to the ledger."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import httpx
import pytest
from loadgen import Load
from stackproc import RunningStack, memstream, owned_stack, wait_until


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
    # No connection refused and no answer but 202. (A kept-alive connection the server
    # closes as a request arrives is a client's ordinary retry, not counted here.)
    refused = [f for f in load.failed if f in ("ConnectError", "ConnectTimeout")]
    assert refused == [] and not any(f.startswith("HTTP") for f in load.failed), load.failed
    load.lost_nothing_and_doubled_nothing()
