"""Two API processes on one embedded data dir serve the same tenant. Each holds its own
vector index, fed by its own consumer group, and its own outbox: a write through either is
read through the other (a read given the write's position waits for it there). What stays
per replica is the recent-packet memory behind a packet id's lineage; a purge run through one
reaches the other's, through the tombstone its own vector projection obeys."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from memstream.client import MemoryHttpClient, MemstreamHttpError
from memstream.kafka.reading import committed_offsets
from memstream.kafka.topics import LEDGER
from memstream.metrics import read_samples
from memstream.stack.children import spawn, stop_process
from memstream.stack.net import free_port
from stackproc import RunningStack, memstream, owned_stack, wait_until

TENANT = "two-doors"
SUBJECT = "Maëlys Oyelaran-Kvist"
EVENTS = [
    {"id": "td-1", "stream": "notes", "type": "observation", "agent": "the user",
     "payload": {"text": "Maëlys Oyelaran-Kvist keeps the spare key of the boathouse."}},
    {"id": "td-2", "stream": "notes", "type": "observation", "agent": "the user",
     "payload": {"text": "The boathouse gate code changed to 7731 in March."}},
]  # fmt: skip


def cited(packet: dict[str, Any]) -> set[str]:
    """The event ids a packet cites, wherever it cites them."""
    ids = {i for a in packet["answer_candidates"] for i in a["support_ids"]}
    ids |= {f["fact_id"] for f in packet["facts"]} | {r["support_id"] for r in packet["evidence"]}
    ids |= {sn["item_id"] for sn in packet["snippets"]}
    return {i.split("#", 1)[0] for i in ids}


# Both APIs' MEMSTREAM_READ_AFTER_MAX_WAIT_S. The reads here ask to see a write; the default
# bound (5 s) is about an idle reader's patience, and a machine running two suites at once
# has been seen to take 5.3 s to apply one event: past the bound the answer is served with a
# stale warning, which the read-after tests prove apart. Here the write must be seen.
BOUND_S = 30.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """This module owns its stack: it starts a second API on it and purges a subject."""
    env: dict[str, str | None] = {"MEMSTREAM_READ_AFTER_MAX_WAIT_S": str(BOUND_S)}
    yield from owned_stack(tmp_path_factory, "twoapis", env=env)


@pytest.fixture(scope="module")
def key(stack: RunningStack) -> str:
    return memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir).stdout.strip()


@pytest.fixture(scope="module")
def second_api(stack: RunningStack, key: str) -> Iterator[str]:
    """A second API process on the stack's data dir, named ``b``; its URL."""
    port = free_port()
    env = dict(
        os.environ,
        MEMSTREAM_DATA_DIR=str(stack.data_dir.resolve()),
        MEMSTREAM_KAFKA_BOOTSTRAP=stack.bootstrap,
        MEMSTREAM_FALKORDB_URL=str(stack.info["falkordb_url"]),
        MEMSTREAM_API_HOST="127.0.0.1",
        MEMSTREAM_API_PORT=str(port),
        MEMSTREAM_API_REPLICA="b",
        MEMSTREAM_READ_AFTER_MAX_WAIT_S=str(BOUND_S),
    )
    env.pop("MEMSTREAM_API_FD", None)
    log = stack.data_dir.parent / "api-b.log"
    proc = spawn([sys.executable, "-m", "memstream_api.main"], log, env)
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(answers, 120, "the second API to answer")
        yield url
    finally:
        stop_process(proc)


def test_a_write_through_one_api_is_read_through_the_other(
    stack: RunningStack, key: str, second_api: str
) -> None:
    with MemoryHttpClient(stack.api_url, key) as a, MemoryHttpClient(second_api, key) as b:
        _ids, position = a.emit_written(EVENTS[:1])
        packet = b.checkout("who keeps the spare key of the boathouse?", after=position)
        assert packet["meta"]["after"]["applied"] is True, packet["meta"]["after"]
        assert "td-1" in cited(packet)
        _ids, position = b.emit_written(EVENTS[1:])
        packet = a.checkout("what is the boathouse gate code?", after=position)
        assert packet["meta"]["after"]["applied"] is True, packet["meta"]["after"]
        assert "td-2" in cited(packet)


def test_each_api_keeps_its_own_index_outbox_and_group(
    stack: RunningStack, second_api: str
) -> None:
    data: Path = stack.data_dir
    assert (data / "vectors").is_dir() and (data / "vectors-b").is_dir()
    assert (data / "outbox").is_dir() and (data / "outbox-b").is_dir()
    for group in ("memstream-vector-v1", "memstream-vector-v1-b"):  # each reads every partition
        wait_until(lambda g=group: len(committed_offsets(stack.bootstrap, g, LEDGER)) == 4,  # type: ignore[misc]
                   60, f"{group} to commit on every partition")  # fmt: skip


def test_a_purge_through_one_api_reaches_the_others_recent_packets(
    stack: RunningStack, key: str, second_api: str
) -> None:
    with MemoryHttpClient(stack.api_url, key) as a, MemoryHttpClient(second_api, key) as b:
        packet = b.checkout(f"what does {SUBJECT.lower()} keep?")
        pid = packet["packet_id"]
        assert b.lineage(pid)["id"] == pid  # b remembers the packets it built ...
        with pytest.raises(MemstreamHttpError) as elsewhere:
            a.lineage(pid)  # ... a does not: recent packets stay per replica
        assert elsewhere.value.status == 404
        report = a.purge(SUBJECT, wait_s=60)
        assert report["complete"] is True and report["removed"]["events"] == 1, report

        def forgotten() -> bool:
            try:
                b.lineage(pid)
            except MemstreamHttpError as exc:
                return exc.status == 404
            return False

        wait_until(forgotten, 60, "the second API to forget its packet naming the subject")
        wait_until(lambda: forgotten_by(second_api) >= 1, 60, "b to count what it forgot")


def forgotten_by(api_url: str) -> float:
    """The recent packets an API forgot on hearing a tombstone (its own /metrics)."""
    name = "memstream_purge_items_removed_total"
    wanted = {"store": "memory", "kind": "recent_packets"}
    return sum(
        s.value
        for s in read_samples(f"{api_url}/metrics", {name}, timeout=30)
        if all(s.labels.get(k) == v for k, v in wanted.items())
    )
