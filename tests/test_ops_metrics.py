"""Metric label rules and the dependency probes behind ``memstream_dependency_up``."""

from __future__ import annotations

import time
from typing import Any, cast

import pytest
from confluent_kafka import TopicPartition
from memstream.checkout.metrics import ANSWERABILITY, CHECKOUT_SECONDS
from memstream.kafka.loop import BatchLoop
from memstream.metrics import CONSUMER_LAG, OTHER_TENANTS, TenantLabels
from memstream.ops.health import (
    DependencyProbe,
    dependency_checks,
    falkordb_check,
    graph_check,
    kafka_check,
    probe,
)
from memstream.settings import Settings
from memstream.stack.net import free_port
from memstream.stack.servers import Server
from prometheus_client import REGISTRY


def dep_up(component: str, dependency: str) -> float | None:
    return REGISTRY.get_sample_value(
        "memstream_dependency_up", {"component": component, "dependency": dependency}
    )


def test_tenant_labels_are_bounded() -> None:
    label = TenantLabels(limit=2)
    assert [label(t) for t in ("a", "b", "c", "a", "d", "b")] == [
        "a",
        "b",
        OTHER_TENANTS,
        "a",
        OTHER_TENANTS,
        "b",
    ]
    many = TenantLabels(limit=100)
    assert len({many(f"t{i}") for i in range(10_000)}) == 101


def test_checkout_series_carry_the_component_and_start_at_zero() -> None:
    for value in ("answer_from_memory", "refresh_recommended", "ask_user", "no_memory"):
        labels = {"component": "checkout", "answerability": value}
        assert REGISTRY.get_sample_value("memstream_checkout_answerability_total", labels) == 0
    before = REGISTRY.get_sample_value(
        "memstream_checkout_seconds_count", {"component": "checkout"}
    )
    CHECKOUT_SECONDS.observe(0.01)
    ANSWERABILITY.labels("ask_user").inc()
    after = REGISTRY.get_sample_value("memstream_checkout_seconds_count", {"component": "checkout"})
    assert after == (before or 0) + 1


def test_probe_publishes_each_result_and_an_error_is_down() -> None:
    def boom() -> bool:
        raise ConnectionError("refused")

    result = probe("unit", {"ok": lambda: True, "no": lambda: False, "boom": boom})
    assert result == {"ok": True, "no": False, "boom": False}
    assert (dep_up("unit", "ok"), dep_up("unit", "no"), dep_up("unit", "boom")) == (1, 0, 0)


def test_graph_and_kafka_checks_against_real_and_absent_servers(falkordb_server: Server) -> None:
    closed = free_port()
    checks = {
        "graph": falkordb_check(
            f"redis://127.0.0.1:{falkordb_server.port}", password=falkordb_server.password
        ),
        "graph-gone": falkordb_check(f"redis://127.0.0.1:{closed}", timeout=0.5),
        "kafka-gone": kafka_check(f"127.0.0.1:{closed}", timeout=0.5),
    }
    assert probe("unit-real", checks) == {"graph": True, "graph-gone": False, "kafka-gone": False}


def test_graph_check_follows_the_graph_factory_choice() -> None:
    assert graph_check(Settings(neo4j_uri=None, falkordb_url=None)) is None
    neo = graph_check(Settings(neo4j_uri=f"bolt://127.0.0.1:{free_port()}"), timeout=0.5)
    assert neo is not None
    assert probe("unit-neo4j", {"graph": neo}) == {"graph": False}
    checks = dependency_checks(Settings(falkordb_url="redis://127.0.0.1:1"), "127.0.0.1:1")
    assert set(checks) == {"kafka", "graph"}


def test_dependency_probe_thread_runs_until_stopped() -> None:
    calls: list[int] = []

    def check() -> bool:
        calls.append(1)
        return True

    p = DependencyProbe("unit-thread", {"x": check}, every=0.01).start()
    try:
        deadline = time.monotonic() + 30
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(calls) >= 3, f"the probe ran {len(calls)} checks in 30 s"
    finally:
        p.stop()
    stopped_at = len(calls)
    time.sleep(0.05)  # five periods: a probe still running would check again
    assert len(calls) == stopped_at
    assert not p.thread.is_alive() and dep_up("unit-thread", "x") == 1


@pytest.mark.parametrize("how", ["revoke", "close"])
def test_lag_series_leave_with_their_partitions(how: str) -> None:
    class Closing:
        def close(self) -> None: ...

        def subscribe(self, *_a: Any, **_k: Any) -> None: ...

    loop = BatchLoop(
        consumer=cast(Any, Closing()), topic="t", group=f"g-{how}", component="unit", process=print
    )
    for p in (0, 1):
        CONSUMER_LAG.labels("unit", loop.group, "t", str(p)).set(5)
    loop.assigned = [("t", 0), ("t", 1)]
    labels = {"component": "unit", "group": loop.group, "topic": "t"}
    if how == "revoke":
        loop._revoked(cast(Any, None), [TopicPartition("t", 0)])
        assert (
            REGISTRY.get_sample_value("memstream_consumer_lag", labels | {"partition": "0"}) is None
        )
        assert REGISTRY.get_sample_value("memstream_consumer_lag", labels | {"partition": "1"}) == 5
    else:
        loop.stop_event.set()
        loop.run()
        for p in ("0", "1"):
            assert (
                REGISTRY.get_sample_value("memstream_consumer_lag", labels | {"partition": p})
                is None
            )
