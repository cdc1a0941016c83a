"""The runner every consumer-group worker ends in: its loops, one stop, crash loudly.

A worker builds its :class:`~memstream.kafka.loop.BatchLoop` (or several, sharing one
``stop_event``) and hands them here. SIGTERM and SIGINT set the stop: each loop finishes its
batch, commits and leaves its group. Rebalances need nothing more: a loop processes and
commits a batch before it polls again, and the revoke callback runs inside that poll, so a
partition leaves a member with everything processed committed (a handler that holds a
commit back, such as an outcome waiting for its trace, is read again by the next owner).
A loop that raises (a bug of ours, not bad data: that is dead-lettered) stops the others and
the process exits non-zero, for the supervisor to restart it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Message

from memstream.kafka.clients import make_consumer
from memstream.kafka.loop import BatchLoop, Positions, tune_gc_for_batches
from memstream.settings import Settings
from memstream.stopping import install_stop

log = logging.getLogger(__name__)


def worker_loop(
    bootstrap: str,
    settings: Settings,
    group: str,
    topics: Sequence[str],
    component: str,
    process: Callable[[list[Message]], Positions | None],
    **hooks: Any,
) -> BatchLoop:
    """The loop of consumer group ``group`` over ``topics`` (the first is its main topic),
    built the one way every worker builds its loops: its consumer, the batch settings, and
    with ``fair=True`` the tenant-fair read-ahead. ``hooks``: the loop's other fields
    (``on_assign``, ``on_revoke``, ``idle``, ``stop_event``, ``dead_letters`` ...)."""
    topic, *also = topics
    if hooks.get("fair"):
        hooks.setdefault("readahead_bytes", settings.consumer_readahead_bytes)
        hooks.setdefault("fair_batch", settings.fair_batch)
    return BatchLoop(
        consumer=make_consumer(bootstrap, group, settings),
        topic=topic,
        also=tuple(also),
        group=group,
        component=component,
        process=process,
        batch_size=settings.batch_size,
        wait_s=settings.batch_wait_s,
        **hooks,
    )


class LoopFailed(RuntimeError):
    """One of the worker's loops raised; the cause is chained."""


def run_loops(loops: Sequence[BatchLoop]) -> None:
    """Run every loop until the stop they share is set; the first to raise ends them all and
    is raised here as :class:`LoopFailed`."""
    if not loops:
        raise ValueError("a worker runs at least one loop")
    stop = loops[0].stop_event
    if any(loop.stop_event is not stop for loop in loops):
        raise ValueError("the loops of one worker share one stop event")
    install_stop(stop)
    tune_gc_for_batches()
    if len(loops) == 1:
        loops[0].run()
        return
    failed: list[BaseException] = []

    def _run(loop: BatchLoop) -> None:
        try:
            loop.run()
        except BaseException as exc:
            failed.append(exc)
            stop.set()

    threads = [
        threading.Thread(target=_run, args=(loop,), name=loop.group, daemon=True) for loop in loops
    ]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():  # a timed join: the main thread must stay free for signals
            t.join(0.5)
    if failed:
        raise LoopFailed(f"{len(failed)} of {len(loops)} loops failed") from failed[0]
