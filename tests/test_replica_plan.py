"""Which worker processes the embedded stack runs for a replica count."""

from __future__ import annotations

import pytest
from memstream.settings import Settings
from memstream_cli.stack.supervisor import StackError, plan_workers


def names(settings: Settings) -> list[tuple[str, str]]:
    return [(name, role) for name, role, _module in plan_workers(settings)]


def test_one_replica_is_one_process_of_each_worker() -> None:
    assert names(Settings(replicas=1)) == [
        ("sequencer", "sequencer"),
        ("archiver", "archiver"),
        ("graph-projector", "graph-projector"),
        ("retrospective", "retrospective"),
        ("latent-builder", "latent-builder"),
    ]


def test_n_replicas_scale_every_worker() -> None:
    planned = names(Settings(replicas=3))
    assert [n for n, r in planned if r == "sequencer"] == [
        "sequencer",
        "sequencer-2",
        "sequencer-3",
    ]
    assert [n for n, r in planned if r == "graph-projector"] == [
        "graph-projector",
        "graph-projector-2",
        "graph-projector-3",
    ]
    assert [n for n, r in planned if r == "archiver"] == ["archiver", "archiver-2", "archiver-3"]
    for role in ("retrospective", "latent-builder"):
        assert [n for n, r in planned if r == role] == [role, f"{role}-2", f"{role}-3"]


def test_a_per_worker_override_wins_over_the_stack_wide_count() -> None:
    planned = names(Settings(replicas=2, worker_replicas={"sequencer": 4, "graph-projector": 1}))
    assert sum(r == "sequencer" for _, r in planned) == 4
    assert sum(r == "graph-projector" for _, r in planned) == 1


def test_without_embedded_projections_only_the_spine_runs() -> None:
    planned = names(Settings(replicas=2, embedded_projections=False))
    assert planned == [
        ("sequencer", "sequencer"),
        ("sequencer-2", "sequencer"),
        ("archiver", "archiver"),
        ("archiver-2", "archiver"),
    ]


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ({"sequncer": 2}, "names no worker: sequncer"),
        ({"sequencer": 0}, "sequencer: 0 replicas asked"),
    ],
)
def test_a_count_that_cannot_run_is_refused_with_the_reason(
    override: dict[str, int], says: str
) -> None:
    with pytest.raises(StackError, match=says):
        plan_workers(Settings(worker_replicas=override))


def test_the_replica_count_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTREAM_REPLICAS", "2")
    monkeypatch.setenv("MEMSTREAM_WORKER_REPLICAS", '{"sequencer": 3}')
    planned = names(Settings())
    assert sum(r == "sequencer" for _, r in planned) == 3
    assert sum(r == "graph-projector" for _, r in planned) == 2
