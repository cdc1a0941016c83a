"""The purge watcher survives its stores failing: a check that raises (a store down, an index
reopening, an unexpected error) counts as not converged yet, is logged and asked again."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from memstream.forget.metrics import PendingPurges
from memstream.forget.watch import converged, follow_up, watch
from memstream.graph.port import GraphUnavailable
from memstream.vectors.port import IndexUnavailable
from stackproc import wait_until


def flaky(failures: list[Exception]) -> Callable[[], bool]:
    """A store check that raises each of ``failures`` in turn, then answers converged."""
    left = list(failures)

    def check() -> bool:
        if left:
            raise left.pop(0)
        return True

    return check


def test_a_failing_store_reads_as_not_converged_and_the_others_still_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    checks = {
        "graph": flaky([GraphUnavailable("FalkorDB unreachable: refused")]),
        "vectors": flaky([RuntimeError("Service runtime error: Shard is not initialized")]),
        "archive": lambda: True,
    }
    with caplog.at_level(logging.WARNING):
        assert converged(checks, "purge t1") == {"graph": False, "vectors": False, "archive": True}
    assert "graph not checked" in caplog.text and "FalkorDB unreachable" in caplog.text
    assert "checking vectors failed" in caplog.text  # not a store being down: a traceback
    assert converged(checks, "purge t1") == {"graph": True, "vectors": True, "archive": True}


def test_watch_asks_again_until_every_store_converged() -> None:
    checks = {
        "graph": flaky([GraphUnavailable("down"), GraphUnavailable("loading")]),
        "vectors": flaky([IndexUnavailable("vector index 'v1' is closed")]),
    }
    assert watch(lambda: converged(checks, "purge t2"), 60) == {"graph": True, "vectors": True}


def test_the_background_watch_outlives_failed_checks_and_clears_the_purge() -> None:
    pending = PendingPurges("test-watch")
    checks = {"vectors": flaky([RuntimeError("boom"), IndexUnavailable("reopening")] * 2)}
    answers: list[dict[str, bool]] = []

    def check() -> dict[str, bool]:
        answers.append(converged(checks, "purge tomb-1"))
        return answers[-1]

    follow_up(pending, "tomb-1", check)
    wait_until(lambda: answers[-1:] == [{"vectors": True}], 60, "the stores converged")
    assert answers[:4] == [{"vectors": False}] * 4
    wait_until(lambda: pending.oldest_age() == 0.0, 60, "the purge marked complete")
