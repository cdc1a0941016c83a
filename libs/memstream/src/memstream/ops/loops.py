"""A consumer loop's health, judged from the metrics it serves (``memstream status``).

Status judges the present: what answers now, and whether its current run is settled. The
alerts in ``deploy/prometheus/memstream-rules.yml`` keep the history (restarts over 15
minutes); one scrape holds a counter, not its history, so here:

- **restarting in a loop**: a loop (or a supervised process) restarted at least
  ``RESTART_LOOP`` times and its current run began less than ``SETTLED_S`` ago. The
  supervisor and the projection runner restart within 30 s, so a crash loop never lets a run
  grow that old; a component that came back and has run ``SETTLED_S`` is healthy again, its
  restarts still counted in the answer.
- **stalled**: records are waiting (lag > 0) and the loop has committed nothing for
  ``STALL_S`` seconds (counted from its start before its first commit).

A loop that waits for an unavailable store is healthy until it stalls, and says it waits.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.samples import Sample

from memstream.metrics import scrape

RESTART_LOOP = 3
SETTLED_S = 30.0
STALL_S = 120.0

RUNNING = "memstream_consumer_running"
STARTED = "memstream_consumer_started_timestamp_seconds"
RESTARTS = "memstream_consumer_restarts_total"
LAST_COMMIT = "memstream_consumer_last_commit_timestamp_seconds"
WAITING = "memstream_consumer_waiting"
LAG = "memstream_consumer_lag"
CHILD_RESTARTS = "memstream_child_restarts_total"
LOOP_SERIES = (RUNNING, STARTED, RESTARTS, LAST_COMMIT, WAITING, LAG)
UNDELIVERABLE = "memstream_outbox_undeliverable"
OLDEST_AGE = "memstream_outbox_oldest_age_seconds"
OUTBOX_SERIES = (UNDELIVERABLE, OLDEST_AGE)
MEMBER = "memstream_consumer_member"
ASSIGNED = "memstream_consumer_assigned_partitions"
MEMBER_SERIES = (MEMBER, ASSIGNED)


@dataclass
class Loop:
    """One consumer loop (component, group) as one scrape shows it."""

    component: str
    group: str
    running: bool = True
    started: float | None = None
    restarts: int = 0
    last_commit: float | None = None
    waiting: bool = False
    lag: int = 0

    def problems(self, now: float) -> list[str]:
        """Why the loop is unhealthy (empty: it is healthy)."""
        out: list[str] = []
        if not self.running:
            out.append(f"consumer {self.group} is not running (stopped on an error)")
        elif (reason := restarting(self.restarts, self.started, now)) is not None:
            out.append(f"consumer {self.group} {reason}")
        if self.lag > 0 and self.last_commit is not None and now - self.last_commit > STALL_S:
            why = " (waiting for an unavailable store)" if self.waiting else ""
            out.append(
                f"consumer {self.group} has committed nothing for {now - self.last_commit:.0f}s "
                f"with {self.lag} records waiting{why}"
            )
        return out

    def summary(self, now: float) -> dict[str, object]:
        since = None if self.last_commit is None else round(now - self.last_commit, 1)
        return {
            "component": self.component,
            "running": self.running,
            "waiting": self.waiting,
            "lag": self.lag,
            "since_commit_s": since,
            "restarts": self.restarts,
        }


def restarting(restarts: int, started: float | None, now: float) -> str | None:
    """The reason a loop or a process counts as restarting in a loop, or None."""
    if restarts < RESTART_LOOP or started is None or now - started >= SETTLED_S:
        return None
    age = now - started
    return f"is restarting in a loop: {restarts} restarts, the current run began {age:.0f}s ago"


def loops_of(samples: Iterable[Sample]) -> dict[str, Loop]:
    """The loops the samples describe, by consumer group."""
    loops: dict[str, Loop] = {}
    for s in samples:
        group, component = s.labels.get("group"), s.labels.get("component")
        if group is None or component is None:
            continue
        loop = loops.setdefault(group, Loop(component, group))
        if s.name == RUNNING:
            loop.running = s.value >= 1
        elif s.name == STARTED:
            loop.started = s.value
        elif s.name == RESTARTS:
            loop.restarts = int(s.value)
        elif s.name == LAST_COMMIT:
            loop.last_commit = s.value
        elif s.name == WAITING:
            loop.waiting = s.value >= 1
        elif s.name == LAG:
            loop.lag += int(s.value)
    # Only a loop that reports itself is judged: lag alone is another process's (a rebalance).
    return {g: loop for g, loop in loops.items() if loop.started is not None or not loop.running}


def read_loops(metrics_url: str) -> dict[str, Loop]:
    """The loops of the process serving ``metrics_url`` (none if it does not answer)."""
    return loops_of(scrape([metrics_url], LOOP_SERIES))


@dataclass
class Member:
    """One member of a consumer group, as its own process reports it."""

    group: str
    component: str
    client_id: str = ""
    pid: int | None = None
    assignment: dict[str, list[int]] = field(default_factory=dict)  # topic -> partitions

    def as_json(self) -> dict[str, object]:
        return {
            "client_id": self.client_id,
            "pid": self.pid,
            "component": self.component,
            "assignment": {t: sorted(ps) for t, ps in sorted(self.assignment.items())},
        }


def members_of(samples: Iterable[Sample]) -> list[Member]:
    """The group memberships one process reports: one per group it is a member of."""
    by_group: dict[str, Member] = {}
    for s in samples:
        group, component = s.labels.get("group"), s.labels.get("component")
        if group is None or component is None or s.value < 1:
            continue
        m = by_group.setdefault(group, Member(group, component))
        if s.name == MEMBER:
            m.client_id = s.labels.get("client_id", "")
            pid = s.labels.get("pid", "")
            m.pid = int(pid) if pid.isdigit() else None
        elif s.name == ASSIGNED and "topic" in s.labels:
            partition = s.labels.get("partition", "")
            if partition.isdigit():
                m.assignment.setdefault(s.labels["topic"], []).append(int(partition))
    return [m for m in by_group.values() if m.client_id]  # a member says who it is


def outbox_problems(samples: Iterable[Sample], max_age_s: float) -> list[str]:
    """Why a process's outbox is unhealthy: accepted events the broker refused for good and
    the DLQ does not have yet, or a record older than ``max_age_s`` not proved archived."""
    out: list[str] = []
    for s in samples:
        if s.name == UNDELIVERABLE and s.value > 0:
            out.append(
                f"outbox: {int(s.value)} accepted event(s) refused by the broker for good and "
                "not yet in the DLQ"
            )
        elif s.name == OLDEST_AGE and s.value > max_age_s:
            out.append(
                f"outbox: its oldest accepted event has waited {s.value:.0f}s to be ledgered "
                f"and archived (bound {max_age_s:g}s)"
            )
    return out


def child_restarts(supervisor_metrics_url: str) -> dict[str, int]:
    """Restarts per supervised child, from the embedded supervisor's metrics."""
    samples = scrape([supervisor_metrics_url], (CHILD_RESTARTS,))
    return {s.labels["child"]: int(s.value) for s in samples if "child" in s.labels}


def process_started(pid: int) -> float | None:
    """Unix time at which process ``pid`` started (Linux ``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            # the command may hold spaces and parentheses: fields count from the last ")"
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/stat") as fh:
            boot = next(int(line.split()[1]) for line in fh if line.startswith("btime"))
    except (OSError, IndexError, StopIteration, ValueError):
        return None
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
