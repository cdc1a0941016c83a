"""Starting and health-checking the embedded broker and graph server."""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient

from memstream.settings import FALKORDB_PASSWORD_FILE, read_secret
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
    password: str | None = None  # what a client must AUTH with
    stop_timeout: float = 10.0  # how long a stop waits for a graceful exit before SIGKILL

    def stop(self, timeout: float | None = None) -> None:
        stop_process(self.proc, self.stop_timeout if timeout is None else timeout)

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
    # Memory storage holds nothing to flush, and a graceful exit waits ~5 s for its clients:
    # a second is enough.
    return Server(
        "tansu", proc, port, log, lambda: start_tansu(port, log_dir, timeout), stop_timeout=1.0
    )


def falkordb_password(data_dir: Path) -> str:
    """The FalkorDB password of a data dir: generated on first use, kept in a 0600 file."""
    path = data_dir / FALKORDB_PASSWORD_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    secret = read_secret(path)
    if secret is None or not secret.get_secret_value():
        raise ServerStartError(f"{path} holds no FalkorDB password; delete it to get a new one")
    return secret.get_secret_value()


def _falkordb_args(port: int, data_dir: Path, module: str) -> list[str]:
    """redis-server's arguments after the ``-`` that reads the rest from stdin."""
    return [
        "-",
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--dir", str(data_dir.resolve()),
        "--appendonly", "yes",
        # Every write is on disk before FalkorDB answers it: the graph projector commits
        # its offsets after the answer, so a write lost in a crash would never come back.
        "--appendfsync", "always",
        "--save", "",
        # Plain strings in the rewritten AOF (its RDB preamble): after a purge, a grep of
        # the data dir shows that no purged text is left, which compressed strings hide.
        "--rdbcompression", "no",
        "--protected-mode", "no",
        "--loadmodule", module,
        # No query telemetry: FalkorDB would keep recent queries with their parameters
        # (event text) in a key of its own, which lands in the files and survives purges.
        "CMD_INFO", "no",
    ]  # fmt: skip


def _wait_for_ping(
    proc: subprocess.Popen[bytes], port: int, password: str, log: Path, deadline: float,
    loaded: bool,
) -> None:  # fmt: skip
    """Until the server answers PING (``loaded`` false: until it listens, loading or not);
    raises with its log's tail when it exits or stays silent past ``deadline``."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=2)
    try:
        while True:
            try:
                if client.ping():
                    return
            except (redis.BusyLoadingError, redis.TimeoutError) as exc:
                # Listening but "loading", or too busy replaying its file to answer in time.
                if not loaded:
                    return
                if proc.poll() is not None:
                    raise _fail("FalkorDB", proc, log, f"exited while loading: {exc}") from exc
                time.sleep(0.2)
            except Exception as exc:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise _fail("FalkorDB", proc, log, f"PING failed: {exc}") from exc
                time.sleep(0.1)
    finally:
        client.close()


def start_falkordb(
    port: int,
    data_dir: Path,
    log_dir: Path,
    timeout: float = 30.0,
    *,
    password: str,
    loaded: bool = True,
) -> Server:
    """FalkorDB (redis-server + module) with AOF persistence in ``data_dir``, refusing any
    client that does not AUTH with ``password``.

    Returns once it answers PING; with ``loaded`` false, as soon as it listens (a restart:
    replaying a long append-only file can take minutes, during which it answers "loading"
    or not at all; clients meanwhile see a store briefly down). With ``loaded``, a server
    still loading is waited for as long as it lives.
    """
    server, module = falkordb_binaries()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    log = log_dir / "falkordb.log"
    argv = [server, *_falkordb_args(port, data_dir, module)]
    # The configuration starts on stdin: the password is on no command line (ps) and in no
    # file but the data dir's own.
    proc = spawn(argv, log, stdin=f"requirepass {password}\n".encode())
    _wait_for_ping(proc, port, password, log, time.monotonic() + timeout, loaded)

    def again() -> Server:
        return start_falkordb(port, data_dir, log_dir, timeout, password=password, loaded=False)

    return Server("falkordb", proc, port, log, again, password=password)
