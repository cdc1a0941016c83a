"""Starting and health-checking the embedded broker and graph server."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient

from memstream.stack.binaries import falkordb_binaries, tansu_binary
from memstream.stack.children import spawn, stop_process
from memstream.stack.net import wait_for_port


class ServerStartError(RuntimeError):
    """A server did not come up; the message names it and points at its log."""


@dataclass
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    start_again: Callable[[], Server] | None = None  # the same server on the same port
    restarts: int = 0
    next_start: float = 0.0

    def stop(self, timeout: float = 10.0) -> None:
        stop_process(self.proc, timeout)

    def restart(self) -> Server:
        if self.start_again is None:
            raise ServerStartError(f"{self.name} cannot be restarted")
        return self.start_again()


def _fail(name: str, proc: subprocess.Popen[bytes], log: Path, why: str) -> ServerStartError:
    if proc.poll() is None:
        proc.kill()
        proc.wait(5)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    return ServerStartError(f"{name} did not come up: {why}; log {log}:\n{tail}")


def start_tansu(port: int, log_dir: Path, timeout: float = 30.0) -> Server:
    """Tansu with memory storage on 127.0.0.1:port; returns once metadata answers."""
    log = log_dir / "tansu.log"
    url = f"tcp://127.0.0.1:{port}"
    proc = spawn(
        [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url],
        log,
    )
    if not wait_for_port(port, timeout):
        raise _fail("Tansu broker", proc, log, f"port {port} not listening after {timeout}s")
    deadline = time.monotonic() + timeout
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    while True:
        try:
            admin.list_topics(timeout=2)
            break
        except Exception as exc:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise _fail("Tansu broker", proc, log, f"metadata request failed: {exc}") from exc
            time.sleep(0.2)
    return Server("tansu", proc, port, log, lambda: start_tansu(port, log_dir, timeout))


def start_falkordb(port: int, data_dir: Path, log_dir: Path, timeout: float = 30.0) -> Server:
    """FalkorDB (redis-server + module) with AOF persistence in ``data_dir``."""
    import redis

    server, module = falkordb_binaries()
    data_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / "falkordb.log"
    proc = spawn(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data_dir.resolve()),
            "--appendonly",
            "yes",
            # Every write is on disk before FalkorDB answers it: the graph projector commits
            # its offsets after the answer, so a write lost in a crash would never come back.
            "--appendfsync",
            "always",
            "--save",
            "",
            # Plain strings in the rewritten AOF (its RDB preamble): after a purge, a grep of
            # the data dir shows that no purged text is left, which compressed strings hide.
            "--rdbcompression",
            "no",
            "--protected-mode",
            "no",
            "--loadmodule",
            module,
            # No query telemetry: FalkorDB would keep recent queries with their parameters
            # (event text) in a key of its own, which lands in the files and survives purges.
            "CMD_INFO",
            "no",
        ],
        log,
    )
    deadline = time.monotonic() + timeout
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
    while True:
        try:
            if client.ping():
                break
        except Exception as exc:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise _fail("FalkorDB", proc, log, f"PING failed: {exc}") from exc
            time.sleep(0.1)
    return Server(
        "falkordb", proc, port, log, lambda: start_falkordb(port, data_dir, log_dir, timeout)
    )
