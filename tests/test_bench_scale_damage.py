"""The scale bench names the events a hand-over lost or ledgered twice, and where they lie."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any, cast

from confluent_kafka import Producer
from memstream.kafka.topics import LEDGER, RAW, ensure_topics
from memstream.position import RAW_HEADER
from memstream.settings import Settings
from memstream_bench.scale import _damage, _Run


def test_damage_names_lost_and_doubled_events_with_their_places(broker: str) -> None:
    ensure_topics(broker, Settings())
    run_id = uuid.uuid4().hex[:8]
    ok, doubled, lost = (f"{run_id}-{n}" for n in ("ok", "twice", "lost"))
    producer = Producer({"bootstrap.servers": broker})
    for i in (ok, doubled, lost):
        producer.produce(RAW, b'{"id": "%s"}' % i.encode(), partition=1)
    for i, seq in ((ok, 1), (doubled, 2), (doubled, 3)):
        producer.produce(
            LEDGER, b'{"id": "%s"}' % i.encode(), partition=1,
            headers=[("seq", str(seq).encode()), (RAW_HEADER, b"e:7")],
        )  # fmt: skip
    producer.flush(10)
    stack = SimpleNamespace(info=SimpleNamespace(kafka_bootstrap=broker))
    run = _Run(cast(Any, stack), Settings(), cast(Any, None), [ok, doubled, lost])

    damage = _damage(run, patience_s=0.0)

    assert (damage.lost, damage.twice) == (1, 1)
    ((lost_at,),) = [damage.lost_at]
    assert lost_at.startswith(f"{lost}: raw[1]@")
    ((twice_at,),) = [damage.twice_at]
    assert twice_at.startswith(f"{doubled}: ledger[1]@") and twice_at.count("ledger[1]@") == 2
    assert "seq 2 raw e:7" in twice_at and "seq 3 raw e:7" in twice_at


def test_no_damage_names_nothing(broker: str) -> None:
    ensure_topics(broker, Settings())
    stack = SimpleNamespace(info=SimpleNamespace(kafka_bootstrap=broker))
    run = _Run(cast(Any, stack), Settings(), cast(Any, None), [])
    damage = _damage(run, patience_s=0.0)
    assert (damage.lost, damage.twice, damage.lost_at, damage.twice_at) == (0, 0, [], [])
