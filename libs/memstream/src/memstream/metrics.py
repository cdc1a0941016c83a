"""Prometheus metrics shared by every process (names ``memstream_*``, label ``component``).

Label rules: ``component`` on every series; ``topic`` and ``group`` where Kafka is involved;
``tenant`` only through :class:`TenantLabels`, which bounds its cardinality.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Collection

from prometheus_client import Counter, Gauge, Histogram, start_http_server
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

EVENTS_RECEIVED = Counter(
    "memstream_events_received_total",
    "Events accepted by an ingest surface (HTTP, SDK) before producing",
    ["component"],
)
EVENTS_PRODUCED = Counter(
    "memstream_events_produced_total",
    "Records delivered to a topic (delivery report received)",
    ["component", "topic"],
)
EVENTS_REJECTED = Counter(
    "memstream_events_rejected_total",
    "Events refused at an ingest surface, by reason class",
    ["component", "reason"],
)
EVENTS_LEDGERED = Counter(
    "memstream_events_ledgered_total",
    "Events appended to the ledger (tenant bounded by TenantLabels)",
    ["component", "tenant"],
)
EVENTS_DUPLICATE = Counter(
    "memstream_events_duplicate_total", "Events dropped as resends of a known id", ["component"]
)
EVENTS_DEAD_LETTERED = Counter(
    "memstream_events_dead_lettered_total", "Records sent to the DLQ", ["component", "topic"]
)
RECORDS_TOO_LARGE = Counter(
    "memstream_records_too_large_total",
    "Records a component built but Kafka refused for their size, by the topic they were for",
    ["component", "topic"],
)
ENTRIES_ARCHIVED = Counter(
    "memstream_entries_archived_total", "Ledger entries fsync'd to archive segments", ["component"]
)
ARCHIVE_LAG = Gauge(
    "memstream_archive_lag_seconds",
    "From ledger append to fsync, for the oldest entry of the last archived batch",
    ["component"],
)
CONSUMER_LAG = Gauge(
    "memstream_consumer_lag",
    "Records behind the end of a partition, as seen by the consumer",
    ["component", "group", "topic", "partition"],
)
BATCH_SECONDS = Histogram(
    "memstream_batch_seconds",
    "Time to handle, write and commit one consumer batch",
    ["component"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
BATCH_SIZE = Histogram(
    "memstream_batch_records",
    "Records per consumer batch",
    ["component"],
    buckets=(1, 10, 50, 100, 250, 500, 1000, 2000, 5000),
)
REQUEST_SECONDS = Histogram(
    "memstream_http_request_seconds",
    "HTTP request latency",
    ["component", "route", "method", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
UP = Gauge("memstream_up", "1 while the process runs its main loop", ["component"])
# One consumer loop = one (component, group): what ``memstream status`` and the alerts judge
# its health by (kafka/loop.py sets them; projection/runner.py counts in-process restarts).
CONSUMER_RUNNING = Gauge(
    "memstream_consumer_running",
    "1 while a consumer loop runs; 0 once it stopped on an error (until it is restarted)",
    ["component", "group"],
)
CONSUMER_STARTED = Gauge(
    "memstream_consumer_started_timestamp_seconds",
    "Unix time at which the consumer loop last started",
    ["component", "group"],
)
CONSUMER_RESTARTS = Counter(
    "memstream_consumer_restarts_total",
    "Consumer loops that stopped on an error (or failed to start) and are started again",
    ["component", "group"],
)
CONSUMER_COMMITTED = Counter(
    "memstream_consumer_committed_total",
    "Offsets a consumer loop committed past (records done with)",
    ["component", "group"],
)
CONSUMER_LAST_COMMIT = Gauge(
    "memstream_consumer_last_commit_timestamp_seconds",
    "Unix time of the loop's last commit (its start time until the first one)",
    ["component", "group"],
)
CONSUMER_WAITING = Gauge(
    "memstream_consumer_waiting",
    "1 while a consumer loop retries a batch because a store it writes to is unavailable",
    ["component", "group"],
)
CONSUMER_RETRIES = Counter(
    "memstream_consumer_retries_total",
    "Batch attempts that found a store unavailable (the batch is retried with backoff)",
    ["component", "group"],
)
CONSUMER_READAHEAD_BYTES = Gauge(
    "memstream_consumer_readahead_bytes",
    "Bytes (keys and values) a tenant-fair consumer loop has read ahead and not yet processed",
    ["component", "group"],
)
CONSUMER_QUEUED_TENANTS = Gauge(
    "memstream_consumer_queued_tenants",
    "Tenants with records in a tenant-fair consumer loop's read-ahead (each takes its turn)",
    ["component", "group"],
)
# Who is in a group: each member says so itself (the embedded broker's group description
# lists no members), with the partitions it holds and how often they changed hands.
CONSUMER_MEMBER = Gauge(
    "memstream_consumer_member",
    "1 while this process is a member of the consumer group, by its Kafka client id and pid",
    ["component", "group", "client_id", "pid"],
)
CONSUMER_ASSIGNED = Gauge(
    "memstream_consumer_assigned_partitions",
    "1 for each partition the group has assigned to this member",
    ["component", "group", "topic", "partition"],
)
CONSUMER_REBALANCES = Counter(
    "memstream_consumer_rebalances_total",
    "Rebalances this member went through: partitions assigned to it, or taken from it",
    ["component", "group", "kind"],
)
FAIR_SERIES = (CONSUMER_READAHEAD_BYTES, CONSUMER_QUEUED_TENANTS)
CONSUMER_SERIES = (
    CONSUMER_RUNNING,
    CONSUMER_STARTED,
    CONSUMER_RESTARTS,
    CONSUMER_COMMITTED,
    CONSUMER_LAST_COMMIT,
    CONSUMER_WAITING,
    CONSUMER_RETRIES,
)
DEPENDENCY_UP = Gauge(
    "memstream_dependency_up",
    "1 while a server this process depends on answers its health probe",
    ["component", "dependency"],
)

TENANT_LABEL_LIMIT = 100
OTHER_TENANTS = "_other"  # tenant names start with a letter or digit, so this never collides


class TenantLabels:
    """Tenant label values with bounded cardinality.

    The first ``limit`` tenants a process sees keep their own series; every later one shares
    ``_other``. Per-tenant totals beyond that come from ``memstream ledger stats``.
    """

    def __init__(self, limit: int = TENANT_LABEL_LIMIT) -> None:
        self.limit = limit
        self._named: set[str] = set()

    def __call__(self, tenant: str) -> str:
        if tenant in self._named:
            return tenant
        if len(self._named) < self.limit:
            self._named.add(tenant)
            return tenant
        return OTHER_TENANTS


def serve_metrics(port: int, host: str = "127.0.0.1") -> int:
    """Expose ``/metrics`` on ``port`` (0 = any free port); returns the bound port."""
    server, _thread = start_http_server(port, addr=host)
    return int(server.server_port)


def read_samples(url: str, names: Collection[str], timeout: float = 3.0) -> list[Sample]:
    """The samples called ``names`` from one ``/metrics`` URL; raises ``OSError`` when it does
    not answer within ``timeout``."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        text = resp.read().decode()
    return [x for f in text_string_to_metric_families(text) for x in f.samples if x.name in names]


def scrape(urls: list[str], names: Collection[str], timeout: float = 3.0) -> list[Sample]:
    """The samples called ``names`` from every ``/metrics`` URL that answers (one read each)."""
    found: list[Sample] = []
    for url in urls:
        try:
            found += read_samples(url, names, timeout)
        except OSError:
            continue
    return found


API_REFUSED = Counter(
    "memstream_api_refused_total",
    "Requests the API refused on how they arrived: headers late, a body stalled, too slow or "
    "past its deadline (408), a tenant's ingest requests all open (429)",
    ["component", "reason"],
)
OUTBOX_EVENTS = Gauge(
    "memstream_outbox_events",
    "Accepted events spooled in the outbox and not yet proved archived",
    ["component"],
)
OUTBOX_UNDELIVERABLE = Gauge(
    "memstream_outbox_undeliverable",
    "Accepted events the broker refused for good (too large for it) not yet in the DLQ",
    ["component"],
)
OUTBOX_OLDEST_AGE = Gauge(
    "memstream_outbox_oldest_age_seconds",
    "Age of the oldest accepted event still in the outbox (not yet proved archived); 0 empty",
    ["component"],
)
OUTBOX_DEAD_LETTERED = Counter(
    "memstream_outbox_dead_lettered_total",
    "Accepted events the broker refused for good, moved from the outbox to the DLQ",
    ["component"],
)
OUTBOX_RESENT = Counter(
    "memstream_outbox_resent_total",
    "Events re-sent from the outbox (after a broker restart or a failed delivery)",
    ["component"],
)


# Purges: each store that obeys a memory.purge tombstone counts what it removed.
PURGES_APPLIED = Counter(
    "memstream_purges_applied_total",
    "memory.purge tombstones applied, by store (graph, vectors, latents, archive, ...)",
    ["component", "store"],
)
PURGE_ITEMS_REMOVED = Counter(
    "memstream_purge_items_removed_total",
    "Items a purge removed, by store and kind (events, facts, entities, points, lines, ...)",
    ["component", "store", "kind"],
)
PURGE_APPLIED_AT = Gauge(
    "memstream_purge_applied_timestamp_seconds",
    "Unix time at which this store last applied a purge tombstone",
    ["component", "store"],
)


# Fair share of the read routes (memstream.fairshare): no tenant label, the bound is per route.
READS_THROTTLED = Counter(
    "memstream_reads_throttled_total",
    "Reads answered 429 by the fair share, by route and reason (concurrency = the tenant's "
    "reads in flight, budget = its share of read time, busy = every slot taken)",
    ["component", "route", "reason"],
)
READS_IN_FLIGHT = Gauge(
    "memstream_reads_in_flight",
    "Reads admitted by the fair share and not yet answered, across tenants",
    ["component"],
)
