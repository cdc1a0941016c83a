"""Two replicas of each worker that scales out, one consumer group each, under HTTP load: a
replica of the sequencer, one of the graph projector and one of the archiver killed with
SIGKILL. The supervisor starts them again, ``memstream status`` shows every partition held by
a living member, every accepted event is ledgered exactly once and archived exactly once,
the chain verifies and the graph converges."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from loadgen import Load
from memstream.archive.segments import read_archive
from memstream.client import MemoryHttpClient
from memstream.kafka.topics import (
    ARCHIVER_GROUP,
    LATENT_INPUTS,
    LATENTS_GROUP,
    LEDGER,
    RAW,
    SEQUENCER_GROUP,
)
from memstream.ledger.purge import is_purged
from stackproc import RunningStack, healthy_status, memstream, owned_stack, pid_alive, wait_until

PARTITIONS = 4  # the stack's default per topic


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """This module owns its stack: it kills replicas and counts every event of the stack."""
    yield from owned_stack(tmp_path_factory, "replicas", env={"MEMSTREAM_REPLICAS": "2"})


def groups(stack: RunningStack) -> dict[str, Any]:
    res = memstream("status", "--json", data_dir=stack.data_dir, check=False)
    doc: dict[str, Any] = json.loads(res.stdout) if res.stdout.strip() else {}
    return dict(doc.get("consumer_groups", {}))


def holders(group: dict[str, Any], topic: str) -> dict[int, list[int]]:
    """pid -> the partitions of ``topic`` the member of that pid reports holding."""
    return {
        int(m["pid"]): list(m["assignment"].get(topic, []))
        for m in group["members"]
        if m["pid"] is not None
    }


def shared_by_two_living(stack: RunningStack, name: str, topic: str, gone: int = 0) -> bool:
    """Two living members (neither the pid ``gone``) share ``topic``'s partitions: each
    holds some, none is held twice, none is left."""
    group = groups(stack).get(name)
    if group is None:
        return False
    held = holders(group, topic)
    parts = [p for ps in held.values() for p in ps]
    return (
        len(held) == 2
        and gone not in held
        and all(pid_alive(pid) and ps for pid, ps in held.items())
        and sorted(parts) == list(range(PARTITIONS))
    )


def graph_group(stack: RunningStack) -> str:
    (name,) = [
        g
        for g, doc in groups(stack).items()
        if any(m["component"] == "graph-projector" for m in doc["members"])
    ]
    return name


def test_each_scaling_worker_runs_two_members_sharing_the_partitions(stack: RunningStack) -> None:
    info = json.loads((stack.data_dir / "stack.json").read_text())["components"]
    for role in ("sequencer", "archiver", "graph-projector", "retrospective", "latent-builder"):
        assert info[role]["worker"] == info[f"{role}-2"]["worker"] == role
        assert info[role]["pid"] != info[f"{role}-2"]["pid"]
    wait_until(
        lambda: shared_by_two_living(stack, SEQUENCER_GROUP, RAW), 90, "two sequencers sharing"
    )
    wait_until(lambda: shared_by_two_living(stack, ARCHIVER_GROUP, LEDGER),
               90, "two archivers sharing")  # fmt: skip
    wait_until(lambda: shared_by_two_living(stack, LATENTS_GROUP, LATENT_INPUTS),
               120, "two latent builders sharing whole tenants")  # fmt: skip
    wait_until(lambda: len(groups(stack).get(graph_group(stack), {}).get("members", [])) == 2,
               90, "two graph projectors")  # fmt: skip
    graph = graph_group(stack)
    wait_until(
        lambda: shared_by_two_living(stack, graph, LEDGER), 90, "two graph projectors sharing"
    )
    healthy_status(stack.data_dir)  # every replica up, the niced ones too
    table = memstream("status", data_dir=stack.data_dir, check=False).stdout
    for pid in holders(groups(stack)[SEQUENCER_GROUP], RAW):  # a row for each member
        assert f" {pid} " in table, pid


def test_replicas_killed_under_load_lose_and_duplicate_nothing(stack: RunningStack) -> None:
    keys = {
        t: memstream("keys", "create", "--tenant", t, data_dir=stack.data_dir).stdout.strip()
        for t in ("north-7", "south_2")
    }
    graph = graph_group(stack)
    load = Load(stack, keys)
    thread = threading.Thread(target=load.run)
    thread.start()
    try:
        wait_until(lambda: sum(map(len, load.accepted.values())) >= 200, 60, "load running")
        victims = {
            "sequencer-2": stack.pid("sequencer-2"),
            "graph-projector": stack.pid("graph-projector"),
            "archiver-2": stack.pid("archiver-2"),
        }
        for pid in victims.values():
            os.kill(pid, signal.SIGKILL)
        for name, pid in victims.items():
            wait_until(lambda n=name, p=pid: stack.pid(n) != p, 60, f"{name} restarted")  # type: ignore[misc]
        seq_gone, graph_gone = victims["sequencer-2"], victims["graph-projector"]
        wait_until(lambda: shared_by_two_living(stack, SEQUENCER_GROUP, RAW, seq_gone),
                   120, "the raw partitions held by living sequencers")  # fmt: skip
        wait_until(lambda: shared_by_two_living(stack, graph, LEDGER, graph_gone),
                   120, "the ledger partitions held by living graph projectors")  # fmt: skip
        wait_until(lambda: shared_by_two_living(stack, ARCHIVER_GROUP, LEDGER,
                                                victims["archiver-2"]),
                   120, "the ledger partitions held by living archivers")  # fmt: skip
        seen = sum(map(len, load.accepted.values()))
        wait_until(lambda: sum(map(len, load.accepted.values())) > seen + 100, 60, "load after")
    finally:
        load.stop.set()
        thread.join(60)
    load.answered_every_write()
    load.lost_nothing_and_doubled_nothing()
    ledgered = {e["id"] for e in stack.ledger() if e["tenant"] in keys}

    def archived() -> Counter[str]:
        archive = stack.data_dir / "archive"
        return Counter(e["id"] for t in keys for e, _ in read_archive(archive, t))

    wait_until(lambda: ledgered <= set(archived()), 120, "every ledgered event archived")
    counts = archived()
    assert set(counts) == ledgered and max(counts.values()) == 1, counts.most_common(3)
    assert memstream("verify", data_dir=stack.data_dir, check=False).returncode == 0


SUBJECT = "Ottilie Brønnum-Vaz"


def test_a_purge_is_obeyed_by_every_archiver_and_latent_builder(stack: RunningStack) -> None:
    """Her events spread over every partition, so both archivers hold segments of them; the
    purge completes in every store, and every archived copy is in its purged form."""
    tenant = "purge-west"
    key = memstream("keys", "create", "--tenant", tenant, data_dir=stack.data_dir).stdout.strip()
    ids = [f"ot-{i}" for i in range(12)]
    events = [
        {"id": eid, "stream": f"diary-{i}", "agent": "the user", "type": "message.user",
         "occurred_at": f"2026-04-{i + 1:02d}T09:00:00Z",
         "payload": {"text": f"{SUBJECT} rowed to the lighthouse, trip {i}."}}
        for i, eid in enumerate(ids)
    ]  # fmt: skip
    archive = stack.data_dir / "archive"

    def archived() -> dict[str, dict[str, Any]]:
        return {e["id"]: e for e, _ in read_archive(archive, tenant) if e["id"] in ids}

    with MemoryHttpClient(stack.api_url, key, timeout=150) as client:
        client.emit(events)
        wait_until(lambda: len(archived()) == len(ids), 120, "her events archived")
        parts = {p.name.split("-")[0] for p in (archive / tenant).glob("p*.jsonl")}
        held = holders(groups(stack)[ARCHIVER_GROUP], LEDGER)
        writers = {pid for pid, ps in held.items() if {f"p{p:03d}" for p in ps} & parts}
        assert len(writers) == 2, (parts, held)  # both replicas wrote some of her segments
        wait_until(lambda: bool(client.latents(types=["episode_latent"])), 120, "an episode")
        report: dict[str, Any] = client.purge(SUBJECT, wait_s=120)
    assert report["complete"] is True, report
    assert set(report["completed"]) >= {"archive", "latents", "graph", "vectors"}
    copies = archived()
    assert set(copies) == set(ids) and all(is_purged(e) for e in copies.values())
    assert memstream("verify", data_dir=stack.data_dir, check=False).returncode == 0
