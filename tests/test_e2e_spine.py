"""The spine end to end: `memstream up` as a real process, real Tansu and FalkorDB."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from confluent_kafka import Producer
from memstream.kafka.reading import read_to_end
from memstream.kafka.topics import DLQ, RAW
from memstream.sdk import MemoryClient
from stackproc import (
    BIN,
    RunningStack,
    healthy_status,
    memstream,
    owned_stack,
    pid_alive,
    start_stack,
    wait_until,
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """This module owns its stack: it kills workers, counts the whole ledger and the DLQ, and
    stops the stack."""
    yield from owned_stack(tmp_path_factory, "spine")


def batch(tenant_prefix: str, n: int, streams: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{tenant_prefix}-{i}",
            "stream": f"s{i % streams}",
            "agent": f"agent-{i % 3}",
            "type": "message.user",
            "payload": {"text": f"{tenant_prefix} says hello #{i}"},
        }
        for i in range(n)
    ]


def stats(s: RunningStack) -> dict[str, Any]:
    out = memstream("ledger", "stats", "--json", data_dir=s.data_dir)
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def post(s: RunningStack, key: str, events: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(
        f"{s.api_url}/v1/events",
        json={"events": events},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )


def drained(s: RunningStack) -> bool:
    doc = json.loads(memstream("status", "--json", data_dir=s.data_dir, check=False).stdout)
    return all(g.get("total") == 0 for g in doc["lag"].values())


def test_http_batches_land_exactly_once_even_when_resent(stack: RunningStack) -> None:
    key_a = memstream("keys", "create", "--tenant", "alpha", data_dir=stack.data_dir).stdout.strip()
    key_b = memstream("keys", "create", "--tenant", "beta", data_dir=stack.data_dir).stdout.strip()
    a, b = batch("alpha", 500, 7), batch("beta", 200, 3)
    for _ in range(2):  # the second round is a resend of the same ids
        for key, events in ((key_a, a), (key_b, b)):
            resp = post(stack, key, events)
            assert resp.status_code == 202, resp.text
            assert resp.json()["accepted"] == len(events)
        wait_until(
            lambda: (
                stats(stack)["tenants"].get("beta", {}).get("events", 0) >= 200
                and stats(stack)["tenants"].get("alpha", {}).get("events", 0) >= 500
            ),
            60,
            "both tenants in the ledger",
        )
        wait_until(lambda: drained(stack), 60, "the sequencer to drain")
    doc = stats(stack)["tenants"]
    assert doc["alpha"] == {"events": 500, "streams": 7, "purged": 0}
    assert doc["beta"] == {"events": 200, "streams": 3, "purged": 0}
    ids = Counter(e["id"] for e in stack.ledger() if e["tenant"] in ("alpha", "beta"))
    assert len(ids) == 700 and max(ids.values()) == 1


def test_poison_goes_to_dlq_and_the_sequencer_keeps_going(stack: RunningStack) -> None:
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    garbage = b"\x00\x01 definitely not json \xff"
    wrong = orjson.dumps({"tenant": "alpha", "stream": "s0", "type": "message.user"})
    producer.produce(RAW, garbage, key=b"alpha/s0")
    # Proved as the stack: this record is refused for what it holds, not for who sent it.
    producer.produce(RAW, wrong, key=b"alpha/s0", headers=stack.prover.headers(wrong))
    producer.flush(10)
    with MemoryClient(stack.bootstrap, "alpha", prover=stack.prover) as client:
        after = client.emit("s0", "observation", {"text": "still alive after poison"})
    wait_until(lambda: any(e["id"] == after for e in stack.ledger()), 30, "the next event")
    dead = [orjson.loads(m.value() or b"{}") for m in read_to_end(stack.bootstrap, DLQ)]
    raws = {base64.b64decode(d["raw_b64"]): d for d in dead if d["raw_b64"]}
    assert garbage in raws and wrong in raws
    assert raws[garbage]["reason"].startswith(("undecodable", "invalid envelope"))
    assert "id" in raws[wrong]["reason"]
    assert raws[wrong]["source"]["topic"] == RAW and raws[wrong]["source"]["offset"] >= 0
    assert stats(stack)["dlq"] >= 2


def test_verify_passes_and_names_a_tampered_line(stack: RunningStack, tmp_path: Path) -> None:
    wait_until(lambda: drained(stack), 60, "the archiver to drain")
    ok = memstream("verify", data_dir=stack.data_dir, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    copy = tmp_path / "copy"
    shutil.copytree(stack.data_dir / "archive", copy / "archive")
    # The longest segment (each ledger partition has its own), a line from its middle.
    seg = max((copy / "archive" / "alpha").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    lines = seg.read_bytes().splitlines(keepends=True)
    at = len(lines) // 2
    entry = orjson.loads(lines[at])
    # The content is sealed: rewriting it means replacing the ciphertext the hash covers.
    assert "payload" not in entry
    entry["sealed"]["c"] = entry["sealed"]["c"][::-1]
    lines[at] = orjson.dumps(entry) + b"\n"
    seg.write_bytes(b"".join(lines))
    bad = memstream("verify", "--tenant", "alpha", data_dir=copy, check=False)
    assert bad.returncode == 1
    assert f"{seg}:{at + 1}" in bad.stdout and "hash does not match" in bad.stdout


def test_killing_workers_mid_ingest_loses_and_duplicates_nothing(stack: RunningStack) -> None:
    n = 6000
    ids = [f"kill-{i}" for i in range(n)]

    def emit() -> None:
        with MemoryClient(stack.bootstrap, "gamma", prover=stack.prover) as client:
            for i, event_id in enumerate(ids):
                client.emit(f"s{i % 5}", "observation", {"text": f"obs {i}"}, id=event_id)
                if i % 500 == 0:
                    client.flush(10)

    t = threading.Thread(target=emit)
    t.start()
    wait_until(lambda: stats(stack)["tenants"].get("gamma", {}).get("events", 0) > 0, 30, "start")
    killed = {c: stack.pid(c) for c in ("sequencer", "archiver")}
    for pid in killed.values():
        os.kill(pid, signal.SIGKILL)
    t.join(60)
    wait_until(
        lambda: all(stack.pid(c) != pid for c, pid in killed.items()), 30, "workers restarted"
    )
    wait_until(
        lambda: stats(stack)["tenants"].get("gamma", {}).get("events", 0) >= n, 120, "all events"
    )
    wait_until(lambda: drained(stack), 120, "the pipeline to drain")
    entries = [e for e in stack.ledger() if e["tenant"] == "gamma"]
    assert sorted(e["id"] for e in entries) == sorted(ids)
    for stream in {e["stream"] for e in entries}:
        seqs = [e["seq"] for e in entries if e["stream"] == stream]
        assert seqs == list(range(1, len(seqs) + 1))
    verify = memstream("verify", "--tenant", "gamma", data_dir=stack.data_dir, check=False)
    assert verify.returncode == 0, verify.stdout
    assert f"ok: {n} entries" in verify.stdout


SPINE_GROUPS = {
    "memstream-sequencer": "sequencer",
    "memstream-archiver": "archiver",
    "memstream-retrospective": "retrospective",
    "memstream-learning-route": "retrospective",
    "memstream-latents": "latent-builder",
    "memstream-latents-route": "latent-builder",
    "memstream-graph-v1": "graph-projector",
    "memstream-vector-v1": "api",  # the embedded stack's vector projection
}


def test_status_names_each_groups_members_and_what_they_hold(stack: RunningStack) -> None:
    found: list[dict[str, Any]] = []

    def assigned() -> bool:
        found[:] = [healthy_status(stack.data_dir)]
        groups = found[0]["consumer_groups"]
        return all(
            g in groups and groups[g]["members"] and groups[g]["members"][0]["assignment"]
            for g in SPINE_GROUPS
        )

    wait_until(assigned, 90, "every group's member to hold its partitions")
    doc = found[0]
    groups = doc["consumer_groups"]
    assert set(doc["lag"]) <= set(groups)
    for group, component in SPINE_GROUPS.items():
        (member,) = groups[group]["members"]  # one replica of each in this stack
        assert member["pid"] == doc["components"][component]["pid"], group
        assert member["client_id"] == f"{group}-{member['pid']}"
        assert isinstance(groups[group]["lag"], int), group
    raw = groups["memstream-sequencer"]["members"][0]["assignment"]["memory.events.raw"]
    assert raw == list(range(len(raw))) and raw  # one member holds every partition
    retro = groups["memstream-retrospective"]["members"][0]["assignment"]
    assert set(retro) == {"memory.learning", "memory.checkouts"}
    assert retro["memory.learning"] == retro["memory.checkouts"]  # co-partitioned
    latents = groups["memstream-latents"]["members"][0]["assignment"]
    assert set(latents) == {"memory.latent-inputs"} and latents["memory.latent-inputs"]
    table = memstream("status", data_dir=stack.data_dir, check=False).stdout
    assert "consumer group" in table and "memstream-sequencer" in table


def test_status_reports_components_and_lag(stack: RunningStack) -> None:
    doc = healthy_status(stack.data_dir)
    assert doc["kafka"]["bootstrap"] == stack.bootstrap
    assert len(doc["metrics_endpoints"]) >= 4
    for name in (
        "sequencer",
        "archiver",
        "retrospective",
        "latent-builder",
        "api",
        "falkordb",
        "tansu",
    ):
        assert doc["components"][name]["healthy"], name
    assert set(doc["lag"]) == {
        "memstream-sequencer",
        "memstream-archiver",
        "memstream-retrospective",
        "memstream-learning-route",
        "memstream-latents",
        "memstream-latents-route",
    }
    for url in doc["metrics_endpoints"]:
        body = httpx.get(url, timeout=5).text
        assert "memstream_" in body, url
    supervisor = httpx.get(doc["components"]["supervisor"]["metrics_url"], timeout=5).text
    for dep in ("kafka", "graph"):
        assert (
            f'memstream_dependency_up{{component="supervisor",dependency="{dep}"}} 1.0'
            in supervisor
        )


def test_full_restart_keeps_events_and_extends_chains(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_stack(data)
    with MemoryClient(first.bootstrap, "delta", prover=first.prover) as client:
        for i in range(300):
            client.emit(f"s{i % 3}", "message.user", {"text": f"before restart {i}"}, id=f"d-{i}")
    wait_until(
        lambda: stats(first)["tenants"].get("delta", {}).get("events", 0) == 300, 60, "ledger"
    )
    before = {e["stream"]: e for e in first.ledger() if e["tenant"] == "delta"}  # last per stream
    assert first.stop() == 0
    assert not (data / "stack.json").exists()

    second = start_stack(data)
    try:
        assert stats(second)["tenants"]["delta"] == {"events": 300, "streams": 3, "purged": 0}
        with MemoryClient(second.bootstrap, "delta", prover=second.prover) as client:
            client.emit("s0", "message.user", {"text": "after restart"}, id="d-after")
            client.emit("s0", "message.user", {"text": "resent"}, id="d-0")  # a known id
        wait_until(lambda: stats(second)["tenants"]["delta"]["events"] == 301, 60, "the new event")
        wait_until(lambda: drained(second), 60, "drain")
        new = next(e for e in second.ledger() if e["id"] == "d-after")
        assert new["seq"] == before["s0"]["seq"] + 1
        assert new["prev_hash"] == before["s0"]["hash"]
        verify = memstream("verify", data_dir=data, check=False)
        assert verify.returncode == 0 and "ok: 301 entries" in verify.stdout, verify.stdout
    finally:
        second.stop()


def test_ctrl_c_leaves_no_process_behind(tmp_path: Path) -> None:
    s = start_stack(tmp_path / "data")
    pids = s.child_pids()
    assert len(pids) >= 6 and all(pid_alive(p) for p in pids)
    assert s.stop(signal.SIGINT) == 0
    wait_until(lambda: not any(pid_alive(p) for p in pids), 15, "children to exit")


def test_up_refuses_a_busy_api_port(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        res = memstream("up", "--api-port", str(port), data_dir=tmp_path / "d", check=False)
    assert res.returncode == 1
    assert f"API port {port} is already in use" in res.stderr


def test_up_names_a_missing_broker_binary(tmp_path: Path) -> None:
    res = subprocess.run(
        [str(BIN / "memstream"), "up", "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, CALF_TANSU_BIN=str(tmp_path / "no-such-tansu")),
    )
    assert res.returncode == 1
    assert "Tansu broker binary not found" in res.stderr and "no-such-tansu" in res.stderr
