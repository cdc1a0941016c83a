"""Health tells the truth: a loop that restarts in a loop, stopped, or stalls is unhealthy,
read from the metrics it serves, as ``memstream status`` reads them."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Message
from memstream.embed.registry import get_embedder
from memstream.kafka.clients import make_producer
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.topics import LEDGER, ensure_topics
from memstream.metrics import serve_metrics
from memstream.ops.loops import (
    SETTLED_S,
    STALL_S,
    Loop,
    loops_of,
    members_of,
    read_loops,
)
from memstream.projection.runner import ProjectionManager
from memstream.projection.versions import FileProjectionRegistry, ProjectionConfig
from memstream.settings import Settings
from memstream.stack.servers import Server
from memstream_cli.stack.locate import Endpoints
from memstream_cli.stack.stackfile import ComponentInfo, StackInfo
from memstream_cli.stack.status import collect_status
from prometheus_client.samples import Sample
from stackproc import wait_until

NOW = 1_800_000_000.0


def sample(name: str, value: float, group: str = "g1", **labels: str) -> Sample:
    return Sample(name, {"component": "graph-projector", "group": group, **labels}, value)


def loop_of(*samples: Sample) -> Loop:
    [loop] = loops_of(samples).values()
    return loop


def healthy_samples(**over: float) -> list[Sample]:
    values = {
        "memstream_consumer_running": 1.0,
        "memstream_consumer_started_timestamp_seconds": NOW - 3600,
        "memstream_consumer_restarts_total": 0.0,
        "memstream_consumer_last_commit_timestamp_seconds": NOW - 1,
        "memstream_consumer_waiting": 0.0,
    } | {f"memstream_consumer_{k}": v for k, v in over.items()}
    return [sample(name, v) for name, v in values.items()]


def test_a_loop_that_commits_is_healthy() -> None:
    loop = loop_of(
        *healthy_samples(), sample("memstream_consumer_lag", 40, topic="t", partition="0")
    )
    assert loop.problems(NOW) == []
    assert loop.summary(NOW) == {
        "component": "graph-projector",
        "running": True,
        "waiting": False,
        "lag": 40,
        "since_commit_s": 1.0,
        "restarts": 0,
    }


def test_restarts_count_while_the_current_run_is_young() -> None:
    young = loop_of(*healthy_samples(restarts_total=4, started_timestamp_seconds=NOW - 12))
    assert young.problems(NOW) == [
        "consumer g1 is restarting in a loop: 4 restarts, the current run began 12s ago"
    ]
    settled = healthy_samples(restarts_total=4, started_timestamp_seconds=NOW - SETTLED_S)
    assert loop_of(*settled).problems(NOW) == []
    two = healthy_samples(restarts_total=2, started_timestamp_seconds=NOW - 1)
    assert loop_of(*two).problems(NOW) == []


def test_a_loop_stopped_on_an_error_is_unhealthy() -> None:
    assert loop_of(*healthy_samples(running=0)).problems(NOW) == [
        "consumer g1 is not running (stopped on an error)"
    ]


def test_lag_without_commits_is_a_stall_even_while_waiting_for_a_store() -> None:
    lag = [sample("memstream_consumer_lag", 7, topic="t", partition=p) for p in ("0", "1")]
    waiting = healthy_samples(waiting=1, last_commit_timestamp_seconds=NOW - STALL_S - 30)
    assert loop_of(*waiting, *lag).problems(NOW) == [
        f"consumer g1 has committed nothing for {STALL_S + 30:.0f}s with 14 records waiting "
        "(waiting for an unavailable store)"
    ]
    recent = healthy_samples(waiting=1, last_commit_timestamp_seconds=NOW - 10)
    assert loop_of(*recent, *lag).problems(NOW) == []  # healthy, and says it waits
    assert loop_of(*recent, *lag).summary(NOW)["waiting"] is True
    caught_up = healthy_samples(last_commit_timestamp_seconds=NOW - 10 * STALL_S)
    assert loop_of(*caught_up).problems(NOW) == []  # nothing to commit is not a stall


def test_members_are_read_from_what_each_process_reports() -> None:
    g = "memstream-projection-v1-graph"
    assigned = "memstream_consumer_assigned_partitions"
    samples = [
        sample("memstream_consumer_member", 1, group=g, client_id=f"{g}-4242", pid="4242"),
        sample(assigned, 1, group=g, topic="memory.ledger", partition="3"),
        sample(assigned, 1, group=g, topic="memory.ledger", partition="1"),
        sample(assigned, 1, group=g, topic="memory.latents", partition="0"),
        # a group this process reports no membership of: not a member
        sample(assigned, 1, group="other", topic="t", partition="0"),
    ]
    (member,) = members_of(samples)
    assert member.as_json() == {
        "client_id": f"{g}-4242",
        "pid": 4242,
        "component": "graph-projector",
        "assignment": {"memory.latents": [0], "memory.ledger": [1, 3]},
    }


def test_lag_series_alone_are_not_a_loop() -> None:
    assert loops_of([sample("memstream_consumer_lag", 3, topic="t", partition="0")]) == {}


class Broken:
    """A projector with a bug: every batch raises."""

    def __init__(self, dead_letters: DeadLetterWriter) -> None:
        self.dead_letters = dead_letters

    def process(self, msgs: list[Message]) -> None:
        raise RuntimeError("a bug in the projector")

    def close(self) -> None: ...

    def discard(self) -> None: ...


@pytest.fixture
def crashing_group(broker: str, tmp_path: Path) -> Iterator[str]:
    """The group of a projection runner whose only version crashes on every batch, over a
    ledger with records in it."""
    ensure_topics(broker, Settings())
    producer = make_producer(broker)
    producer.produce(LEDGER, b"{}", key=b"t/s")
    producer.flush(10)
    registry = FileProjectionRegistry(tmp_path / "projections.json")
    embedder = get_embedder(None)
    name = f"crash{uuid.uuid4().hex[:6]}"
    config = ProjectionConfig(
        embedder=embedder.name, embedder_version=embedder.version, dim=embedder.dim
    )
    registry.register(name, config)
    manager = ProjectionManager(
        settings=Settings(),
        bootstrap=broker,
        registry=registry,
        component="graph-projector",
        factory=lambda info: Broken(DeadLetterWriter(producer, "graph-projector", LEDGER)),
        group_of=lambda info: f"memstream-test-{info.name}",
    )
    thread = threading.Thread(target=manager.run_forever, kwargs={"interval": 0.2})
    thread.start()
    try:
        yield f"memstream-test-{name}"
    finally:
        manager.stopping.set()
        thread.join(60)


def test_a_loop_that_keeps_crashing_makes_status_unhealthy(
    crashing_group: str, broker: str, falkordb_server: Server
) -> None:
    group = crashing_group
    url = f"http://127.0.0.1:{serve_metrics(0)}/metrics"

    def restarting() -> bool:
        loop = read_loops(url).get(group)
        return loop is not None and any(
            "restarting in a loop" in p for p in loop.problems(time.time())
        )

    wait_until(restarting, 120, "the crashing loop to count as restarting in a loop")
    stack = StackInfo(
        pid=os.getpid(),
        started_at="2025-10-01T00:00:00Z",
        data_dir="/nonexistent",
        kafka_bootstrap=broker,
        falkordb_url=f"redis://127.0.0.1:{falkordb_server.port}",
        api_url="http://127.0.0.1:9/never",
        metrics_endpoints=[url],
        components={"graph-projector": ComponentInfo(pid=os.getpid(), log="", metrics_url=url)},
        dev_key_file="/nonexistent",
    )
    doc = collect_status(Endpoints(broker, None, stack))
    projector = doc["components"]["graph-projector"]
    assert projector["healthy"] is False
    assert any(f"consumer {group} is restarting in a loop" in p for p in projector["problems"])
    assert doc["healthy"] is False
    assert any(p.startswith(f"consumer {group}") for p in doc["problems"])
    assert projector["consumers"][group]["restarts"] >= 3


class _SlowMetrics(http.server.BaseHTTPRequestHandler):
    """A ``/metrics`` that answers, but only after a few seconds: a busy process."""

    def do_GET(self) -> None:
        time.sleep(3)
        body = b"# HELP up Up\n# TYPE up gauge\nup 1\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None: ...


def test_status_names_what_did_not_answer_and_waits_for_what_is_slow(
    broker: str, falkordb_server: Server
) -> None:
    slow = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowMetrics)
    threading.Thread(target=slow.serve_forever, daemon=True).start()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        silent_url = f"http://127.0.0.1:{s.getsockname()[1]}/metrics"
    gone = subprocess.Popen(["true"])
    gone.wait()
    young = subprocess.Popen(["sleep", "30"])  # a process just started, not serving yet
    slow_url = f"http://127.0.0.1:{slow.server_address[1]}/metrics"
    stack = StackInfo(
        pid=os.getpid(),
        started_at="2025-10-01T00:00:00Z",
        data_dir="/nonexistent",
        kafka_bootstrap=broker,
        falkordb_url=f"redis://127.0.0.1:{falkordb_server.port}",
        api_url="http://127.0.0.1:9/never",
        metrics_endpoints=[slow_url, silent_url],
        components={
            "slow": ComponentInfo(pid=os.getpid(), log="", metrics_url=slow_url),
            # pid 1: a process long up, so its silence is not a start
            "silent": ComponentInfo(pid=1, log="", metrics_url=silent_url),
            "young": ComponentInfo(pid=young.pid, log="", metrics_url=silent_url),
            "gone": ComponentInfo(pid=gone.pid, log="", metrics_url=None),
        },
        dev_key_file="/nonexistent",
    )
    try:
        doc = collect_status(Endpoints(broker, None, stack))
    finally:
        slow.shutdown()
        young.kill()
        young.wait()
    parts = doc["components"]
    assert parts["slow"]["healthy"] is True, parts["slow"]["problems"]
    assert parts["silent"]["healthy"] is False
    assert [p.split(" did not answer")[0] for p in parts["silent"]["problems"]] == [
        f"silent: {silent_url}"
    ]
    assert parts["young"]["healthy"] is False
    [starting] = parts["young"]["problems"]
    assert starting.startswith("young: starting (up ") and "not answering yet" in starting
    assert parts["gone"]["healthy"] is False
    assert parts["gone"]["problems"] == [f"gone: process {gone.pid} is not running"]
    assert doc["healthy"] is False
    for name, part in parts.items():  # every unhealthy verdict says why
        assert part.get("healthy", True) or part["problems"], name
