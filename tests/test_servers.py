"""The embedded servers start from the wheels and answer; FalkorDB only to its password."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import redis
from confluent_kafka.admin import AdminClient
from falkordb import FalkorDB
from memstream.settings import FALKORDB_PASSWORD_FILE, Settings
from memstream.stack.servers import Server, falkordb_password
from memstream_cli.stack.supervisor import lock_down


def test_broker_answers_metadata(broker: str) -> None:
    md = AdminClient({"bootstrap.servers": broker}).list_topics(timeout=5)
    assert md.brokers, "Tansu returned no broker in its metadata"


def test_falkordb_runs_cypher(falkordb_server: Server) -> None:
    graph = FalkorDB(port=falkordb_server.port, password=falkordb_server.password)
    assert graph.select_graph("probe").query("RETURN 1 + 1").result_set == [[2]]


def test_falkordb_refuses_a_client_without_the_password(falkordb_server: Server) -> None:
    for password in (None, "guess", f"{falkordb_server.password}x"):
        client = redis.Redis(port=falkordb_server.port, password=password, socket_timeout=5)
        with pytest.raises(redis.AuthenticationError):
            client.execute_command("GRAPH.RO_QUERY", "probe", "MATCH (n) RETURN n")


def test_the_password_is_on_no_command_line(falkordb_server: Server) -> None:
    assert falkordb_server.password
    argv = Path(f"/proc/{falkordb_server.proc.pid}/cmdline").read_bytes()
    assert falkordb_server.password.encode() not in argv


def test_a_data_dir_keeps_one_private_password(tmp_path: Path) -> None:
    first = falkordb_password(tmp_path)
    assert len(first) >= 32 and falkordb_password(tmp_path) == first
    mode = stat.S_IMODE(os.stat(tmp_path / FALKORDB_PASSWORD_FILE).st_mode)
    assert mode == 0o600
    secret = Settings(data_dir=tmp_path).falkordb_secret()
    assert secret is not None and secret.get_secret_value() == first
    assert Settings(data_dir=tmp_path / "none").falkordb_secret() is None
    assert first not in repr(Settings(data_dir=tmp_path, falkordb_password=secret))


def test_lock_down_makes_an_older_data_dir_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "graph" / "appendonlydir").mkdir(parents=True)
    aof = data / "graph" / "appendonlydir" / "appendonly.aof.1.incr.aof"
    aof.write_text("GRAPH.QUERY ...")
    keys = data / "keys.json"
    keys.write_text("{}")
    for path, mode in ((data, 0o755), (data / "graph", 0o755), (aof, 0o644), (keys, 0o644)):
        path.chmod(mode)
    outside = tmp_path / "shared.txt"
    outside.write_text("not ours")
    outside.chmod(0o644)
    (data / "link").symlink_to(outside)
    lock_down(data)
    for path in (data, data / "graph", data / "graph" / "appendonlydir"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    for path in (aof, keys):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644  # a link's target is left alone
