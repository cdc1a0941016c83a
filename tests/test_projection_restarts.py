"""After the broker restarted empty, every projection loop is reset: assigned again on the
new broker, or given a new consumer; the projector (and the index it holds open) is kept."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from confluent_kafka import Message
from memstream.kafka.topics import ensure_topics
from memstream.projection.embedded import default_config
from memstream.projection.runner import ProjectionManager
from memstream.projection.versions import FileProjectionRegistry, VersionInfo, registry_path
from memstream.settings import Settings
from stackproc import wait_until


class Counting:
    """A projector that only counts what it was given."""

    dead_letters = None  # no store that could refuse a record

    def __init__(self) -> None:
        self.records = 0
        self.closed = False

    def process(self, msgs: list[Message]) -> None:
        self.records += len(msgs)

    def close(self) -> None:
        self.closed = True

    def discard(self) -> None:
        pass


def manager(broker: str, tmp_path: Path) -> ProjectionManager:
    ensure_topics(broker, Settings())
    registry = FileProjectionRegistry(registry_path(tmp_path))
    registry.register("v1", default_config())
    group = f"restarts-{uuid.uuid4().hex[:8]}"

    def group_of(_info: VersionInfo) -> str:
        return group

    return ProjectionManager(
        settings=Settings(data_dir=tmp_path),
        bootstrap=broker,
        registry=registry,
        component="vector-projector",
        factory=lambda _info: Counting(),
        group_of=group_of,
    )


def test_a_loop_assigned_again_since_the_restart_is_left_alone(broker: str, tmp_path: Path) -> None:
    m = manager(broker, tmp_path)
    m.sync()
    try:
        wait_until(lambda: "v1" in m.assigned_at, 60, "the first assignment")
        loop = m.running["v1"].loop
        m.after_broker_restart(since=m.assigned_at["v1"] - 1.0, wait_s=30)
        assert m.running["v1"].loop is loop
    finally:
        m.stop_all()


def test_a_loop_not_assigned_since_the_restart_gets_a_new_consumer_and_keeps_its_projector(
    broker: str, tmp_path: Path
) -> None:
    m = manager(broker, tmp_path)
    m.sync()
    try:
        wait_until(lambda: "v1" in m.assigned_at, 60, "the first assignment")
        before = m.running["v1"]
        since = time.time() + 3600  # a restart its consumer never saw
        m.after_broker_restart(since=since, wait_s=0.5)
        after = m.running["v1"]
        assert after.loop is not before.loop and after.projector is before.projector
        assert not before.thread.is_alive() and not after.projector.closed  # type: ignore[attr-defined]
        first = m.assigned_at["v1"]
        wait_until(lambda: m.assigned_at["v1"] > first, 60, "the new consumer's assignment")
    finally:
        m.stop_all()
