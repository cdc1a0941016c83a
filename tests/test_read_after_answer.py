"""What a read given after= says when it answers: the meta block and the stale warning
(pure), and the refusal each kind of bad position gets."""

from __future__ import annotations

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from memstream.position import ForeignPosition, MalformedPosition
from memstream.projection.progress import Missing
from memstream_api.read_after import Waited, refuse


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
