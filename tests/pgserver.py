"""A real PostgreSQL server for the test suite: Debian's ``postgresql`` package, a fresh
cluster in a temporary folder, on a free port, stopped with the session.

PostgreSQL refuses to run as root: when the suite runs as root the cluster is made and run
as the ``postgres`` user the package creates (``runuser``), in a folder that user owns.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from memstream.stack.net import free_port

USER = "memstream"


class PostgresMissing(RuntimeError):
    """The server binaries are not installed (``make system-deps`` installs them)."""


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise PostgresMissing(f"{name} not found under /usr/lib/postgresql: run make system-deps")
    return found[-1]  # the newest major version installed


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@dataclass(frozen=True)
class Postgres:
    port: int
    root: Path

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def fresh_database(self, name: str) -> str:
        """A new empty database; its URL."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{name}"


@contextmanager
def running_postgres() -> Iterator[Postgres]:
    root = Path(tempfile.mkdtemp(prefix="memstream-pg-"))
    if os.geteuid() == 0:
        pg = pwd.getpwnam("postgres")
        os.chown(root, pg.pw_uid, pg.pw_gid)
    data, port = root / "data", free_port()
    log = open(root.parent / f"{root.name}.log", "ab")  # noqa: SIM115 - the server's output
    proc = None
    try:
        initdb = [_bin("initdb"), "-D", str(data), "-U", USER, "-A", "trust", "-E", "UTF8"]
        subprocess.run(
            _as_server_user([*initdb, "--no-sync"]),
            check=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        listen = ["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]
        argv = [_bin("postgres"), "-D", str(data), "-p", str(port), "-k", str(root), *listen]
        proc = subprocess.Popen(_as_server_user(argv), stdout=log, stderr=subprocess.STDOUT)
        server = Postgres(port, root)
        _wait_ready(server, proc)
        yield server
    finally:
        if proc is not None:
            proc.terminate()  # the runuser wrapper passes it on: a fast shutdown
            proc.wait(30)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _wait_ready(server: Postgres, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(server.url, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
