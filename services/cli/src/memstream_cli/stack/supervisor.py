"""The embedded stack: broker, graph server, workers and API as supervised children.

What the stack writes is its user's alone: the supervisor and every child run with umask
077 (folders 0700, files 0600), and a data dir an older version left readable is locked
down at start. FalkorDB refuses clients without the data dir's generated password.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from memstream.kafka.reading import group_lag
from memstream.kafka.topics import ARCHIVER_GROUP, LEDGER, RAW, SEQUENCER_GROUP, ensure_topics
from memstream.keys import KeyStore
from memstream.metrics import UP, serve_metrics
from memstream.ops.health import Check, falkordb_check, kafka_check, probe
from memstream.projection.embedded import ensure_default_version
from memstream.settings import Settings
from memstream.sinks import SEQUENCER, SEQUENCER_MODULE, SINKS, Sink
from memstream.stack.children import PRIVATE_UMASK, spawn, stop_all, stop_process
from memstream.stack.epoch import new_epoch
from memstream.stack.net import free_port, listening_socket
from memstream.stack.servers import Server, falkordb_password, start_falkordb, start_tansu
from memstream.stopping import install_stop
from prometheus_client import Counter

from memstream_cli.stack.restore import ledger_is_empty, restore_ledger
from memstream_cli.stack.stackfile import ComponentInfo, StackInfo, stack_file, write_stack

log = logging.getLogger("memstream.stack")
RESTARTS = Counter(
    "memstream_child_restarts_total",
    "Server and worker restarts by the supervisor",
    ["component", "child"],
)
DEV_TENANT = "dev"
PROBE_EVERY_S = 5.0
API_START_S = 120.0  # the API's first answer (it opens the vector index before serving)


class StackError(RuntimeError):
    """The stack cannot start; the message says why and what to do."""


def replicas_of(settings: Settings, role: str) -> int:
    """How many processes of ``role`` the stack runs: its own count, else the stack's."""
    asked = settings.worker_replicas.get(role)
    return asked if asked is not None else settings.replicas


def worker_modules(settings: Settings, sinks: Sequence[Sink] = SINKS) -> dict[str, str]:
    """Each consumer-group worker the stack starts, by role, in start order: the sequencer,
    then every sink run by a process of its own (with the embedded projections; the spine
    alone runs the sinks that are not derived)."""
    roles = {SEQUENCER: SEQUENCER_MODULE}
    for s in sinks:
        if s.module is not None and (settings.embedded_projections or not s.derived):
            roles[s.component] = s.module
    return roles


def plan_workers(settings: Settings, sinks: Sequence[Sink] = SINKS) -> list[tuple[str, str, str]]:
    """``(name, role, module)`` of every consumer-group worker: the first replica of a role
    is named after it, the others ``<role>-2``, ``<role>-3`` ..."""
    known = {SEQUENCER} | {s.component for s in sinks if s.module is not None}
    unknown = sorted(set(settings.worker_replicas) - known)
    if unknown:
        raise StackError(f"MEMSTREAM_WORKER_REPLICAS names no worker: {', '.join(unknown)}")
    planned = []
    for role, module in worker_modules(settings, sinks).items():
        n = replicas_of(settings, role)
        if n < 1:
            raise StackError(f"{role}: {n} replicas asked; at least one runs")
        names = [role] + [f"{role}-{i}" for i in range(2, n + 1)]
        planned += [(name, role, module) for name in names]
    return planned


@dataclass
class Worker:
    name: str
    module: str
    metrics_port: int | None
    log: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    pass_fds: tuple[int, ...] = ()
    nice: int = 0
    role: str = ""  # the worker it is a replica of ("" = its name)

    def start(self) -> None:
        argv = [sys.executable, "-m", self.module]
        self.proc = spawn(argv, self.log, self.env, pass_fds=self.pass_fds, nice=self.nice)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout)


@dataclass
class EmbeddedStack:
    settings: Settings
    data_dir: Path
    api_port: int
    servers: list[Server] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    bootstrap: str = ""
    lock_fh: IO[str] | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    dev_key: str = ""
    restored: int = 0
    info: StackInfo | None = None
    checks: dict[str, Check] = field(default_factory=dict)
    api_socket: socket.socket | None = None  # held across API restarts: nobody is refused
    sinks: Sequence[Sink] = SINKS  # the stores whose workers it runs

    @property
    def logs(self) -> Path:
        return self.data_dir / "logs"

    def _lock(self) -> None:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fh = open(self.data_dir / "stack.lock", "a+")  # noqa: SIM115 - held for the stack's life
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            fh.close()
            raise StackError(
                f"another memstream stack is running on {self.data_dir} "
                "(stop it, or pass a different --data-dir)"
            ) from exc
        self.lock_fh = fh

    def _dev_key(self) -> str:
        key_file = self.data_dir / "dev-api-key"
        if key_file.exists():
            return key_file.read_text().strip()
        key = KeyStore(self.settings.resolved_keys_file()).create(DEV_TENANT)
        key_file.write_text(key + "\n")
        key_file.chmod(0o600)
        return key

    def start(self) -> StackInfo:
        """Start everything in dependency order; raises StackError with the reason."""
        os.umask(PRIVATE_UMASK)  # what the supervisor writes is private, as its children's
        plan_workers(
            self.settings, self.sinks
        )  # a count that cannot run fails before anything starts
        try:
            self.api_socket = listening_socket(self.settings.api_host, self.api_port)
        except OSError as exc:
            raise StackError(
                f"API port {self.api_port} is already in use (choose another with --api-port)"
            ) from exc
        try:
            self._lock()
        except StackError:
            self.api_socket.close()
            raise
        lock_down(self.data_dir)
        self.logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            return self._start()
        except Exception:
            self.stop(drain=False)
            raise

    def _start(self) -> StackInfo:
        started_ns = time.time_ns()
        broker = start_tansu(free_port(), self.logs)
        self.servers.append(broker)
        self.bootstrap = f"127.0.0.1:{broker.port}"
        password = falkordb_password(self.data_dir)
        graph = start_falkordb(free_port(), self.data_dir / "graph", self.logs, password=password)
        self.servers.append(graph)
        self._prepare_broker(started_ns)
        self.dev_key = self._dev_key()
        ensure_default_version(self.settings.model_copy(update={"data_dir": self.data_dir}))
        env = dict(os.environ)
        env.update(
            MEMSTREAM_DATA_DIR=str(self.data_dir.resolve()),
            MEMSTREAM_KAFKA_BOOTSTRAP=self.bootstrap,
            MEMSTREAM_FALKORDB_URL=f"redis://127.0.0.1:{graph.port}",
            MEMSTREAM_API_HOST=self.settings.api_host,
            MEMSTREAM_API_PORT=str(self.api_port),
        )
        env["MEMSTREAM_EMBEDDED_PROJECTIONS"] = str(self.settings.embedded_projections).lower()
        heavy = {s.component for s in self.sinks if s.heavy}
        for name, role, module in plan_workers(self.settings, self.sinks):
            port = free_port()
            wenv = dict(env, MEMSTREAM_METRICS_PORT=str(port))
            w = Worker(name, module, port, self.logs / f"{name}.log", wenv, role=role)
            # Throughput work nobody waits on is started nicer (MEMSTREAM_HEAVY_NICE), so under
            # load the sequencer, the projections and the API get the cores first.
            w.nice = self.settings.heavy_nice if role in heavy else 0
            self.workers.append(w)
        assert self.api_socket is not None
        fd = self.api_socket.fileno()
        api_env = dict(env, MEMSTREAM_API_FD=str(fd))
        api = Worker("api", "memstream_api.main", None, self.logs / "api.log", api_env)
        api.pass_fds = (fd,)
        self.workers.append(api)
        for w in self.workers:
            w.start()
        self._wait_for_api(api)
        sup_port = serve_metrics(0)
        UP.labels("supervisor").set(1)
        names = [s.name for s in self.servers] + [w.name for w in self.workers]
        for name in names:  # 0 until the first restart
            RESTARTS.labels("supervisor", name)
        self.checks = {
            "kafka": kafka_check(self.bootstrap),
            "graph": falkordb_check(f"redis://127.0.0.1:{graph.port}", password=password),
        }
        return self._write_info(graph, sup_port)

    def _wait_for_api(self, api: Worker) -> None:
        """Until the API answers HTTP (its port listens from the start: this socket)."""
        url = f"http://{self.settings.api_host}:{self.api_port}/healthz"
        deadline = time.monotonic() + API_START_S
        while time.monotonic() < deadline and api.alive():
            try:
                with urllib.request.urlopen(url, timeout=2):
                    return
            except urllib.error.HTTPError:  # an answer (503: Kafka not there yet) is enough
                return
            except OSError:
                time.sleep(0.1)
        raise StackError(f"API did not come up on port {self.api_port}; see {api.log}")

    def _write_info(self, graph: Server, sup_port: int) -> StackInfo:
        host = self.settings.api_host
        api_url = f"http://{host}:{self.api_port}"
        components = {s.name: ComponentInfo(pid=s.proc.pid, log=str(s.log)) for s in self.servers}
        metrics = [f"http://127.0.0.1:{sup_port}/metrics"]
        components["supervisor"] = ComponentInfo(pid=os.getpid(), log="", metrics_url=metrics[0])
        for w in self.workers:
            url = f"http://127.0.0.1:{w.metrics_port}/metrics" if w.metrics_port else None
            if w.name == "api":
                url = f"{api_url}/metrics"
            assert w.proc is not None
            components[w.name] = ComponentInfo(
                pid=w.proc.pid, log=str(w.log), metrics_url=url, worker=w.role or w.name
            )
            if url:
                metrics.append(url)
        info = StackInfo(
            pid=os.getpid(),
            started_at=datetime.now(UTC).isoformat(),
            data_dir=str(self.data_dir.resolve()),
            kafka_bootstrap=self.bootstrap,
            falkordb_url=f"redis://127.0.0.1:{graph.port}",
            api_url=api_url,
            metrics_endpoints=metrics,
            components=components,
            dev_key_file=str((self.data_dir / "dev-api-key").resolve()),
        )
        write_stack(info)
        self.info = info
        return info

    def _prepare_broker(self, started_ns: int) -> None:
        """Topics, the ledger restored from the archive (a fresh broker holds nothing), and a
        new broker epoch (the time the broker was started), which tells the API to drop what
        pointed into the old broker and re-send what its outbox holds."""
        ensure_topics(self.bootstrap, self.settings)
        if ledger_is_empty(self.bootstrap):
            self.restored = restore_ledger(self.bootstrap, self.settings.archive_dir)
            if self.restored:
                log.info("restored %d ledger entries from the archive", self.restored)
        new_epoch(self.data_dir, started_ns)

    def _restart_server(self, s: Server) -> None:
        """Start a dead server again on its port.

        A broker comes back empty: the workers stop first, the broker gets its topics and the
        ledger back from the archive, then the workers start again and rebuild their state
        from it (consumers that kept running would hold positions in a log that no longer
        exists). The API keeps running: its outbox accepts writes meanwhile, and on the new
        epoch it renews its producer, re-sends them and sees its vector loops reset.
        A graph server is back once it answers; it may go on loading its file for a while."""
        s.restarts += 1
        RESTARTS.labels("supervisor", s.name).inc()
        log.warning("%s exited (code %s); restart #%d", s.name, s.proc.returncode, s.restarts)
        s.next_start = time.monotonic() + min(30.0, 0.5 * 2 ** min(s.restarts, 6))
        pipeline = [w for w in self.workers if w.name != "api"] if s.name == "tansu" else []
        stop_all([w.proc for w in pipeline if w.proc is not None], timeout=3)
        started_ns = time.time_ns()
        fresh = s.restart()
        s.proc = fresh.proc
        if s.name == "tansu":
            self._prepare_broker(started_ns)
        for w in pipeline:
            w.start()
            self._record_pid(w)
        if self.info is not None and s.name in self.info.components:
            self.info.components[s.name].pid = s.proc.pid
            write_stack(self.info)

    def _probe_dependencies(self) -> None:
        """Kafka answers metadata and FalkorDB answers PING (a hung server is not an exit)."""
        probe("supervisor", self.checks)

    def supervise(self) -> None:
        """Restart crashed servers and workers (with backoff) until ``stopping`` is set."""
        next_probe = 0.0
        while not self.stopping.wait(0.5):
            if time.monotonic() >= next_probe:
                self._probe_dependencies()
                next_probe = time.monotonic() + PROBE_EVERY_S
            for s in self.servers:
                if s.proc.poll() is not None and time.monotonic() >= s.next_start:
                    try:
                        self._restart_server(s)
                    except Exception as exc:  # e.g. the port still held: try again later
                        log.error("%s did not come back: %s", s.name, exc)
            for w in self.workers:
                if not w.alive() and time.monotonic() >= w.next_start:
                    code = w.proc.returncode if w.proc else None
                    w.restarts += 1
                    RESTARTS.labels("supervisor", w.name).inc()
                    log.warning("%s exited (code %s); restart #%d", w.name, code, w.restarts)
                    w.next_start = time.monotonic() + min(30.0, 0.5 * 2 ** min(w.restarts, 6))
                    w.start()
                    self._record_pid(w)

    def _record_pid(self, w: Worker) -> None:
        if self.info is not None and w.proc is not None and w.name in self.info.components:
            self.info.components[w.name].pid = w.proc.pid
            write_stack(self.info)

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until the sequencer and the archiver have consumed everything."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                raw = sum(group_lag(self.bootstrap, SEQUENCER_GROUP, RAW, 5).values())
                led = sum(group_lag(self.bootstrap, ARCHIVER_GROUP, LEDGER, 5).values())
            except Exception as exc:  # broker gone: nothing left to drain
                log.warning("drain: %s", exc)
                return False
            if raw == 0 and led == 0:
                return True
            time.sleep(0.2)
        return False

    def stop(self, drain: bool = True) -> None:
        """API first (no new events), drain the pipeline, workers, then the servers."""
        self.stopping.set()
        by_name = {w.name: w for w in self.workers}
        if "api" in by_name:
            by_name["api"].stop()
        if self.api_socket is not None:  # connections waiting in it are refused from now on
            self.api_socket.close()
            self.api_socket = None
        pipeline_up = all(w.alive() for w in self.workers if w.name != "api")
        if drain and self.bootstrap and pipeline_up and not self.drain():
            log.warning("pipeline not drained before stop; events may remain in the broker")
        # Derived workers together, then the spine together: each stop is a group leave and
        # a flush, and one after the other they took seconds each.
        spine = {SEQUENCER} | {s.component for s in self.sinks if not s.derived}
        for wave in ([w for w in self.workers if w.role not in spine], self.workers):
            stop_all([w.proc for w in wave if w.proc is not None], timeout=15.0)
        for s in reversed(self.servers):
            s.stop()
        UP.labels("supervisor").set(0)
        if self.lock_fh is not None:
            stack_file(self.data_dir).unlink(missing_ok=True)
            self.lock_fh.close()
            self.lock_fh = None


def lock_down(data_dir: Path) -> None:
    """Folders 0700 and files 0600 under ``data_dir`` (written before the stack ran with
    umask 077, or by hand); symbolic links are left as they are."""
    for root, dirs, files in os.walk(data_dir):
        os.chmod(root, 0o700)
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o600)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]


def install_stop_signals(stack: EmbeddedStack) -> None:
    """SIGTERM and SIGINT stop the stack (see :func:`memstream.stopping.install_stop`)."""
    install_stop(stack.stopping)
