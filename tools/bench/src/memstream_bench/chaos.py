"""``memstream bench chaos``: kill -9 each process of a loaded stack in turn, count the damage.

A throw-away embedded stack, supervised as ``memstream up`` supervises it, takes a steady HTTP
load for two tenants. Each fault kills one process (broker, graph server, sequencer, archiver,
graph projector, API); the load goes on, and a batch that was not answered 202 is sent again
with the same ids, as a client should. Per fault (from its kill to the next): events accepted
(2xx), how many reached the ledger, lost and duplicated ones, requests refused (connection
refused), other transport errors (reset, timeout) and non-202 answers; the longest gap (the
longest time without a 202, the kill counting as the gap's start) and the longest wait (the
longest time one batch took from its first send to its 202, retries included); and the
seconds from the kill until an event accepted after it is in the ledger. A first row, before
any kill, is the same load undisturbed. At the end: the archived chains verify, and the graph
and vector counts converge to the ledger's.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import httpx
import orjson
from memstream.archive.verify import verify_archive
from memstream.kafka.reading import read_to_end
from memstream.kafka.topics import LEDGER
from memstream.keys import KeyStore
from memstream.projection.status import caught_up, live_version, projection_status
from memstream.settings import Settings
from memstream_cli.progress import Report
from memstream_cli.stack.supervisor import EmbeddedStack

from memstream_bench.faults import FAULTS
from memstream_bench.stack import throwaway_stack

BASELINE = "none"  # the row of the undisturbed load before the first kill
TENANTS = ("chaos-a", "chaos-b")
BATCH = 10
RETRY_S = 0.2


@dataclass(frozen=True)
class Answer:
    """One batch accepted: when it was first sent and when the 202 came."""

    first_sent: float
    answered: float
    ids: tuple[str, ...]


@dataclass(frozen=True)
class Failure:
    """One request that got no 202: ``kind`` is refused, transport or status; ``what`` names
    the error (its class, or the HTTP status)."""

    at: float
    kind: str
    what: str = ""


@dataclass
class _Load:
    """Posts batches for two tenants until stopped, each batch until it is accepted."""

    api_url: str
    keys: dict[str, str]
    answers: list[Answer] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        n = 0
        with httpx.Client(timeout=60) as client:
            while not self.stop.is_set():
                for tenant, key in self.keys.items():
                    n += 1
                    self._deliver(client, tenant, key, n)
                self.stop.wait(0.02)

    def _deliver(self, client: httpx.Client, tenant: str, key: str, n: int) -> None:
        ids = tuple(f"{tenant}-{n}-{i}" for i in range(BATCH))
        events = [
            {"id": i, "stream": f"s{n % 4}", "type": "message.user", "agent": "load",
             "payload": {"text": f"{tenant} steady note {i}"}}
            for i in ids
        ]  # fmt: skip
        first = time.monotonic()
        while not self.stop.is_set():
            sent = time.monotonic()
            failure = self._post(client, key, events, sent)
            if failure is None:
                with self.lock:
                    self.answers.append(Answer(first, time.monotonic(), ids))
                return
            with self.lock:
                self.failures.append(failure)
            self.stop.wait(RETRY_S)

    def _post(
        self, client: httpx.Client, key: str, events: list[dict[str, Any]], sent: float
    ) -> Failure | None:
        """None when accepted, else what went wrong."""
        try:
            r = client.post(
                f"{self.api_url}/v1/events",
                json={"events": events},
                headers={"Authorization": f"Bearer {key}"},
            )
        except httpx.ConnectError as exc:
            return Failure(sent, "refused", type(exc).__name__)
        except httpx.HTTPError as exc:
            return Failure(sent, "transport", type(exc).__name__)
        return None if r.status_code == 202 else Failure(sent, "status", str(r.status_code))

    def accepted_since(self, t: float) -> set[str]:
        with self.lock:
            return {i for a in self.answers if a.answered >= t for i in a.ids}


def _pids(stack: EmbeddedStack) -> dict[str, int]:
    out = {s.name: s.proc.pid for s in stack.servers}
    out.update({w.name: w.proc.pid for w in stack.workers if w.proc is not None})
    return out


def _ledger_ids(bootstrap: str) -> Counter[str]:
    return Counter(
        str(orjson.loads(m.value() or b"{}").get("id")) for m in read_to_end(bootstrap, LEDGER)
    )


def _fault(stack: EmbeddedStack, load: _Load, name: str, settle_s: float) -> dict[str, Any]:
    """Kill ``name``; wait until an event accepted after the kill is ledgered."""
    os.kill(_pids(stack)[name], signal.SIGKILL)
    killed = time.monotonic()
    recovered: float | None = None
    deadline = killed + 180
    while recovered is None and time.monotonic() < deadline:
        time.sleep(0.5)
        after = load.accepted_since(killed)
        if after and after & set(_ledger_ids(stack.bootstrap)):
            recovered = time.monotonic() - killed
    time.sleep(settle_s)
    return {"fault": name, "killed_at": killed, "recover_s": recovered}


def _converged(settings: Settings, bootstrap: str, metrics: list[str]) -> bool:
    live = live_version(projection_status(settings, bootstrap, metrics))
    return live is not None and caught_up(live, exact=True)


def _wait(cond: Callable[[], bool], timeout: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if cond():
                return time.monotonic() - started
        except Exception:  # a component still coming back: ask again
            pass
        time.sleep(1.0)
    return None


def run_chaos_bench(
    progress: Report, settle_s: float = 5.0, faults: tuple[str, ...] = FAULTS
) -> dict[str, Any]:
    """The table's rows: one per fault (``faults``, in order, each given ``settle_s`` after
    its recovery), plus verification and convergence at the end."""
    unknown = set(faults) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}")
    with throwaway_stack(progress) as (stack, settings):
        supervisor = threading.Thread(target=stack.supervise, name="supervise", daemon=True)
        supervisor.start()
        store = KeyStore.from_settings(settings)
        keys = {t: store.create(t) for t in TENANTS}
        assert stack.info is not None
        load = _Load(stack.info.api_url, keys)
        loader = threading.Thread(target=load.run, name="load")
        rows: list[dict[str, Any]] = [
            {"fault": BASELINE, "killed_at": time.monotonic(), "recover_s": None}
        ]
        loader.start()
        time.sleep(settle_s * 2)
        for name in faults:
            progress(f"kill -9 {name}")
            rows.append(_fault(stack, load, name, settle_s))
        ended = time.monotonic()
        load.stop.set()
        loader.join(60)
        progress("waiting for every accepted event to reach the ledger")
        accepted = {i for a in load.answers for i in a.ids}
        _wait(lambda: accepted <= set(_ledger_ids(stack.bootstrap)), 180)
        counts = _ledger_ids(stack.bootstrap)
        report = verify_archive(settings.archive_dir)
        metrics = list(stack.info.metrics_endpoints)
        converge_s = _wait(lambda: _converged(settings, stack.bootstrap, metrics), 300)
        stack.stopping.set()
        supervisor.join(10)
        table = fault_rows(rows, ended, load.answers, load.failures, counts)
        return {
            "faults": table,
            "accepted": len(accepted),
            "refused_requests": sum(f["refused"] for f in table),
            "transport_errors": sum(f["transport_errors"] for f in table),
            "lost": sum(f["lost"] for f in table),
            "duplicated": sum(1 for c in counts.values() if c > 1),
            "chain_verifies": report.broken is None,
            "projections_converged": converge_s is not None,
            "converge_s": None if converge_s is None else round(converge_s, 1),
            "machine": {"cpus": os.cpu_count(), "date": datetime.now(UTC).date().isoformat()},
        }


def fault_rows(
    rows: list[dict[str, Any]],
    ended: float,
    answers: list[Answer],
    failures: list[Failure],
    counts: Counter[str],
) -> list[dict[str, Any]]:
    """One row per fault over its window, from its kill to the next kill (the last: to
    ``ended``, when the load stopped). An answer belongs to the window its 202 came in, a
    failure to the window it was sent in."""
    starts = [r["killed_at"] for r in rows]
    out = []
    for row, start, end in zip(rows, starts, [*starts[1:], ended], strict=True):
        mine = [a for a in answers if start <= a.answered < end]
        window = {i for a in mine for i in a.ids}
        ledgered = {i for i in window if counts[i] > 0}
        in_window = [f for f in failures if start <= f.at < end]
        failed = Counter(f.kind for f in in_window)
        out.append(
            {
                "fault": row["fault"],
                "accepted": len(window),
                "ledgered": len(ledgered),
                "lost": len(window - ledgered),
                "duplicated": sum(1 for i in window if counts[i] > 1),
                "refused": failed["refused"],
                "transport_errors": failed["transport"],
                "non_202": failed["status"],
                "errors": dict(Counter(f.what for f in in_window if f.kind != "refused")),
                "longest_gap_s": round(longest_gap(start, end, [a.answered for a in mine]), 2),
                "longest_wait_s": round(
                    max((a.answered - a.first_sent for a in mine), default=0.0), 2
                ),
                "recover_s": None if row["recover_s"] is None else round(row["recover_s"], 1),
            }
        )
    return out


def longest_gap(start: float, end: float, answered: list[float]) -> float:
    """The longest time in ``[start, end)`` without a 202: from ``start`` to the first answer,
    between successive answers, and from the last one to ``end``."""
    marks = [start, *sorted(answered), end]
    return max(b - a for a, b in pairwise(marks))
