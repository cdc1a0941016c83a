"""What a read given after= says when it answers: the meta block and the stale warning
(pure), the refusal each kind of bad position gets, and whose offsets a wait watches."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from memstream.checkout.service import CheckoutService
from memstream.position import ForeignPosition, MalformedPosition, Position
from memstream.projection.progress import Missing
from memstream.projection.versions import ProjectionConfig, VersionInfo
from memstream_api.offsets_watch import KafkaWatch
from memstream_api.read_after import Waited, _Waiter, refuse


def test_applied_answer_has_no_warning_and_says_so() -> None:
    done = Waited(0.0123, [], 5.0)
    assert done.warning() is None
    assert done.meta() == {"waited_ms": 12, "applied": True, "missing": []}


def test_bound_passed_names_each_projection_and_partition() -> None:
    missing = [
        Missing("graph", "v1", "behind", 2, 1840),
        Missing("vectors", "v1", "unsequenced", 0, 1),
    ]
    text = Waited(5.01, missing, 5.0).warning()
    assert text is not None and text.startswith("after: not yet applied after 5 s by ")
    assert "graph (v1, partition 2: 1,840 ledger entries behind)" in text
    assert "vectors (v1, partition 0: 1 raw record not yet sequenced)" in text
    assert text.endswith("this answer may miss those writes")
    meta = Waited(5.01, missing, 5.0).meta()
    assert meta["applied"] is False and meta["waited_ms"] == 5010
    assert meta["missing"][0] == {
        "projection": "graph", "version": "v1", "partition": 2, "behind": 1840, "reason": "behind"
    }  # fmt: skip


def test_hopeless_position_says_it_can_never_be_applied() -> None:
    missing = [Missing("graph", "v2", "epoch_lost"), Missing("vectors", "v2", "epoch_lost")]
    text = Waited(0.0, missing, 5.0).warning()
    assert text is not None and text.startswith("after: can never be applied here by graph (v2")
    assert "restarted since" in text


def test_foreign_is_403_naming_both_tenants_and_malformed_is_422_naming_after() -> None:
    foreign = refuse(ForeignPosition("zoë-atelier", "voisins-2"))
    assert isinstance(foreign, HTTPException) and foreign.status_code == 403
    assert "zoë-atelier" in str(foreign.detail) and "voisins-2" in str(foreign.detail)
    bad = refuse(MalformedPosition("not a memstream position (bad signature)"))
    assert isinstance(bad, RequestValidationError)
    (error,) = bad.errors()
    assert error["loc"] == ("body", "after") and "bad signature" in error["msg"]


class _Watch(KafkaWatch):
    """The watch's bookkeeping only (never started): records what a wait asks of it."""

    def __init__(self) -> None:
        super().__init__("unused:9092")
        self.calls: list[tuple[list[str], bool]] = []

    def need(self, groups: list[str], on: bool) -> None:
        self.calls.append((groups, on))
        super().need(groups, on)


class _Live:
    """A checkout service whose live version is promoted from v1 to v2 during a wait."""

    def __init__(self) -> None:
        config = ProjectionConfig(embedder="hash-256", embedder_version="1", dim=256)
        made = "2031-01-01T00:00:00Z"
        self.versions = [VersionInfo(name=n, config=config, config_hash="c0ffee", created_at=made)
                         for n in ("v1", "v1", "v2", "v2")]  # fmt: skip

    def live(self) -> VersionInfo:
        return self.versions.pop(0)


class _Polls(_Waiter):
    """A wait whose polls find, in turn, the versions still behind in ``behind``."""

    def __init__(self, watch: KafkaWatch, behind: list[list[str]]) -> None:
        super().__init__(cast(CheckoutService, _Live()), None, None, watch)
        self.behind = behind

    async def _missing(self, position: Position, info: VersionInfo, settings: Any) -> list[Missing]:
        return [Missing("graph", v, "behind") for v in self.behind.pop(0)]


def test_a_promote_during_a_wait_moves_the_watch_to_the_new_versions_groups() -> None:
    watch = _Watch()
    waiter = _Polls(watch, [["v1"], ["v1"], ["v2"], []])
    found = asyncio.run(
        waiter.wait(Position("t", "1700000000", {0: 7}), time.monotonic() + 30, None)
    )
    waiter.release()
    v1 = ["memstream-graph-v1", "memstream-vector-v1"]
    v2 = ["memstream-graph-v2", "memstream-vector-v2"]
    assert found == []
    assert watch.calls == [(v1, True), (v1, False), (v2, True), (v2, False)]
    assert watch._wanted == {} and watch._waiters == 0
