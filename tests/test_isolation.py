"""The consumer shell's isolation of records a store refuses, on records written here.

A fake store decides what it refuses; the messages are real ``confluent_kafka.Message``
objects and the dead letters go to a real broker, where the test reads them back.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from confluent_kafka import Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from memstream.kafka.clients import make_consumer, make_producer
from memstream.kafka.dlq import DeadLetterWriter
from memstream.kafka.loop import Backoff, BatchLoop, IsolationFailed, StopRequested
from memstream.kafka.topics import DLQ, ensure_topics
from memstream.metrics import CONSUMER_RETRIES, CONSUMER_WAITING
from memstream.settings import Settings
from memstream.store_errors import StoreRefused, StoreUnavailable
from topicread import read_topic

FAST = Backoff(first_s=0.01, max_s=0.02)


class Refused(StoreRefused):
    store = "fake"


class Down(StoreUnavailable):
    store = "fake"


class FakeStore:
    """Refuses a write holding a record whose value starts with ``poison``; keeps the rest
    (an idempotent upsert by offset). ``down`` writes fail as unavailable first."""

    def __init__(self, down: int = 0, in_data: bool = False) -> None:
        self.rows: dict[int, bytes] = {}
        self.calls: list[int] = []  # batch sizes, in order
        self.down = down
        self.in_data = in_data  # the store points at the value it cannot hold

    def write(self, msgs: list[Message]) -> None:
        self.calls.append(len(msgs))
        if self.down > 0:
            self.down -= 1
            raise Down("connection refused")
        bad = [m.offset() for m in msgs if (m.value() or b"").startswith(b"poison")]
        if bad:
            raise Refused(f"cannot hold the value at offset {bad[0]}", in_data=self.in_data)
        self.rows.update({m.offset() or 0: m.value() or b"" for m in msgs})


def batch(n: int, poison: set[int], topic: str) -> list[Message]:
    return [
        Message(
            topic=topic,
            partition=0,
            offset=i,
            key=b"t1/s1",
            value=(b"poison %d" if i in poison else b"record %d") % i,
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


@pytest.fixture
def source() -> str:
    """A topic name of this test's own: its dead letters are told apart by source."""
    return f"iso-{uuid.uuid4().hex[:8]}"


def dead_letters(bootstrap: str, topic: str) -> dict[int, dict[str, Any]]:
    out = {}
    for m in read_topic(bootstrap, DLQ):
        doc = orjson.loads(m.value() or b"{}")
        if doc["source"]["topic"] == topic:
            assert doc["source"]["offset"] not in out, "dead-lettered twice"
            out[doc["source"]["offset"]] = doc
    return out


@pytest.fixture
def make_loop(topics: str) -> Iterator[Callable[..., BatchLoop]]:
    made: list[BatchLoop] = []

    def make(process: Callable[[list[Message]], None], isolate: bool = True) -> BatchLoop:
        writer = DeadLetterWriter(make_producer(topics), "fake-projector", "src")
        loop = BatchLoop(
            consumer=make_consumer(topics, f"iso-{uuid.uuid4().hex[:8]}", Settings()),
            topic="src",
            group="iso-group",
            component="fake-projector",
            process=process,
            dead_letters=writer if isolate else None,
            backoff=FAST,
        )
        made.append(loop)
        return loop

    yield make
    for loop in made:
        loop.consumer.close()


def test_one_poison_in_the_middle_of_a_hundred(
    topics: str, source: str, make_loop: Callable[..., BatchLoop]
) -> None:
    store = FakeStore()
    loop = make_loop(store.write)
    assert loop.handle(batch(100, {50}, source)) is None
    assert sorted(store.rows) == [i for i in range(100) if i != 50]
    dead = dead_letters(topics, source)
    assert list(dead) == [50]
    doc = dead[50]
    assert doc["reason"] == (
        "fake-projector (iso-group): fake refused: cannot hold the value at offset 50"
    )
    assert doc["source"] == {"topic": source, "partition": 0, "offset": 50}
    assert doc["component"] == "fake-projector"
    # bisection, not one write per record: 100 -> ... -> 1 takes a few dozen writes
    assert len(store.calls) < 30, store.calls


def test_several_poisons_anywhere(
    topics: str, source: str, make_loop: Callable[..., BatchLoop]
) -> None:
    poison = {0, 37, 38, 64, 99}
    store = FakeStore()
    loop = make_loop(store.write)
    loop.handle(batch(100, poison, source))
    assert set(store.rows) == set(range(100)) - poison
    assert sorted(dead_letters(topics, source)) == sorted(poison)


def test_a_batch_refused_record_by_record_is_our_fault_and_raises(
    topics: str, source: str, make_loop: Callable[..., BatchLoop]
) -> None:
    def refuse_everything(msgs: list[Message]) -> None:
        raise Refused("Unknown function 'nosuchfunc'")  # what a typo in our query looks like

    loop = make_loop(refuse_everything)
    with pytest.raises(IsolationFailed, match="each of the 8 records"):
        loop.handle(batch(8, set(), source))
    assert dead_letters(topics, source) == {}


def test_a_batch_of_poisons_only_is_dead_lettered_when_the_store_points_at_each(
    topics: str, source: str, make_loop: Callable[..., BatchLoop]
) -> None:
    """A hostile client's NUL bytes, all in one batch: the adapter found each value itself."""
    store = FakeStore(in_data=True)
    loop = make_loop(store.write)
    loop.handle(batch(5, set(range(5)), source))
    assert store.rows == {}
    assert sorted(dead_letters(topics, source)) == list(range(5))


def test_a_batch_of_poisons_only_that_the_server_refuses_raises(
    topics: str, source: str, make_loop: Callable[..., BatchLoop]
) -> None:
    """Without the store pointing at the data, every record refused is our query's fault."""
    loop = make_loop(FakeStore().write)
    with pytest.raises(IsolationFailed):
        loop.handle(batch(5, set(range(5)), source))
    assert dead_letters(topics, source) == {}


def test_a_batch_of_poisons_only_is_dead_lettered_when_it_is_one_record(
    topics: str, source: str, make_loop: Callable[..., BatchLoop]
) -> None:
    """The residual ambiguity: one record refused alone cannot be told from our query
    refused with any data; it is dead-lettered (the README says so)."""
    store = FakeStore()
    loop = make_loop(store.write)
    loop.handle(batch(1, {0}, source))
    assert list(dead_letters(topics, source)) == [0]


def test_an_unavailable_store_is_retried_never_dead_lettered(
    topics: str, source: str, make_loop: Callable[..., BatchLoop]
) -> None:
    store = FakeStore(down=3)
    loop = make_loop(store.write)
    retries = CONSUMER_RETRIES.labels("fake-projector", "iso-group")
    before = retries._value.get()
    loop.handle(batch(10, set(), source))
    assert store.calls == [10, 10, 10, 10]  # the same batch, whole, until the store is back
    assert sorted(store.rows) == list(range(10))
    assert retries._value.get() - before == 3
    assert CONSUMER_WAITING.labels("fake-projector", "iso-group")._value.get() == 0
    assert dead_letters(topics, source) == {}


def test_a_store_down_while_isolating_is_waited_for(
    topics: str, source: str, make_loop: Callable[..., BatchLoop]
) -> None:
    store = FakeStore()
    calls = 0

    def flaky(msgs: list[Message]) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:  # in the middle of the split
            raise Down("restarting")
        store.write(msgs)

    loop = make_loop(flaky)
    loop.handle(batch(20, {13}, source))
    assert sorted(store.rows) == [i for i in range(20) if i != 13]
    assert list(dead_letters(topics, source)) == [13]


@pytest.mark.parametrize("bug", [KeyError("typo"), RuntimeError("our bug"), TypeError("x")])
def test_a_bug_raises_and_nothing_is_dead_lettered(
    topics: str, source: str, make_loop: Callable[..., BatchLoop], bug: Exception
) -> None:
    def broken(msgs: list[Message]) -> None:
        raise bug

    loop = make_loop(broken)
    with pytest.raises(type(bug)):
        loop.handle(batch(10, {3}, source))
    assert dead_letters(topics, source) == {}


def test_without_dead_letters_a_refusal_raises(
    source: str, make_loop: Callable[..., BatchLoop]
) -> None:
    store = FakeStore()
    loop = make_loop(store.write, isolate=False)
    with pytest.raises(Refused):
        loop.handle(batch(10, {3}, source))
    assert store.rows == {}


def test_a_stop_while_waiting_for_a_store_leaves_without_committing(topics: str) -> None:
    """The loop on a real topic: the store never comes back, the loop is asked to stop."""
    topic = f"iso-run-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": topics})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": topics})
    for i in range(3):
        producer.produce(topic, b"record %d" % i, key=b"t1/s1")
    assert producer.flush(10) == 0
    group = f"iso-run-{uuid.uuid4().hex[:8]}"
    store = FakeStore(down=10**9)
    loop = BatchLoop(
        consumer=make_consumer(topics, group, Settings()),
        topic=topic,
        group=group,
        component="fake-projector",
        process=store.write,
        backoff=FAST,
    )
    seen = threading.Event()

    def process(msgs: list[Message]) -> None:
        seen.set()
        store.write(msgs)

    loop.process = process
    runner = threading.Thread(target=loop.run)
    runner.start()
    assert seen.wait(60), "the loop never got its records"
    loop.stop_event.set()
    runner.join(30)
    assert not runner.is_alive()
    check = make_consumer(topics, group, Settings())
    try:
        [committed] = check.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed.offset < 0
    finally:
        check.close()
    assert store.rows == {}


def test_stop_requested_is_what_handle_raises_when_stopped(
    source: str, make_loop: Callable[..., BatchLoop]
) -> None:
    store = FakeStore(down=10**9)
    loop = make_loop(store.write)
    loop.stop_event.set()
    with pytest.raises(StopRequested):
        loop.handle(batch(2, set(), source))
