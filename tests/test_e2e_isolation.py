"""One tenant's poison never stops another tenant, on a real stack.

Tenant A's ledger holds entries FalkorDB cannot take (a NUL byte in the text, a NUL byte in a
feedback target), produced straight to memory.ledger as a restore from an archive written
before the edge refused them would. Tenant B's new fact still reaches B's checkout, B's purge
completes in every store, the poison is in memory.dlq with FalkorDB's reason and its offset,
and ``memstream status`` stays healthy. A worker killed again and again is unhealthy.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from confluent_kafka import KafkaError, Message
from memstream.client import MemoryHttpClient, MemstreamHttpError
from memstream.kafka.clients import make_producer
from memstream.kafka.topics import DLQ, LEDGER
from memstream.ledger.canonical import GENESIS_HASH
from memstream.ledger.entry import build_entry
from stackproc import (
    RunningStack,
    healthy_status,
    memstream,
    owned_stack,
    pid_alive,
    wait_until,
)
from topicread import read_topic


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """This module owns its stack: it kills a worker again and again and judges the health of
    the whole stack."""
    yield from owned_stack(tmp_path_factory, "isolation")


POISON_TENANT = "alpha"
NOW = "2025-10-01T00:00:00Z"


def poison_docs(stream: str) -> list[dict[str, Any]]:
    common = {"tenant": POISON_TENANT, "stream": stream, "occurred_at": "2025-09-30T10:00:00Z"}
    return [
        common
        | {"id": f"{stream}-text", "agent": "Mallory", "type": "message.user"}
        | {"payload": {"text": "a\x00b"}},
        common
        | {"id": f"{stream}-feedback", "agent": "Mallory", "type": "memory.feedback"}
        | {"payload": {"target_ids": ["x\x00y"], "signal": -1.0}},
    ]


@pytest.fixture(scope="module")
def poison(stack: RunningStack) -> dict[tuple[int, int], str]:
    """The poison entries, produced to memory.ledger as the sequencer writes entries; their
    (partition, offset) -> event id."""
    stream = f"restored-{uuid.uuid4().hex[:6]}"
    producer = make_producer(stack.bootstrap)
    where: dict[tuple[int, int], str] = {}
    failures: list[str] = []

    def delivered(event_id: str) -> Callable[[KafkaError | None, Message], None]:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                where[(msg.partition() or 0, msg.offset() or 0)] = event_id

        return report

    prev = GENESIS_HASH
    for seq, doc in enumerate(poison_docs(stream), start=1):
        kafka = {"topic": "memory.events.raw", "partition": 0, "offset": seq}
        entry, value = build_entry(dict(doc), seq, prev, NOW, kafka)
        prev = entry["hash"]
        producer.produce(
            LEDGER,
            value,
            key=f"{POISON_TENANT}/{stream}",
            headers=[
                ("event_id", entry["id"].encode()),
                ("seq", str(seq).encode()),
                ("hash", entry["hash"].encode()),
            ],
            on_delivery=delivered(entry["id"]),
        )
    assert producer.flush(30) == 0
    assert not failures and len(where) == 2, failures
    return where


@pytest.fixture(scope="module")
def beta(stack: RunningStack) -> Iterator[MemoryHttpClient]:
    key = memstream("keys", "create", "--tenant", "beta", data_dir=stack.data_dir).stdout.strip()
    with MemoryHttpClient(stack.api_url, key, timeout=120) as client:
        yield client


def status(stack: RunningStack) -> dict[str, Any]:
    out = memstream("status", "--json", data_dir=stack.data_dir, check=False)
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def test_tenant_b_new_fact_reaches_checkout_past_a_poison(
    stack: RunningStack, poison: dict[tuple[int, int], str], beta: MemoryHttpClient
) -> None:
    sent = time.monotonic()
    beta.emit(
        [
            {
                "id": "beta-fact-1",
                "stream": "notes",
                "type": "fact.asserted",
                "payload": {
                    "subject": "Quinn Ødegård",
                    "predicate": "lives_in",
                    "object": "Tromsø",
                },
            }
        ]
    )

    def in_facts() -> bool:
        try:
            packet = beta.checkout("Where does Quinn Ødegård live?")
        except MemstreamHttpError:
            return False
        return any(f["fact_id"] == "beta-fact-1#0" for f in packet["facts"])

    wait_until(in_facts, 90, "tenant B's fact in B's checkout facts")
    print(f"tenant B's fact reached checkout {time.monotonic() - sent:.2f}s after the 202")


def graph_dead_letters(stack: RunningStack) -> dict[tuple[int, int], dict[str, Any]]:
    """The graph projector's dead letters of ledger records, by (partition, offset)."""
    out = {}
    for m in read_topic(stack.bootstrap, DLQ):
        doc = orjson.loads(m.value() or b"{}")
        src = doc["source"]
        if doc["component"] == "graph-projector" and src["topic"] == LEDGER:
            out[(src["partition"], src["offset"])] = doc
    return out


def poison_read(stack: RunningStack, poison: dict[tuple[int, int], str]) -> None:
    """Wait until the graph projector has read the poison (and dead-lettered it)."""
    wait_until(
        lambda: set(poison) <= set(graph_dead_letters(stack)), 90, "the poison in memory.dlq"
    )


def test_the_poison_is_dead_lettered_with_the_graph_reason_and_its_offset(
    stack: RunningStack, poison: dict[tuple[int, int], str]
) -> None:
    poison_read(stack, poison)
    found = graph_dead_letters(stack)
    texts = [w for w, event_id in poison.items() if event_id.endswith("-text")]
    [text] = texts
    assert found[text]["reason"] == (
        "graph-projector (memstream-graph-v1): graph refused: FalkorDB cannot hold a NUL "
        "character (U+0000) in a string: $rows[0].text"
    )
    [feedback] = [w for w in poison if w not in texts]
    # a feedback target is read through the payload model, which may refuse NUL itself
    reason = found[feedback]["reason"]
    assert "NUL character (U+0000)" in reason or "malformed ledger entry" in reason, reason


def test_tenant_b_purge_completes_past_a_poison(
    stack: RunningStack, poison: dict[tuple[int, int], str], beta: MemoryHttpClient
) -> None:
    said = "Zuzanna Kowalczyk-Öst waved from the ferry."
    beta.emit([{"id": "beta-zuzanna", "stream": "street", "type": "message.user",
                "payload": {"text": said}}])  # fmt: skip

    def projected() -> bool:
        try:
            return bool(beta.lineage("beta-zuzanna"))
        except MemstreamHttpError:
            return False

    wait_until(projected, 90, "B's event in the graph")
    report = beta.purge("Zuzanna Kowalczyk-Öst", wait_s=90)
    assert report["complete"] is True, report
    assert report["completed"]["graph"] is True, report


def test_status_stays_healthy_with_a_poison_in_the_ledger(
    stack: RunningStack, poison: dict[tuple[int, int], str]
) -> None:
    # The poison read (it makes no loop restart or stop), then healthy once every worker is
    # up (under load the niced ones take a while to start).
    poison_read(stack, poison)
    doc = healthy_status(stack.data_dir)
    assert doc["healthy"] is True, doc["problems"]
    loops = doc["components"]["graph-projector"]["consumers"]
    assert loops["memstream-graph-v1"]["running"] is True
    assert loops["memstream-graph-v1"]["restarts"] == 0


def test_a_worker_killed_again_and_again_makes_status_unhealthy(stack: RunningStack) -> None:
    """Killed three times, then again while status calls it healthy: status judges the
    present (a run younger than SETTLED_S after 3 restarts), and under load the status read
    itself may outlast a young run. Runs last in the module: the archiver is left restarting."""
    kills = 0
    for _ in range(6):
        pid = stack.pid("archiver")
        os.kill(pid, signal.SIGKILL)
        kills += 1
        wait_until(lambda p=pid: stack.pid("archiver") != p, 60, "the archiver restarted")  # type: ignore[misc]
        if kills < 3:
            continue
        wait_until(lambda: pid_alive(stack.pid("archiver")), 60, "the archiver running")
        doc = status(stack)
        if not doc["components"]["archiver"]["healthy"]:
            break
    archiver = doc["components"]["archiver"]
    assert doc["healthy"] is False and archiver["healthy"] is False, doc
    assert archiver["restarts"] == kills
    said = f"archiver is restarting in a loop: {kills} restarts"
    assert any(said in p for p in archiver["problems"]), archiver["problems"]
    assert any(p.startswith("archiver is restarting in a loop") for p in doc["problems"])
