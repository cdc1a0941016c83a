"""``bench neighbours``: one tenant floods the read routes; does its neighbour notice?

A throw-away stack holds two tenants' memories (the load bench's generator). Tenant B, one
client at an agent's pace, makes a checkout and a ``/healthz`` call every half second;
quiet windows alternate with windows in which tenant A floods checkout from its own process
(many connections, heavy checkouts, each connection sending its next request as soon as the
last is answered, ignoring ``Retry-After``, as a careless client does), so the machine's
background load falls on both alike. The same stack runs it twice, with the fair share off
(the baseline) and on (the API restarted between them with ``MEMSTREAM_READ_LIMITS``).
Reported: B's latencies quiet and under the flood and their ratio, and every status each
tenant got.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.synchronize import Event as EventType
from typing import Any

import httpx
import psutil
from memstream.keys import KeyStore
from memstream.proof import Prover, producer_secret
from memstream.sdk import emit_by_tenant
from memstream.settings import Settings
from memstream_cli.progress import Report, stage
from memstream_cli.stack.supervisor import EmbeddedStack

from memstream_bench.load import CHECKOUT_QUERIES, settle, workload
from memstream_bench.stack import throwaway_stack
from memstream_bench.stats import percentile

FLOODER, NEIGHBOUR = "tenant-0", "tenant-1"  # the generator's names for two tenants
NAMES = ("Marta", "Tomas", "Aiko", "Priya", "Jonas", "Lea", "Omar", "Grace")
HEAVY = {"max_tokens": 8000, "k": 50}  # A's checkouts: wide pools, big packets
LIMIT_SETTINGS = (
    "read_tenant_concurrency",
    "read_tenant_share",
    "read_tenant_burst_s",
    "read_total_concurrency",
    "read_reserved_slots",
)


def _queries() -> list[str]:
    return [q.format(who=who) for who in NAMES for q in CHECKOUT_QUERIES]


def _status_class(code: int) -> str:
    if code == 429:
        return "429"
    return f"{code // 100}xx"


async def _flood_async(
    api: str, key: str, connections: int, go: EventType, stop: EventType
) -> dict[str, int]:
    counts: Counter[str] = Counter()
    queries = _queries()
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    auth = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=api, headers=auth, timeout=120, limits=limits) as http:

        async def connection(i: int) -> None:
            n = i
            while not stop.is_set():
                if not go.is_set():  # a quiet window
                    await asyncio.sleep(0.02)
                    continue
                body = {"query": queries[n % len(queries)], **HEAVY}
                n += connections
                try:
                    resp = await http.post("/v1/checkout", json=body)
                    counts[_status_class(resp.status_code)] += 1
                except httpx.HTTPError:
                    counts["error"] += 1

        await asyncio.gather(*(connection(i) for i in range(connections)))
    return dict(counts)


def _flood(api: str, key: str, connections: int, go: EventType, stop: EventType, out: Any) -> None:
    """The flooding tenant, in a process of its own (its own interpreter lock): floods
    while ``go`` is set, until ``stop``."""
    out.put(asyncio.run(_flood_async(api, key, connections, go, stop)))


@dataclass
class _Neighbour:
    """Tenant B's one client: a checkout, then ``/healthz``, at an agent's pace."""

    api: str
    key: str
    period_s: float
    checkout_ms: list[float] = field(default_factory=list)
    healthz_ms: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    done: int = 0

    def run(self, http: httpx.Client, seconds: float) -> None:
        queries = _queries()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.monotonic()
            body = {"query": queries[(self.done * 7) % len(queries)]}
            self._timed(self.checkout_ms, lambda b=body: http.post("/v1/checkout", json=b))
            self._timed(self.healthz_ms, lambda: http.get("/healthz"))
            self.done += 1
            time.sleep(max(0.0, started + self.period_s - time.monotonic()))

    def _timed(self, sink: list[float], call: Any) -> None:
        started = time.perf_counter()
        try:
            code = _status_class(call().status_code)
        except httpx.HTTPError:
            code = "error"
        sink.append((time.perf_counter() - started) * 1000)
        self.statuses[code] += 1

    def summary(self) -> dict[str, Any]:
        return {
            "checkouts": len(self.checkout_ms),
            "checkout_p50_ms": round(percentile(self.checkout_ms, 0.5), 1),
            "checkout_p95_ms": round(percentile(self.checkout_ms, 0.95), 1),
            "healthz_p50_ms": round(percentile(self.healthz_ms, 0.5), 1),
            "healthz_p95_ms": round(percentile(self.healthz_ms, 0.95), 1),
            "statuses": dict(self.statuses),
        }


@dataclass(frozen=True)
class _Plan:
    connections: int
    cycles: int
    window_s: float
    period_s: float


def _restart_api(stack: EmbeddedStack, limits: bool, key: str) -> float:
    """The API again with the fair share on or off; seconds until B's checkout answers."""
    assert stack.info is not None
    api = next(w for w in stack.workers if w.name == "api")
    api.stop()
    api.env = {**api.env, "MEMSTREAM_READ_LIMITS": str(limits).lower()}
    started = time.perf_counter()
    api.start()
    auth = {"Authorization": f"Bearer {key}"}
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            resp = httpx.post(
                f"{stack.info.api_url}/v1/checkout",
                json={"query": "ready?"},
                headers=auth,
                timeout=30,
            )
            if resp.status_code == 200:
                return time.perf_counter() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError("the API did not answer checkouts within 300 s of its restart")


def _phase(stack: EmbeddedStack, keys: dict[str, str], limits: bool, plan: _Plan) -> dict[str, Any]:
    """Quiet and flood windows in turn (the machine's background load falls on both alike),
    with the fair share ``limits`` on or off."""
    assert stack.info is not None
    api = stack.info.api_url
    restart_s = _restart_api(stack, limits, keys[NEIGHBOUR])
    quiet = _Neighbour(api, keys[NEIGHBOUR], plan.period_s)
    loud = _Neighbour(api, keys[NEIGHBOUR], plan.period_s)
    ctx = mp.get_context("spawn")
    go, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    args = (api, keys[FLOODER], plan.connections, go, stop, out)
    flooder = ctx.Process(target=_flood, args=args, name="flood", daemon=True)
    flooder.start()
    auth = {"Authorization": f"Bearer {keys[NEIGHBOUR]}"}
    try:
        with httpx.Client(base_url=api, headers=auth, timeout=120) as http:
            for _ in range(plan.cycles):
                quiet.run(http, plan.window_s)
                go.set()
                loud.run(http, plan.window_s)
                go.clear()
    finally:
        stop.set()
    flooder_counts: dict[str, int] = out.get(timeout=300)
    flooder.join(30)
    q, f = quiet.summary(), loud.summary()
    requests = sum(flooder_counts.values())
    flood_s = plan.cycles * plan.window_s
    return {
        "limits": limits,
        "api_restart_s": round(restart_s, 1),
        "quiet": q,
        "flood": f,
        "checkout_p95_ratio": _ratio(f["checkout_p95_ms"], q["checkout_p95_ms"]),
        "checkout_p50_ratio": _ratio(f["checkout_p50_ms"], q["checkout_p50_ms"]),
        "healthz_p95_ratio": _ratio(f["healthz_p95_ms"], q["healthz_p95_ms"]),
        "flooder": {
            "requests": requests,
            "per_s": round(requests / flood_s, 1),
            "statuses": flooder_counts,
        },
    }


def _ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else 0.0


def run_neighbours_bench(
    events: int,
    progress: Report,
    connections: int = 20,
    cycles: int = 3,
    window_s: float = 20.0,
    period_s: float = 0.5,
) -> dict[str, Any]:
    """Fair share off, then on, in one throw-away stack holding ``events`` events of two
    tenants; per setting ``cycles`` quiet and flood windows of ``window_s`` seconds each,
    B starting a checkout every ``period_s`` seconds (or as soon as the last one answered)."""
    plan = _Plan(connections, cycles, window_s, period_s)
    with throwaway_stack(progress) as (stack, settings):
        assert stack.info is not None
        progress(f"emitting {events} events for two tenants")
        prover = Prover.internal(producer_secret(settings))
        emit_by_tenant(stack.info.kafka_bootstrap, workload(events, 2), prover=prover)
        progress("waiting for every consumer to catch up")
        settled = settle(stack.info, settings)
        store = KeyStore(settings.resolved_keys_file())
        keys = {t: store.create(t) for t in (FLOODER, NEIGHBOUR)}
        runs = []
        step = stage(progress, "fair share off, then on: quiet and flood windows in turn", 2)
        for limits in (False, True):
            runs.append(_phase(stack, keys, limits, plan))
            step.advance()
        return _report(events, plan, settled, settings, runs)


def _report(
    events: int, plan: _Plan, settled: float, settings: Settings, runs: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "events": events,
        "flooder": FLOODER,
        "neighbour": NEIGHBOUR,
        "flood_connections": plan.connections,
        "flood_checkout": HEAVY,
        "cycles": plan.cycles,
        "window_s": plan.window_s,
        "neighbour_period_s": plan.period_s,
        "settle_s": round(settled, 1),
        "limits": {name: getattr(settings, name) for name in LIMIT_SETTINGS},
        "runs": runs,
        "machine": {"cpus": psutil.cpu_count(), "date": datetime.now(UTC).date().isoformat()},
    }
