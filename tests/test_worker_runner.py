"""The runner every consumer-group worker ends in, and the learning records' partition key."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from memstream.kafka.loop import BatchLoop
from memstream.kafka.route import tenant_key
from memstream.kafka.runner import LoopFailed, run_loops
from memstream.learning.retrospective import watched


class FakeLoop(BatchLoop):
    """A loop with no consumer: runs ``body`` until the shared stop is set."""

    def __init__(self, group: str, stop: threading.Event, body: Any) -> None:
        self.group, self.stop_event, self._body = group, stop, body

    def run(self) -> None:
        self._body(self.stop_event)


def test_every_loop_runs_until_the_stop_they_share() -> None:
    stop, ran = threading.Event(), []

    def work(name: str) -> Any:
        def body(s: threading.Event) -> None:
            ran.append(name)
            if len(ran) == 2:
                s.set()
            s.wait(10)

        return body

    run_loops([FakeLoop("a", stop, work("a")), FakeLoop("b", stop, work("b"))])
    assert sorted(ran) == ["a", "b"]


def test_a_loop_that_raises_stops_the_others_and_fails_the_worker() -> None:
    stop = threading.Event()

    def broken(_s: threading.Event) -> None:
        raise RuntimeError("a bug of ours")

    with pytest.raises(LoopFailed) as info:
        run_loops([FakeLoop("ok", stop, lambda s: s.wait(30)), FakeLoop("bad", stop, broken)])
    assert isinstance(info.value.__cause__, RuntimeError) and stop.is_set()


def test_loops_with_stops_of_their_own_are_refused() -> None:
    with pytest.raises(ValueError, match="share one stop"):
        run_loops([FakeLoop("a", threading.Event(), None), FakeLoop("b", threading.Event(), None)])


@pytest.mark.parametrize(
    ("key", "tenant"),
    [
        (b"acme/errands", b"acme"),
        (b"t-1.x/stream/with/slashes", b"t-1.x"),
        (b"acme", None),  # no stream: not a ledger key
        (b"/errands", None),
        (b"", None),
        (None, None),
    ],
)
def test_learning_records_are_keyed_by_the_ledger_keys_tenant(
    key: bytes | None, tenant: bytes | None
) -> None:
    assert tenant_key(key) == tenant


def test_only_what_the_pass_reads_is_routed() -> None:
    assert watched(b'{"type":"task.outcome","tenant":"t"}')
    assert watched(b'{"type":"memory.feedback"}')
    assert not watched(b'{"type":"message.user","payload":{"text":"task.outcome"}}')
    assert not watched(None)
