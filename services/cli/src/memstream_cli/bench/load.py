"""``bench load``: a synthetic multi-tenant workload through the whole stack.

Reports ingest (emit -> visible to checkout), freshness measured by probe events (emit ->
found by recall) twice: during the bulk ingest (a backlog as large as the burst makes it grow
with N) and under a steady load below capacity (the figure an operator sees), checkout
latency at the stored size, peak RSS per process, and the raw broker produce rate of the
same run.
"""

from __future__ import annotations

import contextlib
import random
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psutil
from memstream.client import MemoryHttpClient
from memstream.events import EventIn
from memstream.keys import KeyStore
from memstream.metrics import scrape
from memstream.projection.projectors import OPTIMIZE_IDLE_S, OPTIMIZE_MIN_NEW
from memstream.projection.status import projection_status
from memstream.sdk import MemoryClient, emit_by_tenant
from memstream.settings import Settings

from memstream_cli.bench.ingest import raw_produce_rate
from memstream_cli.bench.stack import throwaway_stack
from memstream_cli.stack.supervisor import EmbeddedStack

Progress = Callable[[str], None]
_PRODUCTS = ["laptop", "router", "headset", "monitor", "keyboard", "printer", "camera", "phone"]
_CITIES = ["Lisbon", "Oslo", "Denver", "Nairobi", "Osaka", "Lima", "Tallinn", "Perth"]
_NAMES = ["Maria", "Tomas", "Aiko", "Priya", "Jonas", "Lea", "Omar", "Grace"]


def workload(n: int, tenants: int, seed: int = 1) -> list[Any]:
    """Agents chatting, calling tools, asserting (and later updating) facts, preferences, tasks."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    run = uuid.uuid4().hex[:6]
    out: list[Any] = []
    for i in range(n):
        tenant = f"tenant-{i % tenants}"
        who = rng.choice(_NAMES)
        product, city = rng.choice(_PRODUCTS), rng.choice(_CITIES)
        roll = rng.random()
        payload: dict[str, Any]
        if roll < 0.45:
            type_, payload = (
                "message.user",
                {
                    "text": f"{who} ordered a {product} for ${rng.randint(20, 2000)} "
                    f"to ship to {city}."
                },
            )
        elif roll < 0.6:
            type_, payload = (
                "message.assistant",
                {"text": f"The {product} for {who} is on its way to {city}."},
            )
        elif roll < 0.7:
            type_, payload = "tool.call", {"tool": "orders.track", "arguments": {"who": who}}
        elif roll < 0.8:
            type_, payload = (
                "tool.result",
                {
                    "tool": "orders.track",
                    "output": {"status": rng.choice(["shipped", "delayed", "delivered"])},
                },
            )
        elif roll < 0.9:
            type_, payload = (
                "fact.asserted",
                {"subject": who, "predicate": "lives_in", "object": city},
            )
        elif roll < 0.95:
            type_, payload = "preference.set", {"subject": who, "key": "channel", "value": "email"}
        else:
            type_, payload = (
                "task.outcome",
                {
                    "task_id": f"t{i}",
                    "status": rng.choice(["success", "failure"]),
                    "text": f"delivery of the {product}",
                },
            )
        out.append(
            EventIn(
                id=f"{run}-{i}",
                stream=f"agent-{i % 16}",
                agent=who,
                type=type_,
                occurred_at=start + timedelta(minutes=i),
                payload=payload,
            ).complete(tenant)
        )
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


class RssSampler:
    """Peak resident memory per stack process, sampled in the background."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.peak: dict[str, int] = dict.fromkeys(pids, 0)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            for name, p in self.procs.items():
                with contextlib.suppress(psutil.Error):  # a restarting worker is not an error
                    self.peak[name] = max(self.peak[name], p.memory_info().rss)

    def close(self) -> dict[str, float]:
        self.stop.set()
        self.thread.join(2)
        return {k: round(v / 2**20, 1) for k, v in self.peak.items()}


def run_load_bench(
    n: int,
    tenants: int,
    progress: Progress,
    checkouts: int = 200,
    steady_rate: int = 500,
    steady_s: float = 15.0,
) -> dict[str, Any]:
    """Bulk ingest of ``n`` events (burst freshness), then ``steady_rate`` events/s for
    ``steady_s`` seconds (steady freshness), then checkouts at the stored size."""
    with throwaway_stack(progress) as (stack, settings):
        return _measure(stack, settings, n, tenants, checkouts, progress, steady_rate, steady_s)


BUILDING = "memstream_vector_optimizing"
UNINDEXED = "memstream_vector_unoptimized_points"


def _wait_index_built(endpoints: list[str], timeout: float = 1800) -> float:
    """Seconds until the embedded vector index has no build running or due.

    Checkouts are measured on the built index (steady state); the build itself runs when
    writes pause and shares the machine's cores with everything else while it lasts.
    """
    t0 = time.perf_counter()
    time.sleep(OPTIMIZE_IDLE_S + 2)  # a build starts only after writes pause
    while time.perf_counter() - t0 < timeout:
        samples = scrape(endpoints, {BUILDING, UNINDEXED})
        busy = sum(x.value for x in samples if x.name == BUILDING)
        due = sum(x.value for x in samples if x.name == UNINDEXED)
        if busy == 0 and due < OPTIMIZE_MIN_NEW:
            return time.perf_counter() - t0
        time.sleep(1)
    raise TimeoutError(f"the vector index was still building after {timeout:g}s")


def _paced_emit(bootstrap: str, events: list[Any], rate: int) -> float:
    """Emit ``events`` at about ``rate`` per second (ticks of 100 ms); returns the rate held."""
    clients: dict[str, MemoryClient] = {}
    per_tick = max(1, rate // 10)
    t0 = time.perf_counter()
    try:
        for i in range(0, len(events), per_tick):
            for e in events[i : i + per_tick]:
                if e.tenant not in clients:
                    clients[e.tenant] = MemoryClient(bootstrap, e.tenant)
                clients[e.tenant].emit_event(e)
            for c in clients.values():
                c.flush(10)
            due = t0 + (i + per_tick) / rate
            time.sleep(max(0.0, due - time.perf_counter()))
    finally:
        for c in clients.values():
            c.close()
    return len(events) / (time.perf_counter() - t0)


def _visible(settings: Settings, bootstrap: str, metrics: list[str], n: int) -> bool:
    doc = projection_status(settings, bootstrap, metrics)
    live = [v for v in doc["versions"] if v["live"]]
    c = live[0]["counts"] if live else {}
    return bool(live and c["graph_events"] >= n and c["vector_points"] >= n)


def _measure(
    stack: EmbeddedStack,
    settings: Settings,
    n: int,
    tenants: int,
    checkouts: int,
    progress: Progress,
    steady_rate: int,
    steady_s: float,
) -> dict[str, Any]:
    assert stack.info is not None
    bootstrap, api, metrics = (
        stack.info.kafka_bootstrap,
        stack.info.api_url,
        stack.info.metrics_endpoints,
    )
    pids = {name: c.pid for name, c in stack.info.components.items()}
    keys = KeyStore(settings.resolved_keys_file())
    progress(f"generating {n} events for {tenants} tenants")
    events = workload(n, tenants)
    progress("raw broker produce rate (same envelopes, scratch topic)")
    raw = raw_produce_rate(
        bootstrap,
        [(e.key, e.model_dump_json().encode()) for e in events],
        settings.topic_partitions,
    )
    probe_key = keys.create("probe")
    burst: list[float] = []
    stop_probes = threading.Event()

    def probes(sink: list[float]) -> None:
        with MemoryClient(bootstrap, "probe") as sdk, MemoryHttpClient(api, probe_key) as http:
            while not stop_probes.is_set():
                token = f"probe{uuid.uuid4().hex[:12]}"
                sent = time.perf_counter()
                sdk.emit("probes", "observation", {"text": f"marker {token}"})
                sdk.flush(10)
                while time.perf_counter() - sent < 30:
                    if any(token in i["text"] for i in http.recall(token, k=3, mode="sparse")):
                        sink.append((time.perf_counter() - sent) * 1000)
                        break
                    time.sleep(0.01)
                stop_probes.wait(0.5)

    rss = RssSampler(pids)
    progress(f"emitting {n} events through the SDK, with freshness probes")
    t0 = time.perf_counter()
    prober = threading.Thread(target=probes, args=(burst,), daemon=True)
    prober.start()
    emit_by_tenant(bootstrap, events)
    emitted_s = time.perf_counter() - t0
    deadline = time.monotonic() + 3600
    while not _visible(settings, bootstrap, metrics, n):
        if time.monotonic() > deadline:
            raise TimeoutError("projections did not catch up within an hour")
        time.sleep(0.25)
    visible_s = time.perf_counter() - t0
    stop_probes.set()
    prober.join(40)
    progress(f"steady load: {steady_rate} events/s for {steady_s:g} s, with freshness probes")
    steady: list[float] = []
    stop_probes.clear()
    prober = threading.Thread(target=probes, args=(steady,), daemon=True)
    prober.start()
    paced = workload(int(steady_rate * steady_s), tenants, seed=2)
    steady_achieved = _paced_emit(bootstrap, paced, steady_rate)
    stop_probes.set()
    prober.join(40)
    build_wait_s = 0.0
    if settings.vector_optimize:
        progress("waiting for the vector index build (HNSW) to finish")
        build_wait_s = _wait_index_built(metrics)
    progress(f"{checkouts} checkouts at {n} stored events")
    latencies: list[float] = []
    parts: dict[str, list[float]] = {}  # where a checkout spends its time, per phase and lane
    rng = random.Random(7)
    tenant_keys = {t: keys.create(t) for t in sorted({e.tenant for e in events})}
    clients = {t: MemoryHttpClient(api, k) for t, k in tenant_keys.items()}
    queries = [
        "Where does {who} live now?",
        "How much did {who} spend on orders in total?",
        "What did {who} order?",
        "Which channel does {who} prefer?",
    ]
    try:
        for _ in range(checkouts):
            tenant = rng.choice(list(clients))
            q = rng.choice(queries).format(who=rng.choice(_NAMES))
            started = time.perf_counter()
            packet = clients[tenant].checkout(q)
            latencies.append((time.perf_counter() - started) * 1000)
            meta = packet.get("meta") or {}
            for part in ("phases_ms", "lanes_ms"):
                for name, ms in (meta.get(part) or {}).items():
                    parts.setdefault(f"{part[:-3]}.{name}", []).append(float(ms))
    finally:
        for c in clients.values():
            c.close()
    peak = rss.close()
    return {
        "events": n,
        "tenants": tenants,
        "broker_produce_events_per_s": round(raw),
        "emit_events_per_s": round(n / emitted_s),
        "ingest_events_per_s": round(n / visible_s),
        "ingest_seconds": round(visible_s, 3),
        "steady_events_per_s": round(steady_achieved),
        "events_at_checkout": n + len(paced),
        "vector_optimize": settings.vector_optimize,
        "index_build_wait_s": round(build_wait_s, 1),
        "freshness_probes": len(steady),
        "freshness_p50_ms": round(_pct(steady, 0.5), 1),
        "freshness_p95_ms": round(_pct(steady, 0.95), 1),
        "freshness_burst_probes": len(burst),
        "freshness_burst_p50_ms": round(_pct(burst, 0.5), 1),
        "freshness_burst_p95_ms": round(_pct(burst, 0.95), 1),
        "checkouts": len(latencies),
        "checkout_p50_ms": round(_pct(latencies, 0.5), 2),
        "checkout_p95_ms": round(_pct(latencies, 0.95), 2),
        "checkout_mean_ms": round(statistics.fmean(latencies), 2) if latencies else 0.0,
        "checkout_median_ms_by_part": {k: round(_pct(v, 0.5), 2) for k, v in sorted(parts.items())},
        "peak_rss_mb": peak,
        "machine": {"cpus": psutil.cpu_count(), "date": datetime.now(UTC).date().isoformat()},
    }
