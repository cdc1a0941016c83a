"""``memstream bench chaos``: kill -9 each process of a loaded stack in turn, count the damage.

A throw-away embedded stack, supervised as ``memstream up`` supervises it, takes a steady HTTP
load for two tenants. Each fault kills one process (broker, graph server, sequencer, archiver,
graph projector, API); the load goes on. Per fault: events accepted (2xx) in its window, how
many reached the ledger, lost and duplicated ones, and the seconds from the kill until an
event accepted after it is in the ledger. At the end: the archived chains verify, and the
graph and vector counts converge to the ledger's.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
from memstream.archive.verify import verify_archive
from memstream.kafka.reading import read_to_end
from memstream.kafka.topics import LEDGER
from memstream.keys import KeyStore
from memstream.projection.status import caught_up, live_version, projection_status
from memstream.settings import Settings

from memstream_cli.bench.stack import throwaway_stack
from memstream_cli.progress import Report
from memstream_cli.stack.supervisor import EmbeddedStack

FAULTS = ("tansu", "falkordb", "sequencer", "archiver", "graph-projector", "api")
TENANTS = ("chaos-a", "chaos-b")
BATCH = 10


@dataclass
class _Load:
    """Posts batches for two tenants until stopped; remembers when each id was accepted."""

    api_url: str
    keys: dict[str, str]
    accepted: dict[str, float] = field(default_factory=dict)  # id -> monotonic time of the 2xx
    refused: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        n = 0
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                for tenant, key in self.keys.items():
                    n += 1
                    if self._post(client, tenant, key, n):
                        continue
                    self.refused += 1
                    self.stop.wait(0.2)
                self.stop.wait(0.02)

    def _post(self, client: httpx.Client, tenant: str, key: str, n: int) -> bool:
        ids = [f"{tenant}-{n}-{i}" for i in range(BATCH)]
        events = [
            {"id": i, "stream": f"s{n % 4}", "type": "message.user", "agent": "load",
             "payload": {"text": f"{tenant} steady note {i}"}}
            for i in ids
        ]  # fmt: skip
        try:
            r = client.post(
                f"{self.api_url}/v1/events",
                json={"events": events},
                headers={"Authorization": f"Bearer {key}"},
            )
        except httpx.HTTPError:
            return False
        if r.status_code != 202:
            return False
        now = time.monotonic()
        with self.lock:
            self.accepted.update(dict.fromkeys(ids, now))
        return True

    def since(self, t: float) -> set[str]:
        with self.lock:
            return {i for i, at in self.accepted.items() if at >= t}


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
        after = load.since(killed)
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


def run_chaos_bench(progress: Report, settle_s: float = 5.0) -> dict[str, Any]:
    """The table's rows: one per fault, plus verification and convergence at the end."""
    with throwaway_stack(progress) as (stack, settings):
        supervisor = threading.Thread(target=stack.supervise, name="supervise", daemon=True)
        supervisor.start()
        store = KeyStore.from_settings(settings)
        keys = {t: store.create(t) for t in TENANTS}
        assert stack.info is not None
        load = _Load(stack.info.api_url, keys)
        loader = threading.Thread(target=load.run, name="load")
        loader.start()
        time.sleep(settle_s)
        rows = []
        for name in FAULTS:
            progress(f"kill -9 {name}")
            rows.append(_fault(stack, load, name, settle_s))
        load.stop.set()
        loader.join(60)
        progress("waiting for every accepted event to reach the ledger")
        accepted = set(load.accepted)
        _wait(lambda: accepted <= set(_ledger_ids(stack.bootstrap)), 180)
        counts = _ledger_ids(stack.bootstrap)
        report = verify_archive(settings.archive_dir)
        metrics = list(stack.info.metrics_endpoints)
        converge_s = _wait(lambda: _converged(settings, stack.bootstrap, metrics), 300)
        stack.stopping.set()
        supervisor.join(10)
        return _report(rows, load, counts, report.broken is None, converge_s)


def _report(
    rows: list[dict[str, Any]],
    load: _Load,
    counts: Counter[str],
    verified: bool,
    converge_s: float | None,
) -> dict[str, Any]:
    ends = [r["killed_at"] for r in rows[1:]] + [float("inf")]
    faults = []
    for row, end in zip(rows, ends, strict=True):
        window = {i for i, at in load.accepted.items() if row["killed_at"] <= at < end}
        ledgered = {i for i in window if counts[i] > 0}
        faults.append(
            {
                "fault": row["fault"],
                "accepted": len(window),
                "ledgered": len(ledgered),
                "lost": len(window - ledgered),
                "duplicated": sum(1 for i in window if counts[i] > 1),
                "recover_s": None if row["recover_s"] is None else round(row["recover_s"], 1),
            }
        )
    return {
        "faults": faults,
        "accepted": len(load.accepted),
        "refused_requests": load.refused,
        "lost": sum(f["lost"] for f in faults),
        "duplicated": sum(1 for c in counts.values() if c > 1),
        "chain_verifies": verified,
        "projections_converged": converge_s is not None,
        "converge_s": None if converge_s is None else round(converge_s, 1),
    }
