"""The tenant-fair consumer loop (``BatchLoop(fair=True)``) on the real broker: a small
tenant's record is not processed behind another tenant's burst, the committed offset is the
low-water mark, and a restart replays from it without losing or (for the sequencer)
duplicating anything."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from memstream.kafka.clients import consumer_config, make_consumer, make_producer
from memstream.kafka.fair import tenant_of
from memstream.kafka.loop import BatchLoop
from memstream.kafka.topics import LEDGER, ensure_topics
from memstream.ledger.verify import verify_entries
from memstream.settings import Settings
from proving import proved, sequencer
from topicread import read_topic

DEADLINE_S = 120


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


def new_topic(bootstrap: str) -> str:
    topic = f"fair-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    return topic


def write(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    """``records`` (key, value) on partition 0, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for key, value in records:
        producer.produce(topic, value, key=key, partition=0, headers=proved(value))
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        (tp,) = c.committed([TopicPartition(topic, 0)], timeout=10)
        return int(tp.offset)
    finally:
        c.close()


class FetchedAll(Consumer):  # type: ignore[misc]
    """A real consumer whose first ``consume`` returns once ``until`` records arrived: the
    client's fetch had the whole partition before the first batch (as under a burst)."""

    def __init__(self, conf: dict[str, Any], until: int) -> None:
        super().__init__(conf)
        self.until = until
        self.first = True

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        if not self.first:
            return list(super().consume(num_messages, timeout))
        self.first = False
        got: list[Message] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < self.until:
            assert time.monotonic() < deadline, f"only {len(got)} records fetched"
            got += [m for m in super().consume(num_messages, 0.5) if m.error() is None]
        return got


def run(loop: BatchLoop, done: Callable[[], bool]) -> None:
    thread = threading.Thread(target=loop.run)
    thread.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not done():
            assert thread.is_alive(), "the loop died"
            assert time.monotonic() < deadline, "the loop did not finish in time"
            time.sleep(0.05)
    finally:
        loop.stop_event.set()
        thread.join(60)
    assert not thread.is_alive()


def fair_loop(
    consumer: Consumer,
    topic: str,
    group: str,
    process: Callable[[list[Message]], None],
    **hooks: Any,
) -> BatchLoop:
    """The fair loop these tests run: batches of up to 2000, 500 while tenants share."""
    return BatchLoop(
        consumer=consumer,
        topic=topic,
        group=group,
        component="fair-test",
        process=process,
        fair=True,
        batch_size=2000,
        fair_batch=500,
        **hooks,
    )


def test_small_tenant_not_behind_bulk(topics: str) -> None:
    topic = new_topic(topics)
    bulk = [(b"bulk/agent-%d" % (i % 7), b"bulk %d" % i) for i in range(20_000)]
    write(topics, topic, [*bulk, (b"small/probes", b"probe")])
    group = f"fair-{uuid.uuid4().hex[:8]}"
    batches: list[list[tuple[bytes | None, int]]] = []
    marks: list[int | None] = []  # what was committed when each batch began

    def process(msgs: list[Message]) -> None:
        marks.append(loop.committed.get((topic, 0)))
        batches.append([(m.key(), m.offset() or 0) for m in msgs])

    consumer = FetchedAll(consumer_config(topics, group, Settings()), until=20_001)
    loop = fair_loop(consumer, topic, group, process)
    run(loop, lambda: sum(map(len, batches)) >= 20_001)
    first_two = [k for b in batches[:2] for k, _ in b]
    assert b"small/probes" in first_two
    assert len(batches[0]) == 500  # two tenants queued: the fair batch
    # the probe (offset 20000) was done while bulk's records from 499 on were queued: the
    # commit after the first batch is the low mark, not past the probe
    assert marks[:2] == [None, 499]
    # every record once; bulk's in its order
    done = [o for b in batches for _, o in b]
    assert sorted(done) == list(range(20_001))
    bulk_order = [o for b in batches for k, o in b if tenant_of(k) == b"bulk"]
    assert bulk_order == list(range(20_000))
    # a lone tenant left: the normal batch size again
    assert max(len(b) for b in batches[2:]) == 2000
    assert committed(topics, group, topic) == 20_001


def test_restart_replays_from_low_mark_idempotently(topics: str) -> None:
    topic = new_topic(topics)
    records = [(b"bulk/s", b"b%d" % i) for i in range(5000)]
    records += [(b"small/s%d" % (i % 2), b"s%d" % i) for i in range(300)]
    write(topics, topic, records)
    group = f"fair-{uuid.uuid4().hex[:8]}"
    store: dict[int, bytes] = {}  # an idempotent upsert by offset
    runs: list[list[int]] = [[], []]

    def loop_for(n: int, stop_after: int | None) -> BatchLoop:
        def process(msgs: list[Message]) -> None:
            for m in msgs:
                store[m.offset() or 0] = m.value() or b""
                runs[n].append(m.offset() or 0)
            if stop_after is not None and len(runs[n]) >= stop_after:
                loop.stop_event.set()  # the batch still commits: a clean stop

        loop = fair_loop(make_consumer(topics, group, Settings()), topic, group, process)
        return loop

    first = loop_for(0, stop_after=1000)
    run(first, first.stop_event.is_set)
    mark = committed(topics, group, topic)
    done_first = set(runs[0])
    # the mark: everything below it was processed, it was not, and records above it were
    assert 0 < mark < 5000 and set(range(mark)) <= done_first and mark not in done_first
    assert any(o >= 5000 for o in done_first), "the small tenant went first"

    second = loop_for(1, stop_after=None)
    run(second, lambda: len(store) == 5300 and committed(topics, group, topic) == 5300)
    assert min(runs[1]) == mark  # read again from the low mark
    replayed = done_first & set(runs[1])
    assert replayed and min(replayed) > mark  # what was done above the mark came again
    assert store == {i: v for i, (_k, v) in enumerate(records)}  # nothing lost


def raw_event(tenant: str, stream: str, i: int) -> tuple[bytes, bytes]:
    doc = {
        "id": f"{tenant}-{stream}-{i}",
        "tenant": tenant,
        "stream": stream,
        "agent": "Zoë",
        "type": "message.user",
        "occurred_at": "2025-09-01T10:00:00Z",
        "payload": {"text": f"réunion n°{i} moved to Tuesday"},
    }
    return f"{tenant}/{stream}".encode(), orjson.dumps(doc)


def test_the_sequencer_replays_a_tenant_once_after_a_restart(topics: str) -> None:
    """A fair sequencer stopped with the bulk tenant's queue unfinished: started again, it
    re-reads from the low mark, drops what it sequenced, and every stream's chain holds."""
    topic = new_topic(topics)  # raw records of this test only; ledgered on LEDGER[0]
    bulk, small = f"bulk{uuid.uuid4().hex[:6]}", f"small{uuid.uuid4().hex[:6]}"
    records = [raw_event(bulk, f"s{i % 3}", i) for i in range(2500)]
    records += [raw_event(small, "probes", i) for i in range(40)]
    write(topics, topic, records)
    group = f"fair-seq-{uuid.uuid4().hex[:8]}"
    counts = [0, 0]

    def loop_for(n: int, stop_after: int | None) -> BatchLoop:
        seq = sequencer(topics, make_producer(topics, **{"delivery.report.only.error": True}))

        def process(msgs: list[Message]) -> None:
            seq.process(msgs)
            counts[n] += len(msgs)
            if stop_after is not None and counts[n] >= stop_after:
                loop.stop_event.set()

        consumer = make_consumer(topics, group, Settings())
        hooks = {"on_assign": seq.rebuild, "on_revoke": seq.forget}
        loop = fair_loop(consumer, topic, group, process, **hooks)
        return loop

    first = loop_for(0, stop_after=900)
    run(first, first.stop_event.is_set)
    mark = committed(topics, group, topic)
    assert 0 < mark < 2500
    second = loop_for(1, stop_after=None)
    run(second, lambda: committed(topics, group, topic) == len(records))
    assert counts[1] == len(records) - mark  # everything from the mark was read again

    entries = [
        orjson.loads(m.value() or b"{}")
        for m in sorted(read_topic(topics, LEDGER), key=lambda m: (m.partition(), m.offset()))
        if (m.key() or b"").split(b"/")[0] in (bulk.encode(), small.encode())
    ]
    ids = [e["id"] for e in entries]
    assert sorted(ids) == sorted(orjson.loads(v)["id"] for _, v in records)  # each once
    for tenant, stream, n in ((bulk, "s0", 834), (bulk, "s1", 833), (bulk, "s2", 833),
                              (small, "probes", 40)):  # fmt: skip
        chain = [e for e in entries if e["tenant"] == tenant and e["stream"] == stream]
        assert [e["seq"] for e in chain] == list(range(1, n + 1))
        sent = [int(e["id"].rsplit("-", 1)[1]) for e in chain]
        assert sent == sorted(sent)  # the stream's order in the raw log is its seq order
        assert verify_entries((e, f"{tenant}/{stream}#{e['seq']}") for e in chain) is None
