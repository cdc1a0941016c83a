"""Health of every component and consumer lag per group.

A component is healthy when its process lives, answers ``/metrics`` and has no problem: a
supervised process restarting in a loop, or one of its consumer loops restarting in a loop,
stopped on an error or stalled (lag without commits). The rules are in
:mod:`memstream.ops.loops`. Every unhealthy verdict carries its reason in ``problems``: a
process gone, an endpoint that did not answer (and how), a loop in trouble.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
from confluent_kafka.admin import AdminClient
from memstream.kafka.reading import end_offsets, group_lag
from memstream.metrics import read_samples
from memstream.ops.loops import (
    LOOP_SERIES,
    MEMBER_SERIES,
    OUTBOX_SERIES,
    Member,
    child_restarts,
    loops_of,
    members_of,
    outbox_problems,
    process_started,
    restarting,
)
from memstream.sinks import SEQUENCER_GROUPS, SINKS, Sink

from memstream_cli.stack.locate import Endpoints


def fixed_groups(sinks: Sequence[Sink] = SINKS) -> dict[str, tuple[str, ...]]:
    """Every fixed consumer group the stack runs (the sequencer's and each sink's) and the
    topics it reads; a projection version's groups are listed by its members."""
    groups = {g.group: g.topics for g in SEQUENCER_GROUPS}
    return groups | {g.group: g.topics for s in sinks for g in s.groups}


def _run_by(sinks: Sequence[Sink]) -> dict[str, str]:
    """The component that runs each derived sink's groups: a stack of the spine alone runs
    none of them, and has no such lag."""
    return {g.group: s.component for s in sinks if s.derived for g in s.groups}


# A busy machine can take seconds to answer; slow is not dead, so status waits this long
# before it calls an endpoint silent (and then says so).
ANSWER_TIMEOUT_S = 10.0
# A process this young whose /metrics does not answer yet is starting (under load a niced
# worker takes half a minute to import), not broken: still not healthy, said as such.
STARTING_S = 120.0


def _silence(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    return f"did not answer within {ANSWER_TIMEOUT_S:g} s ({reason})"


def _http_problem(name: str, url: str) -> str | None:
    """None when ``url`` answers 200; else why not, as a problem line."""
    try:
        with urllib.request.urlopen(url, timeout=ANSWER_TIMEOUT_S) as resp:
            status = int(resp.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError) as exc:
        return f"{name}: {url} {_silence(exc)}"
    return None if status == 200 else f"{name}: {url} answered {status}"


def _pid_alive(pid: int) -> bool:
    try:
        import os

        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _lags(bootstrap: str, groups: dict[str, tuple[str, ...]]) -> dict[str, dict[str, Any]]:
    """:func:`_lag` of each group. A group's lag is a few broker round trips that wait, not
    compute: read side by side, `memstream status` answers in the time of the slowest group
    rather than their sum."""
    if not groups:
        return {}
    topics = sorted({t for read in groups.values() for t in read})
    with ThreadPoolExecutor(max_workers=8) as pool:
        # Each topic's end offsets once, however many groups read it.
        found_ends = pool.map(lambda t: _ends(bootstrap, t), topics)
        ends = dict(zip(topics, found_ends, strict=True))
        found = pool.map(lambda g: _lag(bootstrap, g, groups[g], ends), groups)
        return dict(zip(groups, found, strict=True))


def _ends(bootstrap: str, topic: str) -> dict[int, int] | None:
    try:
        return end_offsets(bootstrap, topic, 5)
    except Exception:  # KafkaException and the like: the group's own read names it
        return None


def _lag(
    bootstrap: str,
    group: str,
    topics: tuple[str, ...],
    ends: dict[str, dict[int, int] | None] | None = None,
) -> dict[str, Any]:
    """``{"topic", "total", "partitions"}``; a group over several topics names them joined
    and keys its partitions ``topic[p]``."""
    name = ", ".join(topics)
    known = ends or {}
    try:
        per_topic = {t: group_lag(bootstrap, group, t, 5, known.get(t)) for t in topics}
    except Exception as exc:
        return {"topic": name, "error": str(exc)}
    if len(topics) == 1:
        parts: dict[Any, int] = dict(per_topic[topics[0]])
    else:
        parts = {f"{t}[{p}]": n for t, lag in per_topic.items() for p, n in lag.items()}
    return {"topic": name, "total": sum(parts.values()), "partitions": parts}


def _judge(
    name: str, c: dict[str, Any], pid: int | None, restarts: int, now: float, max_age_s: float
) -> list[Member]:
    """Add the consumers of the component's metrics endpoint and its problems to ``c``
    (its outbox's too: ``max_age_s`` bounds the age of its oldest record); returns the
    group memberships it reports. One scrape serves all three."""
    problems: list[str] = list(c.get("problems", []))
    members: list[Member] = []
    if pid is not None and (why := restarting(restarts, process_started(pid), now)):
        problems.append(f"{name} {why}")
    url = c.get("metrics_url")
    if url and c["healthy"]:
        try:
            samples = read_samples(
                url, (*LOOP_SERIES, *OUTBOX_SERIES, *MEMBER_SERIES), ANSWER_TIMEOUT_S
            )
        except (OSError, ValueError) as exc:
            problems.append(_unanswered(name, url, exc, pid, now))
            samples = []
        loops = loops_of(samples)
        c["consumers"] = {g: loop.summary(now) for g, loop in sorted(loops.items())}
        problems += [p for loop in loops.values() for p in loop.problems(now)]
        problems += outbox_problems(samples, max_age_s)
        members = members_of(samples)
    if restarts:
        c["restarts"] = restarts
    c["problems"] = problems
    c["healthy"] = c["healthy"] and not problems
    return members


def _unanswered(name: str, url: str, exc: BaseException, pid: int | None, now: float) -> str:
    started = process_started(pid) if pid is not None else None
    if started is not None and now - started < STARTING_S:
        return f"{name}: starting (up {now - started:.0f} s), {url} not answering yet"
    return f"{name}: {url} {_silence(exc)}"


def collect_status(
    ep: Endpoints, outbox_max_age_s: float = 300.0, sinks: Sequence[Sink] = SINKS
) -> dict[str, Any]:
    """``{"kafka": {...}, "metrics_endpoints": [...], "components": {...}, "lag": {...}}``
    of the stack and the sinks of the table; an outbox holding an event longer than
    ``outbox_max_age_s`` is a problem."""
    components: dict[str, Any] = {}
    kafka_problems: list[str] = []
    try:
        admin = AdminClient({"bootstrap.servers": ep.kafka_bootstrap})
        md = admin.list_topics(timeout=ANSWER_TIMEOUT_S)
        topics = sorted(t for t in md.topics if not t.startswith("__"))
    except Exception as exc:  # KafkaException: the broker did not give its metadata
        kafka_problems, topics = [f"kafka: {ep.kafka_bootstrap} {_silence(exc)}"], []
    kafka_ok = not kafka_problems
    components["kafka"] = {"healthy": kafka_ok, "topics": topics, "problems": kafka_problems}
    lag: dict[str, Any] = {}
    run_by = _run_by(sinks)
    if kafka_ok:
        wanted = {
            group: read
            for group, read in fixed_groups(sinks).items()
            if ep.stack is None or run_by.get(group) is None or run_by[group] in ep.stack.components
        }
        lag = _lags(ep.kafka_bootstrap, wanted)
    metrics: list[str] = []
    members: list[Member] = []
    now = time.time()
    if ep.stack is not None:
        metrics = list(ep.stack.metrics_endpoints)
        members = _embedded(ep, components, now, outbox_max_age_s)
        kafka_key = "tansu"
    else:
        kafka_key = "kafka"
    if ep.api_url:
        api = components.setdefault("api", {})
        if why := _http_problem("api", f"{ep.api_url}/healthz"):
            api["problems"] = [*api.get("problems", []), why]
        api["healthy"] = api.get("healthy", True) and not why
        api["url"] = ep.api_url
        if ep.stack is None:  # a stack of services: the API's own consumers (vector projection)
            api["metrics_url"] = f"{ep.api_url}/metrics"
            members += _judge("api", api, None, 0, now, outbox_max_age_s)
    problems = [p for c in components.values() for p in c.get("problems", [])]
    groups = consumer_groups(ep.kafka_bootstrap if kafka_ok else None, members, lag, sinks)
    return {
        "kafka": {"bootstrap": ep.kafka_bootstrap, "healthy": components[kafka_key]["healthy"]},
        "metrics_endpoints": metrics,
        "components": components,
        "lag": lag,
        "consumer_groups": groups,
        "healthy": all(bool(c.get("healthy", True)) for c in components.values()),
        "problems": problems,
    }


def consumer_groups(
    bootstrap: str | None,
    members: list[Member],
    lag: dict[str, Any],
    sinks: Sequence[Sink] = SINKS,
) -> dict[str, Any]:
    """``{group: {"members": [{"client_id", "pid", "component", "assignment": {topic:
    [partitions]}}], "lag"}}`` for every group the stack runs. Each member reports itself
    on its ``/metrics`` (the broker's group description may list none); a group whose
    members are all gone is listed with none. ``lag``: records behind, or None unread."""
    groups: dict[str, dict[str, Any]] = {g: {"members": [], "lag": None} for g in lag}
    for m in members:
        groups.setdefault(m.group, {"members": [], "lag": None})["members"].append(m.as_json())
    unread: dict[str, tuple[str, ...]] = {}
    for group, g in groups.items():
        g["members"].sort(key=lambda m: str(m["client_id"]))
        read = {t for m in g["members"] for t in m["assignment"]}
        if group not in lag:
            unread[group] = fixed_groups(sinks).get(group) or tuple(sorted(read))
    found = {**lag, **(_lags(bootstrap, unread) if bootstrap is not None else {})}
    for group, g in groups.items():
        known = found.get(group)
        g["lag"] = known.get("total") if known is not None else None
    return dict(sorted(groups.items()))


def _embedded(
    ep: Endpoints, components: dict[str, Any], now: float, max_age_s: float
) -> list[Member]:
    """The supervised children of an embedded stack: alive, answering, not in trouble; and
    the group memberships they report."""
    assert ep.stack is not None
    secret = ep.graph_password
    password = secret.get_secret_value() if secret is not None else None
    graph_problems: list[str] = []
    try:
        graph = redis.Redis.from_url(
            ep.stack.falkordb_url, socket_timeout=ANSWER_TIMEOUT_S, password=password
        )
        graph.ping()
    except redis.RedisError as exc:
        graph_problems.append(f"falkordb: PING {_silence(exc)}")
    components["falkordb"] = {
        "healthy": not graph_problems,
        "url": ep.stack.falkordb_url,
        "problems": graph_problems,
    }
    supervisor = ep.stack.components.get("supervisor")
    url = supervisor.metrics_url if supervisor is not None else None
    restarts = child_restarts(url) if url else {}
    for name, c in ep.stack.components.items():
        if name in ("tansu", "falkordb"):
            components.setdefault(name, {})["pid"] = c.pid
            continue
        alive = _pid_alive(c.pid)
        components[name] = {
            "healthy": alive,
            "pid": c.pid,
            "metrics_url": c.metrics_url,
            "problems": [] if alive else [f"{name}: process {c.pid} is not running"],
        }
    components["tansu"] = components.pop("kafka") | components.get("tansu", {})
    # One scrape a component, side by side: each waits on its own process.
    with ThreadPoolExecutor(max_workers=8) as pool:
        judged = pool.map(
            lambda n: _judge(n, components[n], components[n].get("pid"), restarts.get(n, 0),
                             now, max_age_s),
            list(components),
        )  # fmt: skip
        return [m for found in judged for m in found]
