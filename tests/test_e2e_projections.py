"""Projections through the running stack: live counts match the ledger; replay and promote."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from memstream.projection.status import caught_up
from memstream.sdk import MemoryClient
from stackproc import RunningStack, memstream, owned_stack, wait_until


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """This module owns its stack: it counts the live version against the whole ledger, then
    replays, promotes and drops versions."""
    yield from owned_stack(tmp_path_factory, "projections")


N = 2000


def versions(s: RunningStack) -> dict[str, dict[str, Any]]:
    res = memstream("projections", "list", "--json", data_dir=s.data_dir)
    return {v["name"]: v for v in json.loads(res.stdout)["versions"]}


def emit_workload(s: RunningStack, n: int) -> None:
    with MemoryClient(s.bootstrap, "proj", prover=s.prover) as client:
        for i in range(n):
            stream = f"session-{i % 10}"
            if i % 50 == 0:
                client.emit(
                    stream,
                    "fact.asserted",
                    {"subject": f"customer {i % 7}", "predicate": "plan", "object": f"tier {i}"},
                )
            elif i % 3 == 0:
                client.emit(stream, "tool.call", {"tool": "crm.lookup", "arguments": {"n": i}})
            else:
                client.emit(stream, "message.user", {"text": f"Order {i} for Lisbon costs ${i}.50"})


def test_live_version_counts_equal_the_ledger(stack: RunningStack) -> None:
    emit_workload(stack, N)
    built: dict[str, Any] = {}

    def caught_up_now() -> bool:
        # The snapshot that is caught up is the one checked: the latent builder may publish
        # new artifacts right after it, and the version's lag counts them until it reads them.
        v1 = versions(stack).get("v1")
        if v1 is None or not caught_up(v1, N, exact=True):
            return False
        built.update(v1)
        return True

    wait_until(caught_up_now, 120, "v1")
    v1 = built
    assert v1["live"] is True
    assert v1["counts"]["facts"] == N // 50
    assert v1["counts"]["entities"] > 10
    assert v1["lag"]["total"] == 0


def test_replay_builds_v2_side_by_side_and_promote_switches(stack: RunningStack) -> None:
    res = memstream("replay", "--version", "v2", "--json", data_dir=stack.data_dir)
    v2 = json.loads(res.stdout)
    # replay returned once its groups had no lag; latents built since may still be unread
    c = v2["counts"]
    assert c["ledger_events"] == c["graph_events"] == N and c["vector_points"] <= N, v2
    # the vector points gauge is counted at most every 5 s: it reaches N soon after
    wait_until(lambda: caught_up(versions(stack)["v2"], N, exact=True, drained=False), 60, "v2")
    both = versions(stack)
    assert both["v1"]["live"] and not both["v2"]["live"]
    assert both["v2"]["counts"] == both["v1"]["counts"]
    assert both["v2"]["config_hash"] == both["v1"]["config_hash"]
    memstream("projections", "promote", "v2", data_dir=stack.data_dir)
    after = versions(stack)
    assert after["v2"]["live"] and not after["v1"]["live"]
    again = memstream(
        "replay", "--version", "v2", "--embedder", "hash-256", data_dir=stack.data_dir, check=False
    )
    assert again.returncode == 1 and "exists with config" in again.stderr


def test_dropping_a_version_removes_it(stack: RunningStack) -> None:
    bad = memstream("projections", "drop", "v2", data_dir=stack.data_dir, check=False)
    assert bad.returncode == 1 and "live" in bad.stderr
    memstream("projections", "drop", "v1", data_dir=stack.data_dir)
    assert set(versions(stack)) == {"v2"}
