"""Frozen settings read from ``MEMSTREAM_*`` environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

# The FalkorDB password the embedded stack generates, in the data dir (0600).
FALKORDB_PASSWORD_FILE = "falkordb-password"
# The secret the stack's own producers prove raw records with (memstream.proof), likewise.
PRODUCER_SECRET_FILE = "producer-secret"
# The most MEMSTREAM_MAX_RECORD_BYTES may be: what a consumer fetches whole by default.
RECORD_BYTES_CEILING = 32 << 20


def read_secret(path: Path) -> SecretStr | None:
    """A secret kept in a file (whitespace around it dropped); None when there is no file."""
    try:
        return SecretStr(path.read_text().strip())
    except FileNotFoundError:
        return None


class Settings(BaseSettings):
    """Every knob of every memstream process; the same names drive embedded and distributed."""

    model_config = SettingsConfigDict(env_prefix="MEMSTREAM_", frozen=True, extra="ignore")

    data_dir: Path = Field(default=Path(".memstream"), description="embedded stack state")
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8080, ge=0, le=65535)
    api_fd: int | None = Field(
        default=None,
        description="serve on this inherited listening socket instead of binding api_port "
        "(the embedded supervisor holds the port, so the API restarts without refusing)",
    )
    metrics_host: str = Field(default="127.0.0.1", description="0.0.0.0 in containers")
    metrics_port: int = Field(default=0, ge=0, le=65535, description="0 = pick a free port")

    kafka_bootstrap: str | None = Field(default=None, description="external Kafka; None = embedded")
    neo4j_uri: str | None = Field(default=None, description="external Neo4j; None = FalkorDB")
    neo4j_user: str = "neo4j"
    neo4j_password: str = ""
    falkordb_url: str | None = Field(default=None, description="external FalkorDB redis:// URL")
    falkordb_password: SecretStr | None = Field(
        default=None,
        description="FalkorDB password; unset: the one the embedded stack keeps in "
        "<data_dir>/falkordb-password",
    )
    graph_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="how long a graph query may take before the store counts as unavailable "
        "(a server that is down refuses at once; a purge plan on a loaded machine takes seconds)",
    )
    qdrant_url: str | None = Field(default=None, description="external Qdrant; None = Edge")

    topic_partitions: int = Field(default=4, ge=1)
    topic_replication: int = Field(default=1, ge=1)
    raw_retention_ms: int = Field(
        default=24 * 3600 * 1000,
        ge=1,
        description="how long raw events stay in memory.events.raw: the one topic whose copies "
        "may be in the clear (an SDK client without the data key store), so kept short; the "
        "sequencer must have read them by then (the API's outbox re-sends its own until archived)",
    )
    dlq_retention_ms: int = 30 * 24 * 3600 * 1000
    max_record_bytes: int = Field(
        default=1 << 20,
        ge=16 << 10,
        le=RECORD_BYTES_CEILING,
        description="the largest Kafka record memstream writes: the max.message.bytes of the "
        "topics the stack creates and every producer's message.max.bytes. The edge refuses "
        "(413) an event whose ledger record could pass it, reading the topics' own limit when "
        "the broker reports one",
    )

    replicas: int = Field(
        default=1,
        ge=1,
        le=16,
        description="embedded stack: processes of each consumer-group worker that is correct "
        "at N (the sequencer, the graph projector, the retrospective pass); one consumer "
        "group each, its partitions shared among them",
    )
    worker_replicas: dict[str, int] = Field(
        default_factory=dict,
        description="embedded stack: per-worker overrides of `replicas`, as JSON "
        '(`{"sequencer": 3}`)',
    )
    heavy_nice: int = Field(
        # 10, not 19: 19 measured no steady gain (docs/operations.md has the runs) and, on a
        # loaded machine, left the background workers far behind.
        default=10,
        ge=0,
        le=19,
        description="embedded stack: niceness added to the latent builder, the retrospective "
        "pass and the archiver, so the sequencer, the projections and the API get the CPU "
        "first under load (0 = same priority as the rest)",
    )
    vector_optimize: bool = Field(
        default=False,
        description="Qdrant Edge: build HNSW when writes pause (freezes the API during a build)",
    )
    vector_payload_cache: int = Field(
        default=20_000,
        ge=0,
        description="Qdrant Edge: payloads of this many recently found points kept decoded in "
        "the process that holds the index, so searches read ids only; a write drops what it "
        "touches, a purge or compaction all (0 = off: every search reads payloads)",
    )
    vector_shards: int = Field(
        default=8,
        ge=1,
        le=256,
        description="Qdrant Edge: a new collection's shards; a tenant's points live in one of "
        "them (by a hash of the tenant), so its searches scan that shard only. Each shard in "
        "use maps ~100 MB of files whatever it holds. An existing collection keeps the count "
        "it was made with",
    )
    embedded_projections: bool = Field(
        default=True,
        description="embedded stack runs the derived consumers: graph and vector projections, "
        "the retrospective pass",
    )
    retrospective_grace_s: float = Field(
        default=30.0,
        gt=0,
        description="how long an outcome waits for the checkout traces it names",
    )
    keys_file: Path | None = Field(default=None, description="API key store; default in data dir")
    seal: bool = Field(
        default=True,
        description="seal event content, latents, checkout traces and dead letters under "
        "per-item data keys (crypto-shredding: a purge destroys the keys); false = the same "
        "build without it, for cost comparisons",
    )
    api_replica: str = Field(
        default="",
        pattern=r"^[a-z0-9-]{0,32}$",
        description="a second (third, ...) API process on the same embedded data dir: its "
        "name. It keeps its own vector index, outbox and vector consumer group (suffixed "
        "with the name); empty = the first",
    )
    data_keys_file: Path | None = Field(
        default=None, description="data key store (SQLite); default <data_dir>/data-keys.sqlite"
    )
    data_keys_url: SecretStr | None = Field(
        default=None,
        description="data key store on PostgreSQL (`postgresql://user:password@host/db`), for "
        "processes on more than one machine; unset = the SQLite file",
    )
    outbox: bool = Field(
        default=True,
        description="POST /v1/events spools events (fsync) in <data_dir>/outbox before 2xx",
    )
    outbox_max_bytes: int = Field(default=1 << 30, ge=1, description="beyond: 503, retry later")
    outbox_tenant_share: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="the share of outbox_max_bytes one tenant's backlog may hold; beyond it "
        "that tenant alone gets 429 with Retry-After",
    )
    outbox_max_age_s: float = Field(
        default=300.0,
        gt=0,
        description="an accepted event older than this still in the outbox (not proved "
        "archived) makes `memstream status` unhealthy",
    )
    outbox_ack_wait_s: float = Field(
        default=5.0, gt=0, description="how long a request waits for Kafka once spooled"
    )
    # HTTP API limits, applied before routing, authentication and body parsing (413 / 408)
    api_max_body_bytes: int = Field(
        default=1 << 20, ge=1, description="request body limit of every route but ingest"
    )
    api_max_ingest_body_bytes: int = Field(
        default=64 << 20, ge=1, description="request body limit of POST /v1/events and /mcp"
    )
    api_header_timeout_s: float = Field(
        default=10.0, gt=0, description="a request's headers must be in this long after it starts"
    )
    api_body_timeout_s: float = Field(
        default=30.0, gt=0, description="longest pause inside a request body before it is refused"
    )
    api_body_deadline_s: float = Field(
        default=300.0, gt=0, description="the longest a whole request body may take to arrive"
    )
    api_body_min_rate: int = Field(
        default=16 << 10,
        ge=1,
        description="bytes per second a request body must average once its grace has passed",
    )
    api_body_grace_s: float = Field(
        default=10.0, gt=0, description="how long a body may arrive slower than the minimum rate"
    )
    api_tenant_ingest_concurrency: int = Field(
        default=8,
        ge=1,
        description="ingest requests (POST /v1/events) one tenant may have open at once; "
        "beyond: 429 with Retry-After",
    )
    # Longer than clients keep an idle connection (httpx: 5 s), so the client closes it first:
    # a server closing at the client's own expiry races the client's next request (reset).
    api_keepalive_s: int = Field(
        default=65, ge=1, description="how long an idle keep-alive connection is kept open"
    )
    consumer_session_timeout_ms: int = 6000
    # Fair share of the read routes between tenants (memstream.fairshare; 429 beyond it)
    read_limits: bool = Field(
        default=True, description="false: no per-tenant limits on the read routes"
    )
    read_tenant_concurrency: int = Field(
        default=4, ge=1, description="reads one tenant may have in flight at once"
    )
    read_tenant_share: float = Field(
        default=0.1,
        gt=0,
        description="CPU seconds of read work per second one tenant's budget refills",
    )
    read_tenant_burst_s: float = Field(
        default=0.2, gt=0, description="the most CPU seconds one tenant's read budget holds"
    )
    read_total_concurrency: int = Field(
        default=8, ge=1, description="reads in flight across tenants"
    )
    read_reserved_slots: int = Field(
        default=2,
        ge=0,
        description="of the total, slots only a tenant with no read in flight may take",
    )
    read_after_max_wait_s: float = Field(
        default=5.0,
        ge=0,
        le=60,
        description="longest a read given after= waits for the projections it reads; past it "
        "the answer carries a stale warning",
    )
    batch_size: int = Field(default=2000, ge=1)
    batch_wait_s: float = Field(default=0.05, gt=0)
    consumer_readahead_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description="what a tenant-fair consumer (sequencer, projectors) reads ahead at most",
    )
    fair_batch: int = Field(
        default=500, ge=1, description="a tenant-fair consumer's batch while tenants take turns"
    )
    log_level: str = "INFO"

    # summarize_recall (an LLM step: without a key it answers that it is disabled)
    llm_provider: str = Field(default="anthropic", description="memstream.summarize registry")
    llm_model: str = "claude-haiku-4-5"
    llm_timeout_s: float = Field(default=30.0, gt=0)
    summary_cache_ttl_s: float = Field(default=900.0, ge=0, description="0 = no reuse")
    producer_secret: SecretStr | None = Field(
        default=None,
        description="the secret the stack's own producers (the API, the workers) prove their "
        "raw records with; unset: the one kept in <data_dir>/producer-secret, made on first use",
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("MEMSTREAM_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
        description="the client also reads ANTHROPIC_BASE_URL itself",
    )

    def falkordb_secret(self) -> SecretStr | None:
        """The FalkorDB password: the setting, else the embedded stack's in the data dir."""
        if self.falkordb_password is not None:
            return self.falkordb_password
        return read_secret(self.data_dir / FALKORDB_PASSWORD_FILE)

    def resolved_keys_file(self) -> Path:
        """The key store path: explicit setting or ``<data_dir>/keys.json``."""
        return self.keys_file if self.keys_file is not None else self.data_dir / "keys.json"

    @property
    def data_keys_path(self) -> Path:
        """Where the data keys are kept: the setting or ``<data_dir>/data-keys.sqlite``."""
        if self.data_keys_file is not None:
            return self.data_keys_file
        return self.data_dir / "data-keys.sqlite"

    @property
    def archive_dir(self) -> Path:
        return self.data_dir / "archive"

    @property
    def outbox_dir(self) -> Path:
        """The API's outbox: each API replica of one data dir spools into its own."""
        return self.data_dir / self._per_api_replica("outbox")

    @property
    def vectors_dir(self) -> Path:
        """Where Qdrant Edge keeps the index: each API replica of one data dir holds its own."""
        return self.data_dir / self._per_api_replica("vectors")

    def api_replica_group(self, group: str) -> str:
        """A consumer group the API joins: a replica with an index of its own reads every
        partition into it, so it joins a group of its own."""
        return self._per_api_replica(group)

    def _per_api_replica(self, name: str) -> str:
        return f"{name}-{self.api_replica}" if self.api_replica else name
