"""What a running stack writes is its user's alone, and its graph server answers only to the
data dir's password: after events, a purge (the vector index compacted, the graph's file
rewritten, archive segments rewritten) and a broker restart, every folder under the data dir
is 0700 and every file 0600; a client without the password is refused; the password is on no
command line and in no environment of the stack's processes."""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from memstream.client import MemoryHttpClient
from memstream.settings import FALKORDB_PASSWORD_FILE
from stackproc import RunningStack, memstream, start_stack, wait_until

TENANT = "verrou"
SUBJECT = "Åsa Nyström"


def loose_modes(data_dir: Path) -> list[str]:
    """Every path under ``data_dir`` that is not 0700 (folders) or 0600 (files)."""
    loose = []
    for root, dirs, files in os.walk(data_dir):
        for name in [*dirs, *files]:
            path = Path(root) / name
            try:
                st = path.lstat()
            except FileNotFoundError:  # a store replaced it since the listing: nothing to check
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
            if stat.S_IMODE(st.st_mode) != want:
                loose.append(f"{oct(stat.S_IMODE(st.st_mode))} {path.relative_to(data_dir)}")
    return loose


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """A stack that took events, purged a subject and survived a broker restart."""
    stack = start_stack(tmp_path_factory.mktemp("lockdown") / "data")
    try:
        key = memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir)
        with MemoryHttpClient(stack.api_url, key.stdout.strip(), timeout=150) as client:
            notes = [
                {"id": f"n{i}", "stream": "notes", "type": "message.user",
                 "payload": {"text": f"{SUBJECT} filed report {i} at the depot"}}
                for i in range(6)
            ]  # fmt: skip
            client.emit(notes)

            def recalled() -> bool:
                return len(client.recall(f"{SUBJECT} report", k=10)) >= 6

            wait_until(recalled, 90, "the events recalled")
            tansu = stack.pid("tansu")
            os.kill(tansu, signal.SIGKILL)
            wait_until(lambda: stack.pid("tansu") != tansu, 60, "the broker restarted")
            report = client.purge(SUBJECT, wait_s=90)
            assert report["complete"], report
        archive = stack.data_dir / "archive"
        wait_until(lambda: any(archive.rglob("*.jsonl")), 60, "archive segments")
        yield stack
    finally:
        stack.stop()


def test_every_folder_is_0700_and_every_file_0600(ran: RunningStack) -> None:
    data = ran.data_dir
    for part in ("graph", "vectors", "archive", "outbox", "logs"):
        assert (data / part).is_dir(), part
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert loose_modes(data) == []


def test_the_graph_server_refuses_a_client_without_the_password(ran: RunningStack) -> None:
    url = ran.info["falkordb_url"]
    for password in (None, "memstream"):
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(url, password=password, socket_timeout=5).execute_command(
                "GRAPH.RO_QUERY", "memstream_v1", "MATCH (n) RETURN n.text LIMIT 1"
            )
    password = (ran.data_dir / FALKORDB_PASSWORD_FILE).read_text().strip()
    assert redis.Redis.from_url(url, password=password, socket_timeout=5).ping()


def test_the_password_is_on_no_command_line_environment_or_stack_file(ran: RunningStack) -> None:
    password = (ran.data_dir / FALKORDB_PASSWORD_FILE).read_text().strip().encode()
    assert len(password) >= 32
    assert password not in (ran.data_dir / "stack.json").read_bytes()
    pids = [ran.proc.pid, *(ran.pid(c) for c in ran.info["components"])]
    for pid in pids:
        proc = Path(f"/proc/{pid}")
        assert password not in (proc / "cmdline").read_bytes(), pid
        assert password not in (proc / "environ").read_bytes(), pid
