"""The tenant-fair schedule (``kafka/fair.py``) on records written here, without a broker."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import pytest
from confluent_kafka import Message
from memstream.kafka.fair import MIN_SHARE, FairQueue, tenant_of

TOPIC = "memory.ledger"


class Log:
    """A topic being written: offsets per partition, as the broker gives them."""

    def __init__(self, topic: str = TOPIC) -> None:
        self.topic = topic
        self.ends: dict[int, int] = defaultdict(int)

    def write(self, key: bytes | None, n: int = 1, partition: int = 0) -> list[Message]:
        out = []
        for _ in range(n):
            off = self.ends[partition]
            self.ends[partition] += 1
            value = b"v%d" % off
            out.append(Message(topic=self.topic, partition=partition, offset=off, key=key,
                               value=value))  # fmt: skip
        return out


def keys(msgs: Iterable[Message]) -> list[bytes | None]:
    return [m.key() for m in msgs]


def offsets(msgs: Iterable[Message]) -> list[int | None]:
    return [m.offset() for m in msgs]


def drain(q: FairQueue, limit: int) -> list[list[Message]]:
    batches = []
    while (b := q.take(limit)) != []:
        batches.append(b)
    return batches


@pytest.mark.parametrize(
    ("key", "tenant"),
    [
        (b"acme/orders", b"acme"),
        (b"acme/a/b", b"acme"),
        (b"acme", b"acme"),  # memory.latents: keyed by the tenant alone
        (b"", b""),
        (b"/stream", b""),
        (None, None),
        (b"t\x00nul/s", b"t\x00nul"),
        (b"\x01\x1f\x7f/\x00", b"\x01\x1f\x7f"),
        ("élise".encode() + b"/s", "élise".encode()),
        (b"\xff\xfe/s", b"\xff\xfe"),  # not UTF-8: never decoded
    ],
)
def test_the_tenant_is_the_key_before_the_first_slash(key: bytes | None, tenant: object) -> None:
    assert tenant_of(key) == tenant


def test_a_small_tenant_behind_a_burst_is_in_the_first_batch() -> None:
    log = Log()
    q = FairQueue()
    q.add(log.write(b"bulk/agent-1", 20_000))
    q.add(log.write(b"probe/probes"))
    first = q.take(500)
    assert b"probe/probes" in keys(first)
    assert len(first) == 500
    assert keys(first).count(b"bulk/agent-1") == 499


def test_order_within_a_tenant_and_partition_is_kept() -> None:
    log = Log()
    q = FairQueue()
    for i in range(300):  # three tenants, interleaved over two partitions, several streams
        q.add(log.write(b"t%d/s%d" % (i % 3, i % 5), partition=i % 2))
    seen: dict[tuple[int | None, bytes | None], list[int | None]] = defaultdict(list)
    taken = 0
    for batch in drain(q, 70):
        taken += len(batch)
        for m in batch:
            seen[(m.partition(), tenant_of(m.key()))].append(m.offset())
        assert [(m.partition(), m.offset()) for m in batch] == sorted(
            (m.partition(), m.offset()) for m in batch
        )
    assert taken == 300 and len(q) == 0 and q.bytes == 0
    for got in seen.values():
        assert got == sorted(got)


def test_turns_interleave_tenants_with_equal_shares() -> None:
    log = Log()
    q = FairQueue()
    q.add(log.write(b"a/s", 1000))
    q.add(log.write(b"b/s", 1000))
    q.add(log.write(b"c/s", 1000, partition=1))
    batch = q.take(300)
    counts = {t: sum(1 for m in batch if tenant_of(m.key()) == t) for t in (b"a", b"b", b"c")}
    assert counts == {b"a": 100, b"b": 100, b"c": 100}


def test_every_tenant_takes_at_least_the_minimum_share() -> None:
    log = Log()
    q = FairQueue()
    for i in range(40):
        q.add(log.write(b"t%02d/s" % i, 200))
    batch = q.take(500)  # 500 // 40 = 12, below the minimum: 10 tenants take 50 each
    per = defaultdict(int)
    for m in batch:
        per[tenant_of(m.key())] += 1
    assert len(batch) == 500
    assert set(per.values()) == {MIN_SHARE} and len(per) == 500 // MIN_SHARE
    # the tenants not served yet go first next time
    nxt = {tenant_of(m.key()) for m in q.take(500)}
    assert not nxt & set(per)


def test_a_share_cut_by_a_full_batch_is_finished_first() -> None:
    log = Log()
    q = FairQueue()
    q.add(log.write(b"a/s", 100))
    q.add(log.write(b"b/s", 100))
    first = q.take(130)  # a takes 65, b 65 of its 65
    assert keys(first).count(b"a/s") == 65 and keys(first).count(b"b/s") == 65
    q2 = FairQueue()
    q2.add(log.write(b"c/s", 300))
    q2.add(log.write(b"d/s", 300))
    assert keys(q2.take(100)).count(b"c/s") == 50  # shares of 50
    # a limit of 30 cuts c's share at 30: the next batch gives c its last 20 first
    q3 = FairQueue(min_share=50)
    q3.add(log.write(b"e/s", 300))
    q3.add(log.write(b"f/s", 300))
    assert keys(q3.take(30)) == [b"e/s"] * 30
    nxt = q3.take(30)
    assert keys(nxt) == [b"e/s"] * 20 + [b"f/s"] * 10


def test_a_lone_tenant_takes_the_whole_limit() -> None:
    log = Log()
    q = FairQueue()
    q.add(log.write(b"solo/s1", 3000))
    q.add(log.write(b"solo/s2", 3000, partition=1))
    batch = q.take(2000)
    assert len(batch) == 2000 and q.tenants == 1
    assert {m.partition() for m in batch} == {0, 1}  # its partitions share the batch


def test_low_marks_with_records_still_queued() -> None:
    log = Log()
    q = FairQueue()
    q.add(log.write(b"bulk/s", 1000))  # partition 0: offsets 0..999
    q.add(log.write(b"probe/s"))  # offset 1000
    q.add(log.write(b"bulk/s", 10, partition=1))
    assert q.low_marks() == {(TOPIC, 0): 0, (TOPIC, 1): 0}
    batch = q.take(500)
    assert 1000 in offsets(batch)
    # bulk took 250 (its 10 of partition 1, 240 of partition 0), probe 1, bulk the rest
    # (249): from offset 489 on, partition 0 is still queued; partition 1 is done
    assert len(batch) == 500
    assert q.low_marks() == {(TOPIC, 0): 489, (TOPIC, 1): 10}
    drain(q, 500)
    assert q.low_marks() == {(TOPIC, 0): 1001, (TOPIC, 1): 10}


def test_the_low_mark_is_the_smallest_queued_offset_of_any_tenant() -> None:
    log = Log()
    q = FairQueue()
    q.add(log.write(b"a/s", 5))  # 0..4
    q.add(log.write(b"b/s", 5))  # 5..9
    q.add(log.write(b"a/s", 5))  # 10..14
    assert offsets(q.take(2)) == [0, 1]
    assert q.low_marks() == {(TOPIC, 0): 2}
    while len(q) > 3:
        q.take(1)
    left = sorted(m.offset() or 0 for queues in q._queues.values() for d in queues.values()
                  for m in d)  # fmt: skip
    assert q.low_marks() == {(TOPIC, 0): left[0]}


def test_keyless_empty_and_hostile_keys_have_queues_of_their_own() -> None:
    log = Log()
    q = FairQueue()
    q.add(log.write(None, 3))
    q.add(log.write(b"", 3))
    q.add(log.write(b"/orphan", 3))
    q.add(log.write(b"t\x00/s", 3))
    q.add(log.write(b"t/s\x00\x01", 3))
    q.add(log.write(b"t", 3))  # the tenant's latents-style key joins its turn
    assert q.tenants == 4  # None; b"" (with "/orphan"); b"t\x00"; b"t"
    got = drain(q, 2000)
    assert len(got) == 1
    assert sorted(offsets(got[0])) == list(range(18))
    assert q.low_marks() == {(TOPIC, 0): 18}


def test_topics_are_queued_apart_and_marked_apart() -> None:
    ledger, latents = Log(), Log("memory.latents")
    q = FairQueue()
    q.add(ledger.write(b"a/s", 100))
    q.add(latents.write(b"a", 100))
    q.add(ledger.write(b"b/s", 1))
    batch = q.take(60)
    assert b"b/s" in keys(batch)
    marks = q.low_marks()
    assert set(marks) == {(TOPIC, 0), ("memory.latents", 0)}
    assert marks[(TOPIC, 0)] < 100 and marks[("memory.latents", 0)] < 100


def test_dropping_partitions_forgets_their_records_and_marks() -> None:
    log = Log()
    q = FairQueue()
    q.add(log.write(b"a/s", 10))
    q.add(log.write(b"b/s", 10, partition=1))
    q.add(log.write(b"a/s", 10, partition=1))
    size = q.bytes
    q.drop([(TOPIC, 1)])
    assert q.tenants == 1 and len(q) == 10
    assert q.low_marks() == {(TOPIC, 0): 0}
    assert 0 < q.bytes < size
    q.drop([(TOPIC, 0)])
    assert q.take(100) == [] and q.bytes == 0 and q.low_marks() == {}


def test_bytes_count_keys_and_values() -> None:
    q = FairQueue()
    q.add([Message(topic=TOPIC, partition=0, offset=0, key=b"ab/c", value=b"12345")])
    q.add([Message(topic=TOPIC, partition=0, offset=1, key=None, value=None)])
    assert q.bytes == 9
    q.take(10)
    assert q.bytes == 0


def test_a_record_without_a_position_is_refused() -> None:
    with pytest.raises(ValueError, match="without a topic"):
        FairQueue().add([Message(key=b"a/s", value=b"x")])
