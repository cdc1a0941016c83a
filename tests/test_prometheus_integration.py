"""Real Prometheus against the running embedded stack: every dashboard query returns data.

Prometheus comes from Debian's package (`make test` installs it as root); without it this
test fails, it never skips. It scrapes every endpoint `memstream status --json` lists, every
second, loads the alert rules, and is queried while a workload runs: HTTP events for two
tenants, refused events, checkouts for tasks and the tasks' outcomes, explicit feedback,
recalls, summarize_recall calls (against a Messages API stand-in), lineage, garbage for the DLQ,
ledger entries the graph cannot hold (dead-lettered alone, no consumer restarts), and a
third tenant's bursts of concurrent recalls, some refused by the fair share.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from confluent_kafka import Producer
from memstream.kafka.topics import LEDGER, RAW
from memstream.ledger.canonical import GENESIS_HASH
from memstream.ledger.entry import build_entry
from memstream.stack.net import free_port
from memstream_dashboards import dashboards
from messages_standin import MessagesStandin, llm_env
from stackproc import RunningStack, healthy_status, memstream, owned_stack, wait_until

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy" / "prometheus" / "memstream-rules.yml"
DATA_TIMEOUT_S = 90
POISON_EVERY_S = 10.0  # a record for each DLQ this often (rates over [1m] stay above 0)
# Activity the workload causes: these must be above zero, not merely present.
BUSY = {
    'sum(rate(memstream_events_received_total{component="api"}[1m]))',
    "sum(rate(memstream_events_ledgered_total[1m]))",
    'sum(rate(memstream_events_dead_lettered_total{component="sequencer"}[1m]))',
    "sum(rate(memstream_checkout_seconds_count[1m]))",
    'sum(rate(memstream_projected_events_total{projection="graph"}[1m]))',
    'sum(rate(memstream_projected_events_total{projection="vector"}[1m]))',
    'sum(rate(memstream_events_rejected_total{reason="invalid"}[1m]))',
    'sum(rate(memstream_retrospective_outcomes_total{result="bound"}[1m]))',
    'sum(rate(memstream_retrospective_assignments_total{kind="blame"}[1m]))',
    'sum(rate(memstream_feedback_events_total{source="retrospective"}[1m]))',
    'sum(rate(memstream_feedback_events_total{source="explicit"}[1m]))',
    # sessions that keep growing: new episodes, and the ones they supersede
    'sum(rate(memstream_latent_artifacts_built_total{type="episode_latent"}[1m]))',
    'sum(rate(memstream_latent_artifacts_stale_total{type="episode_latent"}[1m]))',
    'sum(rate(memstream_latent_artifacts_built_total{type="failure_latent"}[1m]))',
    # a passer-by purged every round: each store obeys the tombstone
    'sum(rate(memstream_purges_total{outcome="dry_run"}[1m]))',
    'sum(rate(memstream_purges_applied_total{store="graph"}[1m]))',
    'sum(rate(memstream_purges_applied_total{store="vectors"}[1m]))',
    'sum(rate(memstream_purges_applied_total{store="archive"}[1m]))',
    'sum(rate(memstream_purge_items_removed_total{store="graph", kind="events"}[1m]))',
    # consumer loops commit; a ledger entry FalkorDB cannot hold is dead-lettered alone
    "sum(rate(memstream_consumer_committed_total[1m]))",
    # each worker says it is a member of its group, and was assigned partitions at start
    'sum(memstream_consumer_member{group="memstream-sequencer"})',
    'sum(memstream_consumer_rebalances_total{kind="assign"})',
    'sum(rate(memstream_events_dead_lettered_total{component="graph-projector"}[1m]))',
    # a third tenant's burst of concurrent recalls every round: the fair share refuses some
    'sum(rate(memstream_reads_throttled_total{reason="concurrency"}[1m]))',
    # every round's recall is given after= the position of the round's events
    'sum(rate(memstream_read_after_wait_seconds_count{route="recall"}[1m]))',
}
# Alerts a healthy run must never even have pending.
NEVER = ("MemstreamConsumerRestarting", "MemstreamConsumerStalled")
FLOOD = 16  # concurrent recalls of the flooding tenant per round (its limit is 4 in flight)


def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    assert path is not None, (
        "prometheus is not installed: run `make test`, which installs Debian's prometheus "
        "package (as root), or `sudo apt-get install prometheus`"
    )
    return path


class Workload:
    """Posts events for two tenants and reads them back until stopped (a daemon thread)."""

    def __init__(self, stack: RunningStack, beta_key: str, flood_key: str) -> None:
        self.stack = stack
        self.keys = {"dev": stack.dev_key, "beta": beta_key}
        self.flood_key = flood_key
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.rounds = 0
        self.poisoned_at = -math.inf
        self.thread = threading.Thread(target=self._run, name="workload", daemon=True)

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.stack.bootstrap})
        with httpx.Client(base_url=self.stack.api_url, timeout=30) as http:
            while not self.stop.is_set():
                try:
                    self._round(http, producer)
                except Exception as exc:  # reported by the test, never swallowed
                    self.errors.append(repr(exc))
                self.rounds += 1
                self.stop.wait(0.5)

    def _round(self, http: httpx.Client, producer: Producer) -> None:
        n = self.rounds
        for tenant, key in self.keys.items():
            auth = {"Authorization": f"Bearer {key}"}
            events = [
                {
                    "id": f"{tenant}-{n}-{i}",
                    "stream": f"chat-{i % 2}",
                    "type": "message.user",
                    "payload": {"text": f"Round {n}: the pilot budget is now ${1000 + n}."},
                }
                for i in range(4)
            ]
            events.append(
                {
                    "id": f"{tenant}-{n}-fact",
                    "stream": "chat-0",
                    "type": "fact.asserted",
                    "payload": {"subject": "pilot", "predicate": "budget", "object": f"{n}"},
                }
            )
            written = http.post("/v1/events", json={"events": events}, headers=auth)
            self._expect(written, 202)
            bad = {"stream": "chat-0", "type": "message.user", "payload": {}}  # no text
            self._expect(http.post("/v1/events", json=bad, headers=auth), 422)
            self._task(http, auth, f"{tenant}-task-{n}", n)
            recall: dict[str, Any] = {"query": "pilot budget"}
            if written.status_code == 202:  # read your writes: waits for this round's events
                recall["after"] = written.json()["position"]
            self._expect(http.post("/v1/recall", json=recall, headers=auth), 200)
            for _ in range(2):  # the second is a cache hit unless new events changed the top k
                summarize = {"query": "pilot budget", "k": 5, "max_tokens": 100}
                resp = http.post("/v1/summarize_recall", json=summarize, headers=auth)
                self._expect(resp, 200)
            # 404 while the graph has not caught up is fine: the route is timed either way.
            lineage = http.get(f"/v1/lineage/{tenant}-{max(0, n - 10)}-0", headers=auth)
            self._expect(lineage, 200, 404)
            self._purge(http, auth, n)
        self._flood(http)
        # Poison by the clock, not by the round: on a loaded machine a round takes long
        # enough that "every tenth round" leaves a minute without one, and the DLQ rates at 0.
        if time.monotonic() - self.poisoned_at < POISON_EVERY_S:
            return
        self.poisoned_at = time.monotonic()
        producer.produce(RAW, b"\x00 not an envelope \xff", key=b"dev/chat-0")
        producer.flush(10)
        # and an entry restored from an old archive, which the graph cannot hold
        stream = f"restored-{n}"
        doc = {"id": f"dev-nul-{n}", "tenant": "dev", "stream": stream, "agent": "Mallory"}
        doc |= {"type": "message.user", "occurred_at": "2025-09-30T10:00:00Z"}
        doc["payload"] = {"text": f"round {n}: a\x00b"}
        kafka = {"topic": RAW, "partition": 0, "offset": n}
        _entry, value = build_entry(doc, 1, GENESIS_HASH, "2025-10-01T00:00:00Z", kafka)
        producer.produce(LEDGER, value, key=f"dev/{stream}".encode())
        producer.flush(10)

    def _task(self, http: httpx.Client, auth: dict[str, str], task: str, n: int) -> None:
        """A checkout for a task, the task's outcome, and explicit feedback on its answer."""
        query = {"query": "How much is the pilot budget now?", "max_tokens": 400, "task_id": task}
        resp = http.post("/v1/checkout", json=query, headers=auth)
        self._expect(resp, 200)
        if resp.status_code != 200:
            return
        packet = resp.json()
        status = ("success", "failure", "partial", "abandoned")[n % 4]
        outcome = {"task_id": task, "status": status, "checkout_ids": [packet["packet_id"]]}
        if status == "partial":
            outcome["score"] = 0.25
        event = {"stream": "tasks", "type": "task.outcome", "payload": outcome}
        self._expect(http.post("/v1/events", json=event, headers=auth), 202)
        support = [i for a in packet["answer_candidates"] for i in a["support_ids"]]
        known = support[:1] or [s["item_id"] for s in packet["snippets"][:1]]
        feedback = {"target_ids": known or ["nothing-yet"], "signal": 0.5}
        self._expect(http.post("/v1/feedback", json=feedback, headers=auth), 202 if known else 404)

    def _flood(self, http: httpx.Client) -> None:
        """Concurrent recalls of one tenant: served or refused by the fair share, never 5xx."""
        auth = {"Authorization": f"Bearer {self.flood_key}"}
        with ThreadPoolExecutor(FLOOD) as pool:
            answers = pool.map(
                lambda _: http.post("/v1/recall", json={"query": "budget"}, headers=auth),
                range(FLOOD),
            )
            for resp in answers:
                self._expect(resp, 200, 429)

    def _purge(self, http: httpx.Client, auth: dict[str, str], n: int) -> None:
        """A passer-by named in one round is purged in the next (and dry-run first)."""
        said = f"Round {n}: Passer-By Nº{n} Ødegård waved at the pilot."
        event = {"stream": "street", "type": "message.user", "payload": {"text": said}}
        self._expect(http.post("/v1/events", json=event, headers=auth), 202)
        if n == 0:
            return
        subject = f"/v1/subjects/Passer-By Nº{n - 1} Ødegård"
        self._expect(http.delete(subject, params={"dry_run": "true"}, headers=auth), 200)
        self._expect(http.delete(subject, params={"wait_s": 0}, headers=auth), 200)

    def _expect(self, resp: httpx.Response, *codes: int) -> None:
        if resp.status_code not in codes:
            self.errors.append(
                f"{resp.request.method} {resp.request.url.path}: "
                f"{resp.status_code} {resp.text[:200]}"
            )


class Prometheus:
    def __init__(self, url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.url, self.proc, self.log = url, proc, log

    def get(self, path: str, **params: str) -> Any:
        resp = httpx.get(f"{self.url}{path}", params=params, timeout=10)
        resp.raise_for_status()
        body = resp.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.get("/api/v1/query", query=expr)
        result = data["result"]
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": result}]
        return list(result)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def scrape_config(stack: RunningStack) -> dict[str, Any]:
    """One job per component (``memstream-<name>``), as in deploy/prometheus/prometheus.yml."""
    status = healthy_status(stack.data_dir)
    endpoints = status["metrics_endpoints"]
    names = {
        c["metrics_url"]: name for name, c in status["components"].items() if c.get("metrics_url")
    }
    assert set(endpoints) == set(names), (endpoints, names)
    jobs = []
    for url in endpoints:
        hostport = url.removeprefix("http://").removesuffix("/metrics")
        jobs.append(
            {
                "job_name": f"memstream-{names[url]}",
                "metrics_path": "/metrics",
                "static_configs": [{"targets": [hostport]}],
            }
        )
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": jobs,
    }


@pytest.fixture(scope="module")
def stack(
    standin: MessagesStandin, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    """This module owns its stack, with summarize_recall on (a Messages API stand-in: the LLM
    panels need calls): it asserts which tenants the whole stack ledgered and that no alert of
    any of its consumers was ever pending."""
    yield from owned_stack(tmp_path_factory, "prometheus", llm_env(standin))


@pytest.fixture(scope="module")
def prometheus(
    stack: RunningStack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    binary = prometheus_binary()
    root = tmp_path_factory.mktemp("prometheus")
    config = root / "prometheus.yml"
    config.write_text(yaml.safe_dump(scrape_config(stack), sort_keys=False))
    port = free_port()
    log = root / "prometheus.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={root / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    prom = Prometheus(f"http://127.0.0.1:{port}", proc, log)
    try:

        def ready() -> bool:
            assert proc.poll() is None, f"prometheus exited: {prom.tail()}"
            try:
                return httpx.get(f"{prom.url}/-/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, 30, "prometheus to be ready")
        yield prom
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="module")
def workload(stack: RunningStack, prometheus: Prometheus) -> Iterator[Workload]:
    beta = memstream("keys", "create", "--tenant", "beta", data_dir=stack.data_dir).stdout.strip()
    flood = memstream("keys", "create", "--tenant", "flood", data_dir=stack.data_dir).stdout
    w = Workload(stack, beta, flood.strip())

    def checkout_ready() -> bool:  # the live version's vector index opens after start-up
        resp = httpx.post(
            f"{stack.api_url}/v1/checkout",
            json={"query": "anything"},
            headers={"Authorization": f"Bearer {stack.dev_key}"},
            timeout=30,
        )
        return resp.status_code == 200

    wait_until(checkout_ready, 60, "checkout to answer")
    w.thread.start()
    try:
        yield w
    finally:
        w.stop.set()
        w.thread.join(30)


def has_data(result: list[dict[str, Any]]) -> bool:
    """At least one sample that is a number (a quantile over an empty window is NaN)."""
    return any(math.isfinite(float(s["value"][1])) for s in result)


def test_every_dashboard_query_returns_data(prometheus: Prometheus, workload: Workload) -> None:
    panels = [
        (f"{d.title} / {p.title}", q.expr)
        for d in dashboards()
        for p in d.panels
        for q in p.queries
    ]
    missing = dict.fromkeys(expr for _, expr in panels)
    idle = dict.fromkeys(sorted(BUSY))

    def busy(expr: str) -> bool:
        return any(float(s["value"][1]) > 0 for s in prometheus.query(expr))

    # On a loaded machine the workers may take a while to turn the workload into samples:
    # poll both conditions until the deadline rather than judging one instant.
    deadline = time.monotonic() + DATA_TIMEOUT_S
    while (missing or idle) and time.monotonic() < deadline:
        for expr in list(missing):
            if has_data(prometheus.query(expr)):
                del missing[expr]
        for expr in list(idle):
            if busy(expr):
                del idle[expr]
        time.sleep(1)
    assert not workload.errors, workload.errors[:5]
    failing = [f"{title}: {expr}" for title, expr in panels if expr in missing]
    assert not failing, (
        f"{len(failing)} dashboard queries returned no data after {DATA_TIMEOUT_S}s of "
        f"workload ({workload.rounds} rounds):\n" + "\n".join(failing)
    )
    assert not idle, f"the workload should make these non-zero: {list(idle)}"

    def tenants() -> set[str]:
        found = prometheus.query("count by (tenant) (memstream_events_ledgered_total)")
        return {s["metric"]["tenant"] for s in found}

    # The scrape timeout is the 1 s interval: a /metrics answered later than that under load
    # leaves the sequencers' series stale for that instant, and one query then sees none.
    wait_until(lambda: tenants() == {"dev", "beta"}, 30, "both tenants' events counted")


def test_rules_are_loaded_and_targets_up(prometheus: Prometheus, workload: Workload) -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    expected = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    loaded = {
        r["name"]
        for g in prometheus.get("/api/v1/rules")["groups"]
        for r in g["rules"]
        if r["type"] == "alerting"
    }
    assert expected <= loaded, f"alerts not loaded: {sorted(expected - loaded)}"

    def all_up() -> bool:
        targets = prometheus.get("/api/v1/targets")["activeTargets"]
        return bool(targets) and all(t["health"] == "up" for t in targets)

    wait_until(all_up, 30, "every scrape target to be up")
    alerts = prometheus.get("/api/v1/alerts")["alerts"]
    troubled = [(a["labels"]["alertname"], a["labels"].get("group")) for a in alerts]
    assert not [t for t in troubled if t[0] in NEVER], troubled
    jobs = {t["labels"]["job"] for t in prometheus.get("/api/v1/targets")["activeTargets"]}
    assert {"memstream-api", "memstream-sequencer", "memstream-archiver"} <= jobs
    assert {
        "memstream-graph-projector",
        "memstream-supervisor",
        "memstream-retrospective",
        "memstream-latent-builder",
    } <= jobs
