"""``memstream bench scale``: one workload at 1 and at 2 replicas of every worker that scales
out (``MEMSTREAM_REPLICAS``), each in a throw-away stack of its own, in one run.

Per replica count: ingest end to end (SDK emit -> every event in the live graph and vector
index) with freshness probes beside it; CPU seconds per 1,000 events of every process (and
of every worker, its replicas summed) over that ingest; then, under a steady SDK load, the
rebalance pause when a sequencer joins the group and when one is killed with SIGKILL (from the
kill until every ledger partition takes records again); and at the end, the workload's and the
steady load's events missing from the ledger or in it twice (both must be 0).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import psutil
from memstream.kafka.reading import end_offsets, headers_of, read_to_end
from memstream.kafka.topics import LEDGER, RAW
from memstream.keys import KeyStore
from memstream.ledger.opening import data_keys
from memstream.position import RAW_HEADER
from memstream.proof import Prover, producer_secret
from memstream.sdk import emit_by_tenant
from memstream.settings import Settings
from memstream.stack.children import spawn, stop_process
from memstream.stack.epoch import read_epoch
from memstream.stack.net import free_port
from memstream_cli.progress import Report, stage
from memstream_cli.stack.supervisor import EmbeddedStack

from memstream_bench.load import Probes, paced_emit, visible, workload
from memstream_bench.stack import throwaway_stack

SAMPLE_S = 0.05  # how often the ledger's partition ends are read while a rebalance runs
PAUSE_WINDOW_S = 40.0  # how long after a join or a kill a pause is looked for, at most
SETTLED_S = 5.0  # records flowing on every partition this long after the last resumed: over


def run_scale_bench(
    n: int, tenants: int, progress: Report, replicas: tuple[int, ...] = (1, 2), rate: int = 300
) -> dict[str, Any]:
    """The rows of every replica count, measured one after the other in this run."""
    rows = []
    for r in replicas:
        with throwaway_stack(progress, replicas=r) as (stack, settings):
            # supervised as `memstream up` supervises it: a killed replica is started again
            threading.Thread(target=stack.supervise, name="supervise", daemon=True).start()
            rows.append(_row(stack, settings, r, n, tenants, rate, progress))
    return {
        "events": n,
        "tenants": tenants,
        "steady_rate": rate,
        "rows": rows,
        "machine": {"cpus": psutil.cpu_count(), "date": datetime.now(UTC).date().isoformat()},
    }


@dataclass
class _Run:
    """One replica count's stack and what was sent through it."""

    stack: EmbeddedStack
    settings: Settings
    probes: Probes
    sent: list[str] = field(default_factory=list)  # event ids the SDK had acknowledged


def _row(
    stack: EmbeddedStack,
    settings: Settings,
    replicas: int,
    n: int,
    tenants: int,
    rate: int,
    progress: Report,
) -> dict[str, Any]:
    assert stack.info is not None
    info = stack.info
    keys = KeyStore(settings.resolved_keys_file())
    epoch = read_epoch(settings.data_dir)
    probes = Probes(
        info.kafka_bootstrap,
        info.api_url,
        keys.create("probe"),
        data_keys(settings),
        epoch,
        Prover.internal(producer_secret(settings)),
    )
    run = _Run(stack, settings, probes)
    events = workload(n, tenants)
    step = stage(progress, f"{replicas} replica(s): ingesting {n} events", n)
    cpu0 = _cpu(stack)
    t0 = time.perf_counter()
    with probes.running() as seen:
        emit_by_tenant(
            info.kafka_bootstrap, events, probes.data_keys, epoch=epoch, prover=probes.prover
        )
        while not visible(settings, info, n, step):
            if time.perf_counter() - t0 > 3600:
                raise TimeoutError("projections did not catch up within an hour")
            time.sleep(0.25)
    ingest_s = time.perf_counter() - t0
    per_process = {k: round((v - cpu0.get(k, 0.0)) * 1000 / n, 3) for k, v in _cpu(stack).items()}
    run.sent += [e.id for e in events]
    join = _pause(run, rate, progress, f"{replicas} replica(s): a sequencer joins", _join)
    kill = _pause(run, rate, progress, f"{replicas} replica(s): a sequencer killed", _kill)
    damage = _damage(run)
    return {
        "replicas": replicas,
        "ingest_events_per_s": round(n / ingest_s),
        "ingest_seconds": round(ingest_s, 2),
        "freshness_probes": seen.probes,
        "freshness_missed": seen.missed,
        "freshness_p95_ms": round(seen.p(0.95), 1),
        "cpu_s_per_1000_events": per_process,
        "cpu_s_per_1000_events_by_worker": _by_worker(stack, per_process),
        "join_pause_s": join,
        "kill_pause_s": kill,
        "events_lost": damage.lost,
        "events_applied_twice": damage.twice,
        # empty when both are 0; else where the first ones lie, to tell which hand-over
        "events_lost_at": damage.lost_at,
        "events_applied_twice_at": damage.twice_at,
    }


# The stack's supervisor is this process here: its CPU is the SDK's emitting and sealing.
BENCH_PROCESS = "bench (SDK emit + supervisor)"


def _cpu(stack: EmbeddedStack) -> dict[str, float]:
    """CPU seconds (user + system) each process of the stack has used so far."""
    assert stack.info is not None
    out: dict[str, float] = {}
    for name, c in stack.info.components.items():
        try:
            t = psutil.Process(c.pid).cpu_times()
        except psutil.Error:
            continue
        out[BENCH_PROCESS if name == "supervisor" else name] = t.user + t.system
    return out


def _by_worker(stack: EmbeddedStack, per_process: dict[str, float]) -> dict[str, float]:
    assert stack.info is not None
    total: dict[str, float] = {}
    for name, cost in per_process.items():
        known = stack.info.components.get(name)
        worker = (known.worker if known is not None else None) or name
        total[worker] = total.get(worker, 0.0) + cost
    return {k: round(v, 3) for k, v in sorted(total.items())}


def _pause(
    run: _Run,
    rate: int,
    progress: Report,
    what: str,
    act: Callable[[_Run], Callable[[], None]],
) -> float:
    """Seconds, under a steady load, from ``act`` until every ledger partition has taken a
    record again, or the longest stretch in which none took one, whichever is longer."""
    info = run.stack.info
    assert info is not None
    progress(what)
    events = workload(int(rate * (PAUSE_WINDOW_S + 10)), 4, seed=int(time.time()))
    step = stage(progress, f"steady load at {rate} events/s", len(events))
    stop, sent = threading.Event(), [0]

    def load() -> None:
        sent[0] = paced_emit(info.kafka_bootstrap, events, rate, step, run.probes, stop)

    loader = threading.Thread(target=load)
    loader.start()
    time.sleep(3)  # the load flows before the change
    try:
        pause = _watch(info.kafka_bootstrap, act(run))
    finally:
        stop.set()
        loader.join()
    run.sent += [e.id for e in events[: sent[0]]]
    return pause


def _watch(bootstrap: str, undo: Callable[[], None]) -> float:
    """The pause that began now: see :func:`_pause`. Watches until every partition took a
    record again and then ``SETTLED_S`` more passed, at most ``PAUSE_WINDOW_S``."""
    before = end_offsets(bootstrap, LEDGER)
    at = last_growth = time.perf_counter()
    resumed: dict[int, float] = {}
    last, longest = before, 0.0
    try:
        while (now := time.perf_counter()) - at < PAUSE_WINDOW_S:
            if len(resumed) == len(before) and now - at > max(resumed.values()) + SETTLED_S:
                break
            time.sleep(SAMPLE_S)
            ends, now = end_offsets(bootstrap, LEDGER), time.perf_counter()
            for p, off in ends.items():
                if off > before.get(p, 0) and p not in resumed:
                    resumed[p] = now - at
            if sum(ends.values()) > sum(last.values()):
                longest, last_growth = max(longest, now - last_growth), now
            last = ends
    finally:
        undo()
    if len(resumed) < len(before):
        return PAUSE_WINDOW_S  # a partition took nothing within the window: at least this
    return round(max(max(resumed.values()), longest), 2)


def _join(run: _Run) -> Callable[[], None]:
    """One more sequencer process in the group, started by hand; the undo stops it."""
    (first,) = [w for w in run.stack.workers if w.name == "sequencer"]
    env = dict(first.env, MEMSTREAM_METRICS_PORT=str(free_port()))
    log = run.stack.logs / "sequencer-joined.log"
    proc = spawn([sys.executable, "-m", "memstream_sequencer.main"], log, env)
    return lambda: stop_process(proc)


def _kill(run: _Run) -> Callable[[], None]:
    """SIGKILL to the last sequencer replica; the supervisor starts it again."""
    name = [w.name for w in run.stack.workers if w.role == "sequencer"][-1]
    assert run.stack.info is not None
    os.kill(run.stack.info.components[name].pid, signal.SIGKILL)
    return lambda: None


SHOWN = 10  # damaged events named per kind in a row (the counts are whole)


@dataclass(frozen=True)
class _Damage:
    """Sent events missing from the ledger and ledgered more than once, with where each
    lies: a lost event's raw record(s), a doubled event's ledger entries (so a row that is
    not 0 / 0 says which hand-over wrote what)."""

    lost: int
    twice: int
    lost_at: list[str]
    twice_at: list[str]


def _damage(run: _Run, patience_s: float = 600.0) -> _Damage:
    """The damage, once the ledger holds every sent event (or ``patience_s`` passed)."""
    info = run.stack.info
    assert info is not None
    wanted = set(run.sent)
    deadline = time.monotonic() + patience_s
    while True:
        where: dict[str, list[str]] = {}
        for m in read_to_end(info.kafka_bootstrap, LEDGER):
            if (i := orjson.loads(m.value() or b"{}").get("id")) in wanted:
                h = headers_of(m)
                where.setdefault(i, []).append(
                    f"ledger[{m.partition()}]@{m.offset()} seq {h.get('seq', b'?').decode()}"
                    f" raw {h.get(RAW_HEADER, b'?').decode()}"
                )
        if len(where) == len(wanted) or time.monotonic() > deadline:
            break
        time.sleep(2)
    lost = wanted - where.keys()
    twice = {i: at for i, at in where.items() if len(at) > 1}
    return _Damage(
        len(lost),
        sum(len(at) - 1 for at in twice.values()),
        _raw_places(info.kafka_bootstrap, lost),
        [f"{i}: {', '.join(at)}" for i, at in sorted(twice.items())[:SHOWN]],
    )


def _raw_places(bootstrap: str, lost: set[str]) -> list[str]:
    """Where the first lost events lie in the raw topic."""
    if not lost:
        return []
    places = [
        f"{i}: raw[{m.partition()}]@{m.offset()}"
        for m in read_to_end(bootstrap, RAW)
        if (i := orjson.loads(m.value() or b"{}").get("id")) in lost
    ]
    return sorted(places)[:SHOWN]
