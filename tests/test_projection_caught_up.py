"""``caught_up``: when a projection version has caught up with the ledger."""

from __future__ import annotations

from typing import Any

from memstream.projection.status import caught_up, live_version


def version(ledger: int, graph: int, vectors: int, lag: int, live: bool = True) -> dict[str, Any]:
    counts = {"ledger_events": ledger, "graph_events": graph, "vector_points": vectors}
    return {"live": live, "counts": counts, "lag": {"total": lag}}


def test_counts_reach_the_ledger_and_nothing_is_left_to_read() -> None:
    assert caught_up(version(10, 10, 10, 0))
    assert not caught_up(version(10, 10, 9, 0))
    assert not caught_up(version(10, 9, 10, 0))
    assert not caught_up(version(10, 10, 10, 1))


def test_a_number_of_events_instead_of_the_ledger() -> None:
    assert caught_up(version(12, 10, 11, 0), 10)
    assert not caught_up(version(12, 10, 9, 0), 10)


def test_without_drained_only_the_counts_count() -> None:
    assert caught_up(version(10, 10, 10, 5), drained=False)
    assert not caught_up(version(10, 10, 9, 0), drained=False)


def test_exact_counts_refuse_anything_projected_twice() -> None:
    assert caught_up(version(10, 10, 10, 0), exact=True)
    assert caught_up(version(10, 10, 10, 0), 10, exact=True)
    assert not caught_up(version(10, 11, 10, 0), exact=True)
    assert not caught_up(version(11, 10, 10, 0), 10, exact=True)


def test_after_a_purge_lag_alone_decides() -> None:
    assert caught_up(version(10, 7, 7, 0), 0)
    assert not caught_up(version(10, 7, 7, 2), 0)


def test_live_version() -> None:
    old, new = version(1, 1, 1, 0, live=False), version(1, 1, 1, 0)
    assert live_version({"versions": [old, new]}) is new
    assert live_version({"versions": [old]}) is None
