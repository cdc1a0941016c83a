"""``bench load``: a synthetic multi-tenant workload through the whole stack.

Reports ingest (emit -> visible to checkout), freshness measured by probe events (emit ->
found by recall) twice: during the bulk ingest (a backlog as large as the burst makes it grow
with N) and under a steady load below capacity (the figure an operator sees), checkout
latency at the stored size (each question asked twice, with the served levers and with the
fused lanes alone, so what the levers cost is measured in the same run), peak RSS per process,
and the raw broker produce rate of the same run.
"""

from __future__ import annotations

import contextlib
import random
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import psutil
from memstream.client import MemoryHttpClient, MemstreamHttpError
from memstream.events import EventIn
from memstream.kafka.reading import group_lag
from memstream.keys import KeyStore
from memstream.ledger.opening import data_keys
from memstream.metrics import scrape
from memstream.projection.projectors import OPTIMIZE_IDLE_S, OPTIMIZE_MIN_NEW
from memstream.projection.status import caught_up, live_version, projection_status
from memstream.proof import Prover, producer_secret
from memstream.sdk import MemoryClient, emit_by_tenant
from memstream.settings import Settings
from memstream.shred.port import DataKeys
from memstream.stack.epoch import read_epoch
from memstream_cli.progress import Report, Stage, stage
from memstream_cli.stack.stackfile import StackInfo
from memstream_cli.stack.status import fixed_groups
from memstream_cli.stack.supervisor import EmbeddedStack

from memstream_bench.ingest import raw_produce_rate
from memstream_bench.stack import throwaway_stack
from memstream_bench.stats import lever_overhead, overhead_interval, percentile

_PRODUCTS = ["laptop", "router", "headset", "monitor", "keyboard", "printer", "camera", "phone"]
_CITIES = ["Lisbon", "Oslo", "Denver", "Nairobi", "Osaka", "Lima", "Tallinn", "Perth"]
_NAMES = ["Marta", "Tomas", "Aiko", "Priya", "Jonas", "Lea", "Omar", "Grace"]
STREAMS = 16
USERS = 4  # per tenant: each stream is one user's (user-0 holds agent-0, -4, -8 and -12)


def workload(n: int, tenants: int, seed: int = 1) -> list[Any]:
    """Agents chatting, calling tools, asserting (and later updating) facts, preferences, tasks."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    run = uuid.uuid4().hex[:6]
    out: list[Any] = []
    for i in range(n):
        tenant = f"tenant-{i % tenants}"
        # Every tenant holds every stream (and so every user): a user's scope is a quarter
        # of its tenant, not all of it or none of it.
        stream = (i // tenants) % STREAMS
        who = rng.choice(_NAMES)
        type_, payload = _body(rng, i, who)
        out.append(
            EventIn(
                id=f"{run}-{i}",
                stream=f"agent-{stream}",
                agent=who,
                user=f"user-{stream % USERS}",
                type=type_,
                occurred_at=start + timedelta(minutes=i),
                payload=payload,
            ).complete(tenant)
        )
    return out


def _body(rng: random.Random, i: int, who: str) -> tuple[str, dict[str, Any]]:
    """The type and payload of event ``i`` by ``who``, drawn from ``rng``."""
    product, city = rng.choice(_PRODUCTS), rng.choice(_CITIES)
    roll = rng.random()
    if roll < 0.45:
        text = f"{who} ordered a {product} for ${rng.randint(20, 2000)} to ship to {city}."
        return "message.user", {"text": text}
    if roll < 0.6:
        return "message.assistant", {"text": f"The {product} for {who} is on its way to {city}."}
    if roll < 0.7:
        return "tool.call", {"tool": "orders.track", "arguments": {"who": who}}
    if roll < 0.8:
        status = rng.choice(["shipped", "delayed", "delivered"])
        return "tool.result", {"tool": "orders.track", "output": {"status": status}}
    if roll < 0.9:
        return "fact.asserted", {"subject": who, "predicate": "lives_in", "object": city}
    if roll < 0.95:
        return "preference.set", {"subject": who, "key": "channel", "value": "email"}
    status = rng.choice(["success", "failure"])
    return "task.outcome", {
        "task_id": f"t{i}",
        "status": status,
        "text": f"delivery of the {product}",
    }


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
    progress: Report,
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


def paced_emit(
    bootstrap: str,
    events: list[Any],
    rate: int,
    step: Stage,
    probes: Probes,
    stop: threading.Event | None = None,
) -> int:
    """Emit ``events`` at about ``rate`` per second (ticks of 100 ms) until they are all
    sent or ``stop`` is set; returns how many were sent (each acknowledged by Kafka)."""
    clients: dict[str, MemoryClient] = {}
    per_tick = max(1, rate // 10)
    t0 = time.perf_counter()
    sent = 0
    try:
        for i in range(0, len(events), per_tick):
            if stop is not None and stop.is_set():
                break
            for e in events[i : i + per_tick]:
                if e.tenant not in clients:
                    clients[e.tenant] = MemoryClient(
                        bootstrap, e.tenant, keys=probes.data_keys, epoch=probes.epoch,
                        prover=probes.prover,
                    )  # fmt: skip
                clients[e.tenant].emit_event(e)
            for c in clients.values():
                c.flush(10)
            sent = min(len(events), i + per_tick)
            step.update(sent)
            due = t0 + (i + per_tick) / rate
            time.sleep(max(0.0, due - time.perf_counter()))
    finally:
        for c in clients.values():
            c.close()
    return sent


PROBE_TIMEOUT_S = 30.0


@dataclass
class ProbeLog:
    """What the freshness probes of one phase saw: the latencies of those recall found (ms)
    and how many it had not found when the probe gave up after ``PROBE_TIMEOUT_S``."""

    found: list[float] = field(default_factory=list)
    missed: int = 0

    @property
    def probes(self) -> int:
        return len(self.found) + self.missed

    def p(self, q: float) -> float:
        """The ``q`` quantile with every miss counted as the timeout: a lower bound of the
        true one when any probe missed, never an understatement by dropping them."""
        return percentile(self.found + [PROBE_TIMEOUT_S * 1000] * self.missed, q)


class Probes:
    """Freshness probes: emit a marker event, time until recall finds it, every 0.5 s."""

    def __init__(
        self, bootstrap: str, api: str, key: str, data: DataKeys | None, epoch: str,
        prover: Prover,
    ) -> None:  # fmt: skip
        self.bootstrap, self.api, self.key = bootstrap, api, key
        self.data_keys = data  # the SDK seals with the stack's data keys, as `emit` does
        self.epoch = epoch  # the broker's, named in the positions the SDK returns
        self.prover = prover  # the stack's own proof: the bench writes as the stack's tools

    @contextlib.contextmanager
    def running(self) -> Iterator[ProbeLog]:
        """Probes in the background while the block runs; yields what they saw."""
        sink = ProbeLog()
        stop = threading.Event()
        failed: list[BaseException] = []
        prober = threading.Thread(target=self._guarded, args=(sink, stop, failed), daemon=True)
        prober.start()
        try:
            yield sink
        finally:
            stop.set()
            prober.join(PROBE_TIMEOUT_S + 10)
        if failed:  # a prober that died would leave the phase with fewer probes, unsaid
            raise RuntimeError("the freshness prober failed") from failed[0]

    def _guarded(self, sink: ProbeLog, stop: threading.Event, failed: list[BaseException]) -> None:
        try:
            self._run(sink, stop)
        except BaseException as exc:
            failed.append(exc)

    def _run(self, sink: ProbeLog, stop: threading.Event) -> None:
        with (
            MemoryClient(
                self.bootstrap,
                "probe",
                keys=self.data_keys,
                epoch=self.epoch,
                prover=self.prover,
            ) as sdk,  # fmt: skip
            MemoryHttpClient(self.api, self.key) as http,
        ):
            while not stop.is_set():
                token = f"probe{uuid.uuid4().hex[:12]}"
                sent = time.perf_counter()
                sdk.emit("probes", "observation", {"text": f"marker {token}"})
                sdk.flush(10)
                while not _found(http, token):
                    if time.perf_counter() - sent >= PROBE_TIMEOUT_S:
                        sink.missed += 1
                        break
                    time.sleep(0.01)
                else:
                    sink.found.append((time.perf_counter() - sent) * 1000)
                stop.wait(0.5)


def _found(http: MemoryHttpClient, token: str) -> bool:
    try:
        items = http.recall(token, k=3, mode="sparse")
    except MemstreamHttpError as e:
        if e.status == 503:  # the live version's index is still opening: not found yet
            return False
        raise
    return any(token in i["text"] for i in items)


@dataclass
class _Measured:
    """What one run measured, phase by phase."""

    events: int
    tenants: int
    raw: float = 0.0
    emitted_s: float = 0.0
    visible_s: float = 0.0
    burst: ProbeLog = field(default_factory=ProbeLog)
    steady: ProbeLog = field(default_factory=ProbeLog)
    steady_achieved: float = 0.0
    steady_events: int = 0
    build_wait_s: float = 0.0
    settle_s: float = 0.0
    latencies: list[float] = field(default_factory=list)  # the served levers
    plain_latencies: list[float] = field(default_factory=list)  # the fused lanes alone
    scoped_latencies: list[float] = field(default_factory=list)  # served, inside one user
    learned_latencies: list[float] = field(default_factory=list)  # preset ``learned``
    parts: dict[str, list[float]] = field(default_factory=dict)  # checkout ms per phase, lane
    scoped_parts: dict[str, list[float]] = field(default_factory=dict)  # the same, scoped
    peak_rss: dict[str, float] = field(default_factory=dict)


# The ways a question is asked that name a preset (the others take the served one).
PRESET_OF: dict[str, Literal["plain", "learned"]] = {"plain": "plain", "learned": "learned"}


def _measure(
    stack: EmbeddedStack,
    settings: Settings,
    n: int,
    tenants: int,
    checkouts: int,
    progress: Report,
    steady_rate: int,
    steady_s: float,
) -> dict[str, Any]:
    assert stack.info is not None
    bootstrap, api = stack.info.kafka_bootstrap, stack.info.api_url
    pids = {name: c.pid for name, c in stack.info.components.items()}
    keys = KeyStore(settings.resolved_keys_file())
    m = _Measured(n, tenants)
    progress(f"generating {n} events for {tenants} tenants")
    events = workload(n, tenants)
    progress("raw broker produce rate (same envelopes, scratch topic)")
    m.raw = raw_produce_rate(
        bootstrap,
        [(e.key, e.model_dump_json().encode()) for e in events],
        settings.topic_partitions,
    )
    epoch = read_epoch(settings.data_dir)
    probes = Probes(
        bootstrap, api, keys.create("probe"), data_keys(settings), epoch,
        Prover.internal(producer_secret(settings)),
    )  # fmt: skip
    rss = RssSampler(pids)
    _burst(m, stack.info, settings, events, probes, progress)
    _steady(m, bootstrap, probes, steady_rate, steady_s, progress)
    if settings.vector_optimize:
        progress("waiting for the vector index build (HNSW) to finish")
        m.build_wait_s = _wait_index_built(stack.info.metrics_endpoints)
    progress("waiting for every consumer to catch up (checkouts measure the steady state)")
    m.settle_s = settle(stack.info, settings)
    step = stage(progress, f"{checkouts} checkouts at {n} stored events", checkouts)
    tenant_keys = {t: keys.create(t) for t in sorted({e.tenant for e in events})}
    _checkouts(m, api, tenant_keys, checkouts, step)
    m.peak_rss = rss.close()
    return _report(m, settings.vector_optimize, settings.seal)


def _burst(
    m: _Measured,
    info: StackInfo,
    settings: Settings,
    events: list[Any],
    probes: Probes,
    progress: Report,
) -> None:
    """Emit every event at once, then wait until the live version shows them all."""
    n = len(events)
    step = stage(progress, f"emitting {n} events through the SDK, with freshness probes", n)
    t0 = time.perf_counter()
    with probes.running() as m.burst:
        emit_by_tenant(
            info.kafka_bootstrap, events, probes.data_keys, epoch=probes.epoch,
            prover=probes.prover,
        )  # fmt: skip
        m.emitted_s = time.perf_counter() - t0
        deadline = time.monotonic() + 3600
        while not visible(settings, info, n, step):
            if time.monotonic() > deadline:
                raise TimeoutError("projections did not catch up within an hour")
            time.sleep(0.25)
        m.visible_s = time.perf_counter() - t0


def settle(info: StackInfo, settings: Settings, timeout: float = 1800) -> float:
    """Seconds until no consumer group (the latent builder's and the retrospective's
    included) and no projection of the live version has anything left to read."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        lag = sum(
            sum(group_lag(info.kafka_bootstrap, group, topic).values())
            for group, topics in fixed_groups().items()
            for topic in topics
        )
        doc = projection_status(settings, info.kafka_bootstrap, info.metrics_endpoints)
        live = live_version(doc)
        if lag == 0 and live is not None and caught_up(live, 0):
            return time.perf_counter() - t0
        time.sleep(1)
    raise TimeoutError(f"consumers were still catching up after {timeout:g}s")


def visible(settings: Settings, info: StackInfo, n: int, step: Stage) -> bool:
    """The live version's graph and vectors hold ``n`` events: checkout can see them (its
    groups may not have committed yet)."""
    doc = projection_status(settings, info.kafka_bootstrap, info.metrics_endpoints)
    live = live_version(doc)
    if live is None:
        return False
    # The probes' events are projected too: the count stops at the workload's.
    step.update(min(n, live["counts"]["graph_events"], live["counts"]["vector_points"]))
    return caught_up(live, n, drained=False)


def _steady(
    m: _Measured, bootstrap: str, probes: Probes, rate: int, seconds: float, progress: Report
) -> None:
    """``rate`` events/s for ``seconds``, below capacity: the freshness an operator sees."""
    n = int(rate * seconds)
    step = stage(
        progress, f"steady load: {rate} events/s for {seconds:g} s, with freshness probes", n
    )
    with probes.running() as m.steady:
        paced = workload(n, m.tenants, seed=2)
        t0 = time.perf_counter()
        paced_emit(bootstrap, paced, rate, step, probes)
        m.steady_achieved = len(paced) / (time.perf_counter() - t0)
    m.steady_events = len(paced)


CHECKOUT_QUERIES = (
    "Where does {who} live now?",
    "How much did {who} spend on orders in total?",
    "What did {who} order?",
    "Which channel does {who} prefer?",
)


def _checkouts(
    m: _Measured, api: str, tenant_keys: dict[str, str], checkouts: int, step: Stage
) -> None:
    """Checkouts of random tenants and questions: latency, and where each one spends its
    time per phase and lane. Each question is asked four ways, in a random order so the
    latencies share the machine's moment and none always reads a cache another warmed: with
    the served levers, with the fused lanes alone (preset ``plain``), with the served
    levers inside one user's scope, and with the learned ranker (preset ``learned``)."""
    rng = random.Random(7)
    clients = {t: MemoryHttpClient(api, k) for t, k in tenant_keys.items()}
    try:
        for _ in range(checkouts):
            client = clients[rng.choice(list(clients))]
            q = rng.choice(CHECKOUT_QUERIES).format(who=rng.choice(_NAMES))
            user = f"user-{rng.randrange(USERS)}"
            ways: list[str] = ["plain", "served", "scoped", "learned"]
            rng.shuffle(ways)
            for way in ways:
                started = time.perf_counter()
                preset = PRESET_OF.get(way)
                scope = {"user": user} if way == "scoped" else None
                packet = client.checkout(q, preset=preset, scope=scope)
                ms = (time.perf_counter() - started) * 1000
                if way == "served":
                    m.latencies.append(ms)
                    _parts(m.parts, packet)
                elif way == "plain":
                    m.plain_latencies.append(ms)
                elif way == "learned":
                    m.learned_latencies.append(ms)
                else:
                    m.scoped_latencies.append(ms)
                    _parts(m.scoped_parts, packet)
            step.advance()
    finally:
        for c in clients.values():
            c.close()


def _parts(parts: dict[str, list[float]], packet: dict[str, Any]) -> None:
    """The packet's own ms per phase and lane, added to ``parts``."""
    meta = packet.get("meta") or {}
    for part in ("phases_ms", "lanes_ms"):
        for name, ms in (meta.get(part) or {}).items():
            parts.setdefault(f"{part[:-3]}.{name}", []).append(float(ms))


def _report(m: _Measured, vector_optimize: bool, sealed: bool) -> dict[str, Any]:
    return {
        "events": m.events,
        "sealed": sealed,
        "tenants": m.tenants,
        "broker_produce_events_per_s": round(m.raw),
        "emit_events_per_s": round(m.events / m.emitted_s),
        "ingest_events_per_s": round(m.events / m.visible_s),
        "ingest_seconds": round(m.visible_s, 3),
        "steady_events_per_s": round(m.steady_achieved),
        "events_at_checkout": m.events + m.steady_events,
        "vector_optimize": vector_optimize,
        "index_build_wait_s": round(m.build_wait_s, 1),
        "settle_s": round(m.settle_s, 1),
        # A probe recall had not found after PROBE_TIMEOUT_S is a miss; the quantiles count
        # each miss as the timeout (so they are lower bounds when any probe missed).
        "freshness_probe_timeout_s": PROBE_TIMEOUT_S,
        "freshness_probes": m.steady.probes,
        "freshness_missed": m.steady.missed,
        "freshness_p50_ms": round(m.steady.p(0.5), 1),
        "freshness_p95_ms": round(m.steady.p(0.95), 1),
        "freshness_burst_probes": m.burst.probes,
        "freshness_burst_missed": m.burst.missed,
        "freshness_burst_p50_ms": round(m.burst.p(0.5), 1),
        "freshness_burst_p95_ms": round(m.burst.p(0.95), 1),
        "checkouts": len(m.latencies),
        "checkout_p50_ms": round(percentile(m.latencies, 0.5), 2),
        "checkout_p95_ms": round(percentile(m.latencies, 0.95), 2),
        "checkout_mean_ms": round(statistics.fmean(m.latencies), 2) if m.latencies else 0.0,
        "checkout_plain_p50_ms": round(percentile(m.plain_latencies, 0.5), 2),
        "checkout_plain_p95_ms": round(percentile(m.plain_latencies, 0.95), 2),
        "checkout_lever_p95_overhead": lever_overhead(m.latencies, m.plain_latencies),
        "checkout_lever_p95_overhead_interval95": overhead_interval(m.latencies, m.plain_latencies),
        # A scope (one user of the tenant's four) against the same levers without one.
        "checkout_scoped_p50_ms": round(percentile(m.scoped_latencies, 0.5), 2),
        "checkout_scoped_p95_ms": round(percentile(m.scoped_latencies, 0.95), 2),
        "checkout_scope_p95_overhead": lever_overhead(m.scoped_latencies, m.latencies),
        "checkout_scope_p95_overhead_interval95": overhead_interval(
            m.scoped_latencies, m.latencies
        ),
        # The learned ranker in place of the hand-set rerank, against the served levers.
        "checkout_learned_p95_ms": round(percentile(m.learned_latencies, 0.95), 2),
        "checkout_learned_p95_overhead": lever_overhead(m.learned_latencies, m.latencies),
        "checkout_learned_p95_overhead_interval95": overhead_interval(
            m.learned_latencies, m.latencies
        ),
        "checkout_median_ms_by_part": {
            k: round(percentile(v, 0.5), 2) for k, v in sorted(m.parts.items())
        },
        "checkout_p95_ms_by_part": {
            k: round(percentile(v, 0.95), 2) for k, v in sorted(m.parts.items())
        },
        "checkout_scoped_p95_ms_by_part": {
            k: round(percentile(v, 0.95), 2) for k, v in sorted(m.scoped_parts.items())
        },
        "peak_rss_mb": m.peak_rss,
        "machine": {"cpus": psutil.cpu_count(), "date": datetime.now(UTC).date().isoformat()},
    }
