"""``bench ingest``: SDK and HTTP into the ledger, beside the raw broker produce rate.

The raw rate produces the same pre-serialised envelopes to a scratch topic with the same
partition count and producer settings, so the ratio isolates what the pipeline costs.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from memstream.events import EventIn
from memstream.kafka.clients import make_producer
from memstream.kafka.produce import flush_or_raise, produce_with_backpressure
from memstream.kafka.reading import high_watermarks
from memstream.kafka.topics import LEDGER
from memstream.ledger.opening import data_keys
from memstream.proof import Prover, producer_secret
from memstream.sdk import MemoryClient
from memstream.shred.port import DataKeys
from memstream_cli.progress import Report, Stage, stage
from memstream_cli.stack.supervisor import EmbeddedStack

from memstream_bench.stack import throwaway_stack


def make_events(n: int, tenant: str, streams: int = 64) -> list[Any]:
    """Synthetic agent chatter: messages, tool calls/results, observations, facts."""
    now = datetime.now(UTC)
    kinds: list[tuple[str, dict[str, Any]]] = [
        ("message.user", {"text": "Please check the order status for customer {i}."}),
        ("message.assistant", {"text": "Order {i} shipped on Monday; tracking is updated."}),
        ("tool.call", {"tool": "orders.lookup", "arguments": {"order": "{i}"}}),
        ("tool.result", {"tool": "orders.lookup", "output": {"status": "shipped"}}),
        ("observation", {"text": "Customer {i} prefers email over phone."}),
        ("fact.asserted", {"subject": "order-{i}", "predicate": "status", "object": "shipped"}),
    ]
    out = []
    run = uuid.uuid4().hex[:8]
    for i in range(n):
        type_, payload = kinds[i % len(kinds)]
        body = {k: (v.format(i=i) if isinstance(v, str) else v) for k, v in payload.items()}
        out.append(
            EventIn(
                id=f"{run}-{i}",
                stream=f"stream-{i % streams}",
                agent=f"agent-{i % 8}",
                type=type_,
                occurred_at=now,
                payload=body,
            ).complete(tenant)
        )
    return out


def _ledger_total(bootstrap: str) -> int:
    return sum(high_watermarks(bootstrap, LEDGER).values())


def _wait_ledger(bootstrap: str, base: int, n: int, timeout: float, step: Stage) -> float:
    """perf_counter() once the ledger holds ``n`` entries more than ``base``; ``step``
    counts them."""
    target = base + n
    deadline = time.monotonic() + timeout
    while (total := _ledger_total(bootstrap)) < target:
        step.update(total - base)
        if time.monotonic() > deadline:
            raise TimeoutError(f"ledger did not reach {target} entries in {timeout}s")
        time.sleep(0.02)
    return time.perf_counter()


def raw_produce_rate(
    bootstrap: str, payloads: list[tuple[str, bytes]], partitions: int, at_least: int = 100_000
) -> float:
    """Records/s of one producer into a scratch topic; short workloads are cycled so the
    figure is not dominated by connection set-up."""
    topic = f"bench.raw-baseline-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    producer = make_producer(bootstrap)
    total = max(len(payloads), at_least)
    t0 = time.perf_counter()
    for i in range(total):
        key, value = payloads[i % len(payloads)]
        produce_with_backpressure(producer, topic, value, key=key)
    # A rate over records that never arrived would overstate the broker.
    flush_or_raise(producer, 120, None, f"the baseline records to {topic}")
    return total / (time.perf_counter() - t0)


def run_ingest_bench(
    n: int, http_events: int, progress: Report, projections: bool = True
) -> dict[str, Any]:
    """With ``projections`` the graph and vector projectors share the machine, as in
    ``memstream up``; without, only the spine runs (broker, sequencer, archiver, API)."""
    with throwaway_stack(progress, projections=projections) as (stack, _settings):
        assert stack.info is not None
        info = stack.info
        doc = _measure(stack, info.kafka_bootstrap, info.api_url, n, http_events, progress)
        doc["stack"] = "full" if projections else "spine"
        return doc


def _measure(
    stack: EmbeddedStack, bootstrap: str, api_url: str, n: int, http_n: int, progress: Report
) -> dict[str, Any]:
    progress(f"building {n} synthetic events")
    events = make_events(n, "bench")
    payloads = [(e.key, e.model_dump_json().encode()) for e in events]
    progress("raw broker produce rate (same envelopes, scratch topic)")
    raw_rate = raw_produce_rate(bootstrap, payloads, stack.settings.topic_partitions)
    prover = Prover.internal(producer_secret(stack.settings))
    sdk = _sdk_to_ledger(bootstrap, events, progress, data_keys(stack.settings), prover)
    result: dict[str, Any] = {
        "events": n,
        "sealed": stack.settings.seal,
        "raw_broker_produce_events_per_s": round(raw_rate),
        "sdk": sdk,
    }
    if http_n:
        result["http"] = _http_to_ledger(bootstrap, api_url, stack.dev_key, http_n, progress)
    result["sdk_ledger_vs_raw"] = round(sdk["ledger_events_per_s"] / raw_rate, 3)
    if "http" in result:
        result["http_ledger_vs_raw"] = round(result["http"]["ledger_events_per_s"] / raw_rate, 3)
    result["machine"] = _machine()
    return result


def _sdk_to_ledger(
    bootstrap: str, events: list[Any], progress: Report, keys: DataKeys | None, prover: Prover
) -> dict[str, Any]:
    n = len(events)
    base = _ledger_total(bootstrap)
    step = stage(progress, f"SDK: emitting {n} events and waiting for the ledger", n)
    t0 = time.perf_counter()
    with MemoryClient(bootstrap, "bench", keys=keys, prover=prover) as client:
        client.emit_many(events)
    t_emit = time.perf_counter()
    t_done = _wait_ledger(bootstrap, base, n, 600, step)
    return _rates(n, t0, "emit_events_per_s", t_emit, t_done)


def _http_to_ledger(
    bootstrap: str, api_url: str, key: str, http_n: int, progress: Report
) -> dict[str, Any]:
    step = stage(progress, f"HTTP: posting {http_n} events in batches of 1000", http_n)
    http_events = make_events(http_n, "dev")
    batches = [http_events[i : i + 1000] for i in range(0, http_n, 1000)]
    bodies = [{"events": [e.model_dump(mode="json") for e in batch]} for batch in batches]
    base = _ledger_total(bootstrap)
    t0 = time.perf_counter()
    with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {key}"}) as http:
        for body in bodies:
            resp = http.post("/v1/events", json=body, timeout=60)
            resp.raise_for_status()
            step.advance(len(body["events"]))
    t_post = time.perf_counter()
    step = stage(progress, f"HTTP: waiting for the ledger ({http_n} events)", http_n)
    t_done = _wait_ledger(bootstrap, base, http_n, 600, step)
    return _rates(http_n, t0, "post_events_per_s", t_post, t_done)


def _rates(n: int, t0: float, sent_key: str, t_sent: float, t_done: float) -> dict[str, Any]:
    """Events/s from ``t0`` until all were sent (``sent_key``) and until all were ledgered."""
    return {
        "events": n,
        sent_key: round(n / (t_sent - t0)),
        "ledger_events_per_s": round(n / (t_done - t0)),
        "seconds": round(t_done - t0, 3),
    }


def _machine() -> dict[str, Any]:
    import os
    import platform

    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "date": datetime.now(UTC).date().isoformat(),
    }
