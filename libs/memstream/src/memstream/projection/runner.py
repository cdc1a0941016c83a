"""Runs one consumer loop per registered projection version, in threads.

The registry decides what is built: a new version gets its own consumer group and starts
from the beginning of the ledger and of ``memory.latents`` (the projectors split the two); a
dropped version's loop stops. A loop does not die of a store: it waits while the store is
unavailable and dead-letters the records the store refuses (``kafka/loop.py``). A loop that
died anyway (a bug, a broker failure) or could not start is counted in
``memstream_consumer_restarts_total`` and started again on a later sync, after a backoff
that doubles with each failure in a row (0.5 s up to 30 s).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from confluent_kafka import Message

from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.loop import BatchLoop
from memstream.kafka.runner import worker_loop
from memstream.kafka.topics import LATENTS, LEDGER
from memstream.metrics import CONSUMER_RESTARTS, CONSUMER_RUNNING
from memstream.projection.versions import FileProjectionRegistry, VersionInfo
from memstream.settings import Settings

log = logging.getLogger(__name__)
RESTART_FIRST_S = 0.5
RESTART_MAX_S = 30.0
# A loop that ran this long before it failed starts its backoff afresh.
HEALTHY_RUN_S = 60.0


class Projector(Protocol):
    dead_letters: DeadLetterWriter  # where the loop sends records a store refuses

    def process(self, msgs: list[Message]) -> None: ...

    def close(self) -> None: ...

    def discard(self) -> None:
        """Delete what this version wrote (its version was dropped)."""


@dataclass
class _Running:
    projector: Projector
    loop: BatchLoop
    thread: threading.Thread
    started: float = field(default_factory=time.monotonic)


@dataclass
class _Failures:
    """Failures in a row of one version's loop, and when it may start again."""

    count: int = 0
    next_start: float = 0.0

    def failed(self, ran_s: float) -> None:
        self.count = 1 if ran_s >= HEALTHY_RUN_S else self.count + 1
        wait = min(RESTART_MAX_S, RESTART_FIRST_S * 2 ** (self.count - 1))
        self.next_start = time.monotonic() + wait


@dataclass
class ProjectionManager:
    settings: Settings
    bootstrap: str
    registry: FileProjectionRegistry
    component: str  # the sink's worker (memstream.sinks): graph or vector projector
    factory: Callable[[VersionInfo], Projector]
    group_of: Callable[[VersionInfo], str]
    running: dict[str, _Running] = field(default_factory=dict)
    failures: dict[str, _Failures] = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    assigned_at: dict[str, float] = field(default_factory=dict)  # version -> last assignment

    def projector(self, version: str) -> Projector | None:
        r = self.running.get(version)
        return r.projector if r is not None else None

    def committed(self, version: str) -> dict[int, int] | None:
        """The ledger offsets the loop of ``version`` committed (partition -> offset: every
        entry below it is applied), or None when it is not running here."""
        r = self.running.get(version)
        return r.loop.committed_offsets(LEDGER) if r is not None else None

    def _start(self, info: VersionInfo, projector: Projector | None = None) -> None:
        """Start the loop of ``info`` (with ``projector``, or a new one from the factory)."""
        group = self.group_of(info)
        if projector is None:
            try:
                projector = self.factory(info)
            except Exception:  # e.g. the graph server down while the schema is ensured
                log.exception("%s: version %s could not start", self.component, info.name)
                self._failed(info.name, group, ran_s=0.0)
                CONSUMER_RUNNING.labels(self.component, group).set(0)
                return
        loop = worker_loop(
            self.bootstrap, self.settings, group, (LEDGER, LATENTS), self.component,
            projector.process, dead_letters=projector.dead_letters,
            on_assign=self._on_assign(info.name), fair=True,
        )  # fmt: skip
        thread = threading.Thread(
            target=self._run, args=(info.name, loop), name=f"{self.component}-{info.name}"
        )
        self.running[info.name] = _Running(projector, loop, thread)
        thread.start()
        log.info("%s: building version %s (group %s)", self.component, info.name, group)

    def _run(self, name: str, loop: BatchLoop) -> None:
        started = time.monotonic()
        try:
            loop.run()
        except Exception:
            log.exception("%s: loop of %s stopped on an error", self.component, name)
            self._failed(name, loop.group, time.monotonic() - started)

    def _failed(self, name: str, group: str, ran_s: float) -> None:
        failures = self.failures.setdefault(name, _Failures())
        failures.failed(ran_s)
        CONSUMER_RESTARTS.labels(self.component, group).inc()
        wait = max(0.0, failures.next_start - time.monotonic())
        log.warning("%s: %s fails %d time(s) in a row; starting it again in %.1fs",
                    self.component, name, failures.count, wait)  # fmt: skip

    def _may_start(self, name: str) -> bool:
        failures = self.failures.get(name)
        return failures is None or time.monotonic() >= failures.next_start

    def _stop(self, name: str, discard: bool = False) -> None:
        r = self.running.pop(name)
        r.loop.stop_event.set()
        r.thread.join(30)
        if discard:
            r.projector.discard()
        r.projector.close()

    def sync(self) -> None:
        """Make the running loops match the registry."""
        with self.lock:
            versions = self.registry.load().versions
            for name in [n for n in self.running if n not in versions]:
                log.info("%s: version %s dropped", self.component, name)
                self._stop(name, discard=True)
            # list() copies the keys in one step: a loop thread's _failed may add one while
            # this runs, and iterating the dict itself would then raise.
            for name in [n for n in list(self.failures) if n not in versions]:
                self.failures.pop(name, None)
            for name, info in versions.items():
                if self.stopping.is_set() or not self._may_start(name):
                    continue  # a failed loop keeps its projector (and index) until then
                r = self.running.get(name)
                if r is not None and not r.thread.is_alive():
                    self._stop(name)
                    r = None
                if r is None:
                    self._start(info)

    def _on_assign(self, name: str) -> Callable[[list[int]], None]:
        def assigned(_partitions: list[int]) -> None:
            self.assigned_at[name] = time.time()

        return assigned

    def after_broker_restart(
        self, since: float, wait_s: float = 60.0, stop_s: float = 120.0
    ) -> None:
        """The broker restarted empty at ``since`` (wall time): positions in the old log mean
        nothing. A loop whose consumer was assigned again since then had them reset by that
        rebalance (to the group's offsets on the new broker); one that was not, within
        ``wait_s``, gets a new consumer and keeps its projector. Consumers are not replaced
        at once: one that leaves while it is rejoining leaves a Tansu group that nobody can
        join for minutes (seen with Tansu's group coordinator)."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and not self.stopping.is_set():
            if all(self.assigned_at.get(n, 0.0) >= since for n in list(self.running)):
                return
            time.sleep(0.2)
        with self.lock:
            versions = self.registry.load().versions
            for name, r in list(self.running.items()):
                if self.assigned_at.get(name, 0.0) >= since or self.stopping.is_set():
                    continue
                log.warning("%s: loop of %s not assigned since the broker restarted; "
                            "new consumer", self.component, name)  # fmt: skip
                r.loop.stop_event.set()
                r.thread.join(stop_s)
                if r.thread.is_alive():
                    log.error("%s: loop of %s did not stop; sync restarts it later",
                              self.component, name)  # fmt: skip
                elif name in versions:
                    self._start(versions[name], r.projector)
                # else: a dropped version; sync discards it

    def run_forever(self, interval: float = 1.0) -> None:
        while not self.stopping.is_set():
            try:
                self.sync()
            except Exception:
                log.exception("%s: sync failed", self.component)
            self.stopping.wait(interval)
        self.stop_all()

    def stop_all(self) -> None:
        self.stopping.set()
        with self.lock:
            for name in list(self.running):
                self._stop(name)
