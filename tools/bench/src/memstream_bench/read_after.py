"""``bench read-after``: does a write show in the very next read given its position while
another tenant's bulk is still in the pipeline?

Tenant A emits a bulk through the SDK at broker speed (keyed as ``bench load``'s bulk). Once
it is all in the raw topic, tenant B posts a marker event over HTTP (a code word no other
event holds) and at once checks out a question about it, given the write's position as
``after``; then the same without ``after`` (the same-run baseline), once per probe. A probe
counts as cited when the first answer's packet cites the marker event.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psutil
from memstream.checkout.service import cited_ids
from memstream.client import MemoryHttpClient, MemstreamHttpError
from memstream.keys import KeyStore
from memstream.ledger.opening import data_keys
from memstream.proof import Prover, producer_secret
from memstream.records.packet import CheckoutPacket
from memstream.sdk import emit_by_tenant
from memstream.settings import Settings
from memstream.stack.epoch import read_epoch
from memstream_cli.progress import Report, stage
from memstream_cli.stack.stackfile import StackInfo

from memstream_bench.load import visible, workload
from memstream_bench.stack import throwaway_stack

WRITER = "writer-b"  # tenant B; the bulk is workload()'s tenant-0
PROBE_GAP_S = 0.5
LIVE_TIMEOUT_S = 300.0
VISIBLE_TIMEOUT_S = 3600.0


@dataclass
class Arm:
    """The probes of one arm: with ``after`` (the write's position) or without."""

    after: bool
    probes: int = 0
    cited: int = 0
    stale: int = 0
    during_backlog: int = 0  # posted before the bulk was visible to checkout
    silent: int = 0  # neither cited nor warned stale: what after= must never answer
    waited_ms: list[float] = field(default_factory=list)
    checkout_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        waited = self.waited_ms or [0.0]
        return {
            "probes": self.probes,
            "cited_first_answer": self.cited,
            "stale": self.stale,
            "missed_silently": self.silent,
            "during_backlog": self.during_backlog,
            "waited_ms_median": round(statistics.median(waited)),
            "waited_ms_max": round(max(waited)),
            "checkout_ms_median": round(statistics.median(self.checkout_ms or [0.0]), 1),
        }


class _Bulk:
    """Tenant A's bulk: emitted at once, then watched until checkout can see all of it."""

    def __init__(self, info: StackInfo, settings: Settings, n: int, progress: Report) -> None:
        self.info, self.settings, self.n = info, settings, n
        self.step = stage(progress, f"tenant A: {n} events through the SDK, tenant B probing", n)
        self.t0 = 0.0
        self.emitted_s = 0.0
        self.visible_s = 0.0
        self.seen = threading.Event()
        self.failed: BaseException | None = None
        self._watcher = threading.Thread(target=self._watch, daemon=True)

    def emit(self) -> None:
        events = workload(self.n, 1)
        self.t0 = time.perf_counter()
        epoch = read_epoch(self.settings.data_dir)
        emit_by_tenant(
            self.info.kafka_bootstrap, events, data_keys(self.settings), epoch=epoch,
            prover=Prover.internal(producer_secret(self.settings)),
        )  # fmt: skip
        self.emitted_s = time.perf_counter() - self.t0
        self._watcher.start()

    def _watch(self) -> None:
        # Tenant B's markers count in the live version's totals too: the bulk reads as
        # visible at most 2 x probes events early.
        try:
            deadline = time.monotonic() + VISIBLE_TIMEOUT_S
            while not visible(self.settings, self.info, self.n, self.step):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the bulk was not visible after {VISIBLE_TIMEOUT_S:g}s")
                time.sleep(0.25)
            self.visible_s = time.perf_counter() - self.t0
        except BaseException as exc:  # re-raised in the bench's thread by wait()
            self.failed = exc
        finally:
            self.seen.set()

    def wait(self) -> None:
        self._watcher.join()
        if self.failed is not None:
            raise self.failed


def run_read_after_bench(bulk: int, probes: int, progress: Report) -> dict[str, Any]:
    """``bulk`` events of tenant A, then ``probes`` marker writes of tenant B, each read at
    once with ``after`` and (the baseline) without."""
    with throwaway_stack(progress) as (stack, settings):
        assert stack.info is not None
        return _measure(stack.info, settings, bulk, probes, progress)


def _measure(
    info: StackInfo, settings: Settings, n: int, probes: int, progress: Report
) -> dict[str, Any]:
    load_1m = os.getloadavg()[0]
    key = KeyStore(settings.resolved_keys_file()).create(WRITER)
    timeout = settings.read_after_max_wait_s + 60  # the wait plus the checkout itself
    arms = [Arm(after=True), Arm(after=False)]
    with MemoryHttpClient(info.api_url, key, timeout=timeout) as http:
        progress("waiting for the live version's index to answer")
        _wait_live(http)
        run = _Bulk(info, settings, n, progress)
        run.emit()
        for _ in range(probes):
            for arm in arms:
                _probe(http, arm, backlog=not run.seen.is_set())
            time.sleep(PROBE_GAP_S)
        run.wait()
    return {
        "bulk_events": n,
        "bulk_emit_events_per_s": round(n / run.emitted_s),
        "bulk_visible_s": round(run.visible_s, 2),
        "bulk_ingest_events_per_s": round(n / run.visible_s),
        "probes": probes,
        "read_after_max_wait_s": settings.read_after_max_wait_s,
        "after": arms[0].summary(),
        "baseline": arms[1].summary(),
        "machine": {
            "cpus": psutil.cpu_count(),
            "date": datetime.now(UTC).date().isoformat(),
            "load_1m_at_start": round(load_1m, 2),
        },
    }


def _wait_live(http: MemoryHttpClient) -> None:
    deadline = time.monotonic() + LIVE_TIMEOUT_S
    while True:
        try:
            http.checkout("Is anything here yet?")
            return
        except MemstreamHttpError as e:
            if e.status != 503 or time.monotonic() > deadline:  # 503: the index is opening
                raise
        time.sleep(0.5)


def _probe(http: MemoryHttpClient, arm: Arm, backlog: bool) -> None:
    """Post one marker, check out a question about it at once; count what the answer shows."""
    subject, word = f"locker{uuid.uuid4().hex[:8]}", f"word{uuid.uuid4().hex[:8]}"
    marker = {
        "stream": "notes",
        "type": "message.user",
        "agent": "Bea",
        "payload": {"text": f"The code word for {subject} is {word}."},
    }
    ids, position = http.emit_written([marker])
    started = time.perf_counter()
    packet = http.checkout(
        f"What is the code word for {subject}?", after=position if arm.after else None
    )
    arm.checkout_ms.append((time.perf_counter() - started) * 1000)
    arm.probes += 1
    arm.during_backlog += backlog
    shown = {i.split("#")[0] for i in cited_ids(CheckoutPacket.model_validate(packet))}
    cited = ids[0] in shown
    stale = any(w["kind"] == "stale" for w in packet["warnings"])
    arm.cited += cited
    arm.stale += stale
    arm.silent += not (cited or stale)
    if arm.after:
        arm.waited_ms.append(float(packet["meta"]["after"]["waited_ms"]))
