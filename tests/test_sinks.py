"""A store is added by one entry in the table of sinks plus its adapter: here an in-memory
store of the ledger's events, run by a worker loop against the real broker. The supervisor
plans its worker, ``memstream status`` reports its consumer group, and a purge's watch checks
it until the tombstone reached it."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Message
from memstream.graph.port import PurgeScope
from memstream.kafka.clients import make_producer
from memstream.kafka.runner import worker_loop
from memstream.kafka.topics import LEDGER, ensure_topics
from memstream.ledger.canonical import GENESIS_HASH
from memstream.ledger.entry import build_entry, load_entry, read_loaded
from memstream.projection.live import LiveStores
from memstream.projection.purge import read_entry
from memstream.projection.versions import FileProjectionRegistry
from memstream.settings import Settings
from memstream.sinks import SINKS, Group, PurgeTarget, Sink, StoreCheck
from memstream_cli.stack.locate import Endpoints
from memstream_cli.stack.status import collect_status
from memstream_cli.stack.supervisor import plan_workers
from stackproc import wait_until

GROUP = f"memstream-memory-sink-{uuid.uuid4().hex[:6]}"


@dataclass
class MemoryStore:
    """The adapter: the ledger's events by (tenant, id), gone once a tombstone names them."""

    held: dict[tuple[str, str], str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def process(self, msgs: list[Message]) -> None:
        for m in msgs:
            if not (m.key() or b"").startswith(b"sink-"):
                continue  # the session broker's ledger holds other tests' tenants too
            read = read_loaded(load_entry(m.value()), lambda e: read_entry(e, light=True))
            assert not isinstance(read, str), read
            with self.lock:
                if read.extraction is not None:
                    event = read.extraction.event
                    self.held[(event.tenant, event.event_id)] = event.text
                if read.purge is not None:
                    for event_id in read.purge.event_ids:
                        self.held.pop((read.purge.tenant, event_id), None)

    def purge_check(self, target: PurgeTarget) -> StoreCheck:
        def gone() -> bool:
            with self.lock:
                return not any((target.tenant, i) in self.held for i in target.scope.event_ids)

        return gone


STORE = MemoryStore()
MEMORY = Sink(
    "memory", "memory-sink", "memstream_memory_sink.main",
    groups=(Group(GROUP, (LEDGER,)),), purge_check=STORE.purge_check,
)  # fmt: skip
TABLE = (*SINKS, MEMORY)


@pytest.fixture(scope="module")
def running(broker: str) -> Iterator[threading.Event]:
    """The sink's worker: one loop of its group over the ledger, as every worker builds it."""
    settings = Settings()
    ensure_topics(broker, settings)
    loop = worker_loop(broker, settings, GROUP, (LEDGER,), MEMORY.component, STORE.process)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    yield loop.stop_event
    loop.stop_event.set()
    thread.join(30)


def ledgered(broker: str, docs: list[dict[str, object]]) -> None:
    producer = make_producer(broker)
    prev = GENESIS_HASH
    for seq, doc in enumerate(docs, start=1):
        kafka = {"topic": "memory.events.raw", "partition": 0, "offset": seq}
        entry, value = build_entry(dict(doc), seq, prev, "2031-02-01T10:00:00Z", kafka)
        prev = entry["hash"]
        producer.produce(LEDGER, value, key=f"{doc['tenant']}/{doc['stream']}")
    assert producer.flush(30) == 0


def event(tenant: str, event_id: str, text: str) -> dict[str, object]:
    return {"id": event_id, "tenant": tenant, "stream": "s", "agent": "Noor",
            "type": "message.user", "occurred_at": "2031-02-01T09:00:00Z",
            "payload": {"text": text}}  # fmt: skip


def test_the_supervisor_plans_the_new_sinks_worker() -> None:
    planned = plan_workers(Settings(replicas=2), TABLE)
    assert ("memory-sink", "memory-sink", MEMORY.module) in planned
    assert ("memory-sink-2", "memory-sink", MEMORY.module) in planned
    assert all(role != "memory-sink" for _, role, _ in plan_workers(Settings()))  # not in SINKS


def test_status_reports_the_new_sinks_group_and_its_lag(
    broker: str, running: threading.Event
) -> None:
    tenant = f"sink-{uuid.uuid4().hex[:6]}"
    ledgered(broker, [event(tenant, f"e{i}", f"note {i}") for i in range(5)])
    wait_until(lambda: sum(k[0] == tenant for k in STORE.held) == 5, 60, "the events held")

    def caught_up() -> bool:
        lag = collect_status(Endpoints(broker, None, None), sinks=TABLE)["lag"].get(GROUP)
        return lag is not None and lag.get("total") == 0

    wait_until(caught_up, 60, "the sink's group reported with no lag")
    doc = collect_status(Endpoints(broker, None, None), sinks=TABLE)
    assert doc["lag"][GROUP]["topic"] == LEDGER and GROUP in doc["consumer_groups"]
    assert GROUP not in collect_status(Endpoints(broker, None, None))["lag"]


def test_a_purges_watch_checks_the_new_sink_until_the_tombstone_reached_it(
    broker: str, running: threading.Event, tmp_path: Path
) -> None:
    from memstream.forget.watch import converged, store_checks

    tenant = f"sink-{uuid.uuid4().hex[:6]}"
    ledgered(broker, [event(tenant, "her-1", "Ines kept the ledger"), event(tenant, "his-1", "x")])
    wait_until(lambda: (tenant, "her-1") in STORE.held, 60, "her event held")
    stores = LiveStores(
        FileProjectionRegistry(tmp_path / "none.json"), lambda i: None, lambda i: None
    )  # type: ignore[arg-type,return-value]
    scope = PurgeScope(event_ids=["her-1"], fact_ids=[], latent_ids=[])
    checks = store_checks(stores, tmp_path / "no-archive", tenant, scope, sinks=TABLE)
    assert "memory" in checks and "memory" not in store_checks(stores, tmp_path, tenant, scope)
    assert converged({"memory": checks["memory"]}, "test") == {"memory": False}
    tombstone = {"id": "tomb-1", "tenant": tenant, "stream": "_purge", "agent": "api",
                 "type": "memory.purge", "occurred_at": "2031-02-01T11:00:00Z",
                 "payload": {"subject": "sha256:" + "d" * 64, "event_ids": ["her-1"]}}  # fmt: skip
    ledgered(broker, [tombstone])
    wait_until(lambda: checks["memory"](), 60, "the tombstone obeyed by the new sink")
    assert (tenant, "his-1") in STORE.held
