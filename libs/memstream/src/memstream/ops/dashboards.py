"""The memstream dashboards: ``python -m memstream.ops.dashboards OUT_DIR`` writes them.

Pure: the same code always yields the same JSON, and a test holds the committed files in
``deploy/grafana/dashboards/`` to it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from memstream.ops.grafana import (
    UP_IS_GOOD,
    ZERO_IS_GOOD,
    Dashboard,
    Panel,
    Query,
    quantile,
    rate,
    ratio,
    render,
)

CHECKOUT_ROUTES = 'route=~"/v1/(checkout|recall|lineage).*"'
PROJECTORS = 'component=~"graph-projector|vector-projector"'
SPINE_GROUPS = 'group=~"memstream-sequencer|memstream-archiver"'
RETRO = 'component="retrospective"'


def overview() -> Dashboard:
    return Dashboard(
        uid="memstream-overview",
        title="memstream / Overview",
        question="Is memstream up, and is memory keeping up with what agents send?",
        panels=(
            Panel(
                "Processes up",
                "Prometheus scrape of every memstream process (1 = answering /metrics).",
                (Query('up{job=~"memstream-.*"}', "{{job}}"),),
                kind="stat",
                width=8,
                height=5,
                steps=UP_IS_GOOD,
            ),
            Panel(
                "Dependencies up",
                "Kafka metadata and graph-server probes, as seen by each prober (API, supervisor).",
                (Query("memstream_dependency_up", "{{component}} → {{dependency}}"),),
                kind="stat",
                width=8,
                height=5,
                steps=UP_IS_GOOD,
            ),
            Panel(
                "Alerts firing",
                "memstream alerts currently firing (see the alert table in the README).",
                (Query('sum(ALERTS{alertstate="firing"}) or vector(0)', "firing"),),
                kind="stat",
                width=8,
                height=5,
                steps=ZERO_IS_GOOD,
            ),
            Panel(
                "Events in → ledger",
                "Events accepted over HTTP vs events appended to the ledger (SDK events are "
                "counted in the client process, so the ledger line can be higher).",
                (
                    Query(rate("memstream_events_received_total"), "received (HTTP)"),
                    Query(rate("memstream_events_ledgered_total"), "ledgered"),
                ),
                unit="ops",
            ),
            Panel(
                "Dead letters",
                "Records sent to memory.dlq per second, by the component that gave up on them.",
                (
                    Query(
                        rate("memstream_events_dead_lettered_total", "component"), "{{component}}"
                    ),
                ),
                unit="ops",
            ),
            Panel(
                "Consumer lag by group",
                "Records behind the end of the topic, per consumer group.",
                (Query("sum by (group) (memstream_consumer_lag)", "{{group}}"),),
            ),
            Panel(
                "Freshness p95",
                "Ledger append → visible in the projection, 95th percentile (alert above 1 s).",
                (
                    Query(
                        quantile(0.95, "memstream_projection_freshness_seconds", "projection"),
                        "{{projection}}",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "Checkout p95",
                "Checkout latency inside the service, 95th percentile (alert above 50 ms).",
                (Query(quantile(0.95, "memstream_checkout_seconds"), "p95"),),
                unit="s",
            ),
            Panel(
                "API 5xx ratio",
                "Share of API requests answered with 5xx (alert above 5%).",
                (
                    Query(
                        ratio(
                            rate("memstream_http_request_seconds_count", where='status=~"5.."'),
                            rate("memstream_http_request_seconds_count"),
                        ),
                        "5xx",
                    ),
                ),
                unit="percentunit",
            ),
            Panel(
                "Resident memory",
                "RSS of every scraped memstream process.",
                (Query('process_resident_memory_bytes{job=~"memstream-.*"}', "{{job}}"),),
                unit="bytes",
            ),
            Panel(
                "CPU",
                "CPU seconds per second of every scraped memstream process.",
                (
                    Query(
                        rate("process_cpu_seconds_total", "job", 'job=~"memstream-.*"'), "{{job}}"
                    ),
                ),
                unit="percentunit",
            ),
            Panel(
                "Worker restarts (1 h)",
                "Restarts by the embedded stack's supervisor (elsewhere the orchestrator restarts "
                "containers; look at TargetDown instead).",
                (
                    Query(
                        "sum by (child) (increase(memstream_child_restarts_total[1h]))",
                        "{{child}}",
                    ),
                ),
            ),
            *_consumer_health_panels(),
        ),
    )


def _consumer_health_panels() -> tuple[Panel, ...]:
    """Each consumer loop: restarts in its process, progress, waiting for a store."""
    return (
        Panel(
            "Consumer loop restarts (1 h)",
            "Consumer loops that died (a bug, a broker failure) or could not start and were "
            "started again inside their process (projection versions); alert: more than 3 in "
            "15 min.",
            (
                Query(
                    "sum by (group) (increase(memstream_consumer_restarts_total[1h]))", "{{group}}"
                ),
            ),
        ),
        Panel(
            "Since last commit",
            "Seconds since each consumer loop last committed (since it started, before its "
            "first commit). An idle loop has nothing to commit; with lag (Consumer lag by "
            "group) a growing value is a stall: alert above 120 s for 5 min.",
            (
                Query(
                    "max by (group) (time() - memstream_consumer_last_commit_timestamp_seconds)",
                    "{{group}}",
                ),
            ),
            unit="s",
        ),
        Panel(
            "Consumers waiting for a store",
            "1 while a loop retries its batch because the graph or vector store is "
            "unavailable (nothing is dead-lettered meanwhile).",
            (Query("max by (group) (memstream_consumer_waiting)", "{{group}}"),),
            kind="stat",
            steps=ZERO_IS_GOOD,
        ),
        Panel(
            "Records committed by group",
            "Offsets each consumer loop committed past per second: its progress.",
            (Query(rate("memstream_consumer_committed_total", "group"), "{{group}}"),),
            unit="ops",
        ),
        Panel(
            "Read ahead by group",
            "Bytes the sequencer and the projectors have read ahead to take turns by tenant "
            "and not yet processed; at MEMSTREAM_CONSUMER_READAHEAD_BYTES (64 MiB) the group "
            "pauses its partitions until it is below half.",
            (Query("max by (group) (memstream_consumer_readahead_bytes)", "{{group}}"),),
            unit="bytes",
        ),
        Panel(
            "Tenants taking turns by group",
            "Tenants with records in each group's read-ahead; above 1, batches are built in "
            "turns of at most MEMSTREAM_FAIR_BATCH records.",
            (Query("max by (group) (memstream_consumer_queued_tenants)", "{{group}}"),),
        ),
    )


def ingestion() -> Dashboard:
    return Dashboard(
        uid="memstream-ingestion",
        title="memstream / Ingestion & ledger",
        question="Are events getting in, sequenced into the ledger and archived, and what is "
        "refused or dead-lettered?",
        panels=(
            Panel(
                "Events received",
                "Events accepted by an ingest surface, before producing to memory.events.raw.",
                (Query(rate("memstream_events_received_total", "component"), "{{component}}"),),
                unit="ops",
            ),
            Panel(
                "Events refused",
                "Events refused at ingest by reason: invalid (422), tenant (403), malformed, "
                "too_large (413: over the body limit or the broker's record limit), backlog "
                "(429: the tenant's share of the outbox is full), delivery (503).",
                (
                    Query(
                        rate("memstream_events_rejected_total", "component, reason"),
                        "{{component}} {{reason}}",
                    ),
                ),
                unit="ops",
            ),
            Panel(
                "Records produced by topic",
                "Delivery reports received, per producing component and topic.",
                (
                    Query(
                        rate("memstream_events_produced_total", "component, topic"),
                        "{{component}} → {{topic}}",
                    ),
                ),
                unit="ops",
            ),
            Panel(
                "Ledger appends and duplicates",
                "Events the sequencer appended vs resends it dropped by event id.",
                (
                    Query(rate("memstream_events_ledgered_total"), "ledgered"),
                    Query(rate("memstream_events_duplicate_total"), "duplicates dropped"),
                ),
                unit="ops",
            ),
            Panel(
                "Ledger appends by tenant (top 10)",
                "Per-tenant rate; the first 100 tenants a sequencer sees keep their name, later "
                "ones share _other (memstream ledger stats has exact counts).",
                (
                    Query(
                        f"topk(10, {rate('memstream_events_ledgered_total', 'tenant')})",
                        "{{tenant}}",
                    ),
                ),
                unit="ops",
            ),
            Panel(
                "Dead letters by source topic",
                "Records sent to memory.dlq: reason, raw bytes and source offset are in each.",
                (
                    Query(
                        rate("memstream_events_dead_lettered_total", "component, topic"),
                        "{{component}} from {{topic}}",
                    ),
                ),
                unit="ops",
            ),
            Panel(
                "Sequencer and archiver lag per partition",
                "Records behind the end of memory.events.raw (sequencer) and memory.ledger "
                "(archiver), per partition.",
                (
                    Query(
                        f"sum by (group, partition) (memstream_consumer_lag{{{SPINE_GROUPS}}})",
                        "{{group}} p{{partition}}",
                    ),
                ),
            ),
            Panel(
                "Archiver lag",
                "Seconds from ledger append to fsync for the oldest entry of the last archived "
                "batch.",
                (Query("max by (component) (memstream_archive_lag_seconds)", "{{component}}"),),
                unit="s",
            ),
            Panel(
                "Entries archived",
                "Ledger entries fsync'd to archive segments per second.",
                (Query(rate("memstream_entries_archived_total"), "archived"),),
                unit="ops",
            ),
            Panel(
                "Batch latency p95",
                "Consume → handle → write → commit of one batch, by worker.",
                (
                    Query(
                        quantile(0.95, "memstream_batch_seconds", "component"),
                        "{{component}}",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "Mean batch size",
                "Records per consumer batch; near the batch size limit means the worker is behind.",
                (
                    Query(
                        f"{rate('memstream_batch_records_sum', 'component')} / "
                        f"{rate('memstream_batch_records_count', 'component')}",
                        "{{component}}",
                    ),
                ),
            ),
            Panel(
                "HTTP ingest p95",
                "POST /v1/events latency until Kafka acknowledged every event.",
                (
                    Query(
                        quantile(
                            0.95, "memstream_http_request_seconds", where='route="/v1/events"'
                        ),
                        "p95",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "Outbox backlog",
                "Accepted events spooled in the API's outbox and not yet proved archived, and "
                "those the broker refused for good that the DLQ does not have yet (status is "
                "unhealthy while any are).",
                (
                    Query("sum by (component) (memstream_outbox_events)", "{{component}} held"),
                    Query(
                        "sum by (component) (memstream_outbox_undeliverable)",
                        "{{component}} undeliverable",
                    ),
                ),
            ),
            Panel(
                "Outbox oldest event",
                "Age of the oldest accepted event the outbox still holds; past "
                "MEMSTREAM_OUTBOX_MAX_AGE_S status is unhealthy.",
                (
                    Query(
                        "max by (component) (memstream_outbox_oldest_age_seconds)", "{{component}}"
                    ),
                ),
                unit="s",
            ),
            Panel(
                "Outbox re-sends and dead letters",
                "Events sent again from the outbox (a broker restart, a failed delivery) and "
                "events moved to the DLQ because the broker refused them for good.",
                (
                    Query(
                        rate("memstream_outbox_resent_total", "component"), "{{component}} re-sent"
                    ),
                    Query(
                        rate("memstream_outbox_dead_lettered_total", "component"),
                        "{{component}} dead-lettered",
                    ),
                ),
                unit="ops",
            ),
            Panel(
                "Records too large for Kafka",
                "Ledger entries (sequencer: dead-lettered) and latent artifacts (latent "
                "builder: not sent) that Kafka refused for their size.",
                (
                    Query(
                        rate("memstream_records_too_large_total", "component, topic"),
                        "{{component}} to {{topic}}",
                    ),
                ),
                unit="ops",
                width=24,
            ),
        ),
    )


def projections() -> Dashboard:
    return Dashboard(
        uid="memstream-projections",
        title="memstream / Projections & freshness",
        question="How fresh are the graph and vector views, per version, and are side-by-side "
        "builds (replays) keeping up?",
        panels=(
            Panel(
                "Freshness p50 / p95 by version",
                "Ledger append → visible in the projection.",
                (
                    Query(
                        quantile(
                            0.5, "memstream_projection_freshness_seconds", "projection, version"
                        ),
                        "p50 {{projection}} {{version}}",
                    ),
                    Query(
                        quantile(
                            0.95, "memstream_projection_freshness_seconds", "projection, version"
                        ),
                        "p95 {{projection}} {{version}}",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "Projection throughput by version",
                "Ledger events written per second into each projection version.",
                (
                    Query(
                        rate("memstream_projected_events_total", "projection, version"),
                        "{{projection}} {{version}}",
                    ),
                ),
                unit="ops",
            ),
            Panel(
                "Projection lag by group",
                "Ledger records each version's consumer group still has to project "
                "(memstream-graph-<version>, memstream-vector-<version>).",
                (
                    Query(
                        f"sum by (group) (memstream_consumer_lag{{{PROJECTORS}}})",
                        "{{group}}",
                    ),
                ),
            ),
            Panel(
                "Vector points by version",
                "Points in each version's collection (all tenants); equals the ledger when "
                "caught up.",
                (Query("max by (version) (memstream_projection_points)", "{{version}}"),),
            ),
            Panel(
                "Vector index build (embedded)",
                "Points not yet in the HNSW index (queries scan them exhaustively) and whether "
                "a build is running; a build starts when writes pause and uses every core.",
                (
                    Query(
                        "max by (version) (memstream_vector_unoptimized_points)",
                        "unindexed {{version}}",
                    ),
                    Query("max by (version) (memstream_vector_optimizing)", "building {{version}}"),
                ),
            ),
            Panel(
                "Projector batch latency p95",
                "One batch: decode, extract, write to the store, commit.",
                (
                    Query(
                        quantile(0.95, "memstream_batch_seconds", "component", PROJECTORS),
                        "{{component}}",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "Projection dead letters",
                "Ledger entries a projector could not project (sent to memory.dlq).",
                (
                    Query(
                        rate("memstream_events_dead_lettered_total", "component", PROJECTORS),
                        "{{component}}",
                    ),
                ),
                unit="ops",
            ),
        ),
    )


def checkout() -> Dashboard:
    return Dashboard(
        uid="memstream-checkout",
        title="memstream / Checkout quality & latency",
        question="How fast are checkouts, how big are packets, and how often can memory answer?",
        panels=(
            Panel(
                "Checkouts per second",
                "Packets built by the checkout service.",
                (Query(rate("memstream_checkout_seconds_count"), "checkouts"),),
                unit="ops",
                width=8,
            ),
            Panel(
                "Answered from memory",
                "Share of packets with answerability answer_from_memory.",
                (
                    Query(
                        ratio(
                            rate(
                                "memstream_checkout_answerability_total",
                                where='answerability="answer_from_memory"',
                            ),
                            rate("memstream_checkout_answerability_total"),
                        ),
                        "answered",
                    ),
                ),
                unit="percentunit",
                width=8,
            ),
            Panel(
                "Checkout traces dropped",
                "Traces to memory.checkouts dropped because the producer queue was full.",
                (Query(rate("memstream_records_dropped_total", "topic"), "{{topic}}"),),
                unit="ops",
                width=8,
            ),
            Panel(
                "Checkout latency",
                "Inside the service: plan, retrieval lanes, synthesis, assembly.",
                tuple(
                    Query(quantile(q, "memstream_checkout_seconds"), f"p{round(q * 100)}")
                    for q in (0.5, 0.95, 0.99)
                ),
                unit="s",
            ),
            Panel(
                "Packet tokens",
                "Tokens used by returned packets (never above the request's max_tokens).",
                tuple(
                    Query(quantile(q, "memstream_packet_tokens"), f"p{round(q * 100)}")
                    for q in (0.5, 0.95)
                ),
            ),
            Panel(
                "Answerability",
                "Packets per second by answerability: answer_from_memory, refresh_recommended, "
                "ask_user, no_memory.",
                (
                    Query(
                        rate("memstream_checkout_answerability_total", "answerability"),
                        "{{answerability}}",
                    ),
                ),
                unit="ops",
            ),
            Panel(
                "Read API p95 by route",
                "HTTP latency of checkout, recall and lineage, including serialisation.",
                (
                    Query(
                        quantile(0.95, "memstream_http_request_seconds", "route", CHECKOUT_ROUTES),
                        "{{route}}",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "Read API requests by status",
                "Requests per second to checkout, recall and lineage by route and status.",
                (
                    Query(
                        rate(
                            "memstream_http_request_seconds_count", "route, status", CHECKOUT_ROUTES
                        ),
                        "{{route}} {{status}}",
                    ),
                ),
                unit="ops",
            ),
            Panel(
                "Reads refused by the fair share",
                "429 answers per second on checkout, recall, search and summarize_recall (MCP "
                "tools included) by route and reason: concurrency = the tenant's reads in "
                "flight, budget = its share of read time spent, busy = every read slot taken; "
                "and the reads in flight across tenants.",
                (
                    Query(
                        rate("memstream_reads_throttled_total", "route, reason"),
                        "{{route}} {{reason}}",
                    ),
                    Query("sum(memstream_reads_in_flight)", "in flight"),
                ),
                unit="short",
                width=24,
            ),
            Panel(
                "Reads after a write (read your writes)",
                "Reads given after= a write's position: p95 of how long they waited for the "
                "live graph and vectors to apply it, by route; and answers per second that "
                "carried a stale warning (the bound passed, or waiting could not help), by "
                "route and the projection that had not applied it.",
                (
                    Query(
                        quantile(0.95, "memstream_read_after_wait_seconds", "route"),
                        "p95 wait {{route}}",
                    ),
                    Query(
                        rate("memstream_read_after_stale_total", "route, projection"),
                        "stale {{route}} {{projection}}",
                    ),
                ),
                unit="short",
                width=24,
            ),
            Panel(
                "API 5xx ratio",
                "Share of all API requests answered with 5xx (503: Kafka or no live projection).",
                (
                    Query(
                        ratio(
                            rate("memstream_http_request_seconds_count", where='status=~"5.."'),
                            rate("memstream_http_request_seconds_count"),
                        ),
                        "5xx",
                    ),
                ),
                unit="percentunit",
                width=24,
            ),
            *_summarize_panels(),
            *_purge_panels(),
        ),
    )


def _purge_panels() -> tuple[Panel, ...]:
    """Forgetting: purges asked, what each store removed, and purges still unfinished."""
    return (
        Panel(
            "Purges",
            "Purges asked of the API per second by outcome (dry_run, complete, incomplete = "
            "a store had not obeyed the tombstone when the request answered), and tombstones "
            "applied by each store.",
            (
                Query(rate("memstream_purges_total", "outcome"), "asked {{outcome}}"),
                Query(rate("memstream_purges_applied_total", "store"), "applied {{store}}"),
            ),
            unit="ops",
            width=8,
        ),
        Panel(
            "Items purged",
            "Items removed per second by store and kind (events, facts, entities, points, "
            "artifacts, archive lines).",
            (
                Query(
                    rate("memstream_purge_items_removed_total", "store, kind"),
                    "{{store}} {{kind}}",
                ),
            ),
            unit="short",
            width=8,
        ),
        Panel(
            "Oldest unfinished purge",
            "Age of the oldest purge some store has not obeyed yet (alert above 60 s).",
            (Query("max(memstream_purge_pending_oldest_seconds)", "oldest pending"),),
            unit="s",
            width=8,
        ),
    )


def _summarize_panels() -> tuple[Panel, ...]:
    """summarize_recall: the LLM calls it makes and what its callers save."""
    return (
        Panel(
            "LLM calls by outcome",
            "Provider calls per second by provider, model and outcome (ok, error: network, "
            "timeout, 4xx/5xx; alert: over 20 % errors for 10 min). Cache hits make no call.",
            (
                Query(
                    rate("memstream_llm_calls_total", "provider, model, outcome"),
                    "{{provider}} {{model}} {{outcome}}",
                ),
            ),
            unit="ops",
            width=8,
        ),
        Panel(
            "LLM call latency",
            "Provider call latency, errors included.",
            tuple(
                Query(quantile(q, "memstream_llm_call_seconds"), f"p{round(q * 100)}")
                for q in (0.5, 0.95)
            ),
            unit="s",
            width=8,
        ),
        Panel(
            "LLM tokens",
            "Tokens per second the provider reported: in = prompt (the recalled memories), "
            "out = the summaries written.",
            (Query(rate("memstream_llm_tokens_total", "direction"), "{{direction}}"),),
            unit="short",
            width=8,
        ),
        Panel(
            "Summary cache hit rate",
            "Share of summarize_recall calls answered from the summary cache (same query, "
            "tenant, top-k ids, model and budget within the TTL).",
            (
                Query(
                    ratio(
                        rate("memstream_summarize_cache_total", where='result="hit"'),
                        rate("memstream_summarize_cache_total"),
                    ),
                    "hit rate",
                ),
            ),
            unit="percentunit",
            width=8,
        ),
        Panel(
            "Tokens saved vs raw recall",
            "Per second: tokens of the recalled candidates' texts (what raw recall returns) "
            "minus tokens of the summaries returned instead, under the packet tokenizer.",
            (
                Query(
                    f"{rate('memstream_summarize_raw_tokens_total')} "
                    f"- {rate('memstream_summarize_summary_tokens_total')}",
                    "saved",
                ),
            ),
            unit="short",
            width=8,
        ),
        Panel(
            "Unsupported citations",
            "Unsupported entries per second: a summary sentence with no citation, or a citation "
            "of an id that was not recalled; dropped from the answer and reported in its "
            "unsupported list.",
            (Query(rate("memstream_summarize_unsupported_citations_total"), "unsupported"),),
            unit="ops",
            width=8,
        ),
    )


def _learning_panels() -> tuple[Panel, ...]:
    """What the pass makes of outcomes, and what it writes back."""
    return (
        Panel(
            "Outcomes by result",
            "task.outcome entries settled per second: bound to their checkouts, late (bound "
            "after the grace with the traces that existed), unbound (no trace: the agent passed "
            "neither task_id to checkout nor checkout_ids), ignored (abandoned, partial without "
            "a score).",
            (Query(rate("memstream_retrospective_outcomes_total", "result"), "{{result}}"),),
            unit="ops",
        ),
        Panel(
            "Outcomes bound",
            "Share of the outcomes the pass could learn from that it tied to a checkout.",
            (
                Query(
                    ratio(
                        rate(
                            "memstream_retrospective_outcomes_total", where='result=~"bound|late"'
                        ),
                        rate("memstream_retrospective_outcomes_total", where='result!="ignored"'),
                    ),
                    "bound",
                ),
            ),
            unit="percentunit",
            width=6,
        ),
        Panel(
            "Invalidation proposals (1 h)",
            "memory.invalidate proposals (review_status proposed) for memories blamed by 3 or "
            "more failed tasks, failing more often than succeeding; they change nothing until "
            "a reviewer accepts them.",
            (
                Query(
                    "sum(increase(memstream_invalidation_proposals_total[1h]))",
                    "proposals",
                ),
            ),
            kind="stat",
            width=6,
        ),
        Panel(
            "Credit and blame",
            "Memories credited (success) or blamed (failure) per second; used = named by the "
            "agent in used_ids (certainty 1), spread = over a packet's answer support "
            "(certainty 1/n, recorded in the feedback).",
            (
                Query(
                    rate("memstream_retrospective_assignments_total", "kind, basis"),
                    "{{kind}} {{basis}}",
                ),
            ),
            unit="ops",
        ),
        Panel(
            "Feedback events by source",
            "memory.feedback events produced per second: retrospective (the pass) and explicit "
            "(POST /v1/feedback, counted at the API).",
            (Query(rate("memstream_feedback_events_total", "source"), "{{source}}"),),
            unit="ops",
        ),
    )


def _keeping_up_panels() -> tuple[Panel, ...]:
    """Whether the pass keeps up, and what it holds."""
    return (
        Panel(
            "Retrospective lag",
            "From an outcome's ledger append to the pass settling it, including the wait for "
            "a checkout trace still in flight (alert: p95 above 2 min).",
            tuple(
                Query(quantile(q, "memstream_retrospective_lag_seconds"), f"p{round(q * 100)}")
                for q in (0.5, 0.95)
            ),
            unit="s",
        ),
        Panel(
            "Consumer lag",
            "Records of memory.ledger and memory.checkouts the memstream-retrospective group "
            "has not committed; the ledger is not committed past an outcome that waits.",
            (
                Query(
                    'sum by (topic) (memstream_consumer_lag{group="memstream-retrospective"})',
                    "{{topic}}",
                ),
            ),
        ),
        Panel(
            "Waiting outcomes and traces held",
            "Outcomes waiting for the checkout traces they name, and the traces in the pass's "
            "table (rebuilt from memory.checkouts on every start).",
            (
                Query(f"max(memstream_retrospective_waiting_outcomes{{{RETRO}}})", "waiting"),
                Query(f"max(memstream_retrospective_traces{{{RETRO}}})", "traces"),
            ),
        ),
        Panel(
            "Feedback API p95",
            "POST /v1/feedback latency until the event is durable (outbox) or acknowledged.",
            (
                Query(
                    quantile(0.95, "memstream_http_request_seconds", where='route="/v1/feedback"'),
                    "p95",
                ),
            ),
            unit="s",
        ),
        Panel(
            "Retrospective dead letters",
            "Malformed ledger entries or checkout traces the pass sent to memory.dlq.",
            (
                Query(
                    rate("memstream_events_dead_lettered_total", "topic", RETRO),
                    "from {{topic}}",
                ),
            ),
            unit="ops",
            width=24,
        ),
    )


def _latent_panels() -> tuple[Panel, ...]:
    """What the latent builder writes, and whether it keeps up with the ledger."""
    return (
        Panel(
            "Latent artifacts built by type",
            "Artifacts sent to memory.latents per second: an episode per session, a subject's "
            "current preferences, procedures and failure modes per goal, retrieval policy per "
            "question family. A group whose inputs did not change is not rebuilt.",
            (Query(rate("memstream_latent_artifacts_built_total", "type"), "{{type}}"),),
            unit="ops",
        ),
        Panel(
            "Latent artifacts made stale by type",
            "Artifacts superseded per second (a session grew, a preference changed): they get "
            "stale_at and are never used unless asked for.",
            (Query(rate("memstream_latent_artifacts_stale_total", "type"), "{{type}}"),),
            unit="ops",
        ),
        Panel(
            "Current latent artifacts",
            "Artifacts that are not stale, per type, as the builder holds them.",
            (
                Query(
                    "sum by (type) (memstream_latent_artifacts_current)",
                    "{{type}}",
                ),
            ),
        ),
        Panel(
            "Latent builder lag",
            "From a ledger entry's append to the artifacts it changed being sent (alert: p95 "
            "above 1 min); an open session is built when the ledger pauses, at least every 5 s.",
            tuple(
                Query(quantile(q, "memstream_latent_builder_lag_seconds"), f"p{round(q * 100)}")
                for q in (0.5, 0.95)
            ),
            unit="s",
        ),
        Panel(
            "Latent builder consumer lag",
            "Ledger records the memstream-latents group has not committed.",
            (
                Query(
                    'sum(memstream_consumer_lag{group="memstream-latents"})',
                    "memory.ledger",
                ),
            ),
            width=24,
        ),
    )


def retrospective() -> Dashboard:
    return Dashboard(
        uid="memstream-retrospective",
        title="memstream / Retrospective & latent builds",
        question="Does memory learn from use: are task outcomes tied to their checkouts, what "
        "credit and blame do memories get, does the retrospective pass keep up, and does the "
        "latent builder turn the ledger into current episodes, preferences and procedures?",
        panels=_learning_panels() + _keeping_up_panels() + _latent_panels(),
    )


def dashboards() -> tuple[Dashboard, ...]:
    return (overview(), ingestion(), projections(), checkout(), retrospective())


def write_all(out_dir: Path) -> list[Path]:
    """Write every dashboard into ``out_dir``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for dash in dashboards():
        path = out_dir / dash.filename
        path.write_text(render(dash), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: python -m memstream.ops.dashboards OUT_DIR")
    for path in write_all(Path(args[0])):
        print(path)


if __name__ == "__main__":
    main()
