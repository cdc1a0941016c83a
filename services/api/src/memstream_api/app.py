"""The FastAPI application factory; clients are created in the lifespan, never at import."""

from __future__ import annotations

import gc
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from memstream.forget.metrics import PendingPurges
from memstream.graph.port import GraphUnavailable
from memstream.keys import KeyStore
from memstream.ledger.opening import reading_keys
from memstream.metrics import API_REFUSED, UP
from memstream.ops.health import DependencyProbe, dependency_checks
from memstream.projection.embedded import vector_manager
from memstream.settings import Settings
from memstream.shred.sealer import EventSealer
from memstream.shred.traces import TraceSealer
from memstream.vectors.port import IndexUnavailable
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.concurrency import run_in_threadpool

from memstream_api import (
    checkout_routes,
    errors,
    explorer,
    fair_share,
    feedback,
    ingest,
    invalidate_routes,
    latent_routes,
    purge_routes,
    read_after,
    summarize_routes,
)
from memstream_api.broker import BrokerFollower
from memstream_api.http_metrics import HttpMetrics
from memstream_api.limits import BodyGuard, Pace
from memstream_api.mcp_endpoint import PATH as MCP_PATH
from memstream_api.mcp_endpoint import mount_mcp
from memstream_api.outbox import Outbox
from memstream_api.positions import WritePositions
from memstream_api.producing import BatchProducer
from memstream_api.wiring import build_checkout

COMPONENT = "api"
GC_THRESHOLDS = (50_000, 20, 20)  # Python's default: (700, 10, 10)
DESCRIPTION = (
    "memstream HTTP API. Authenticate with `Authorization: Bearer <key>`; the key decides "
    "the tenant. Errors carry a human-readable `detail`."
)


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    reason: str | None = None


def create_app(
    settings: Settings,
    bootstrap: str,
    *,
    max_batch: int = ingest.MAX_BATCH,
    producer_overrides: dict[str, Any] | None = None,
    project_vectors: bool = False,
) -> FastAPI:
    """Build the API for ``settings`` producing to the Kafka cluster at ``bootstrap``.

    With ``project_vectors`` the process also runs the vector projection into its
    in-process Qdrant Edge index (the embedded stack), which checkout reads.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Always open: purges destroy keys and sign tombstones even with sealing off.
        app.state.data_keys = reading_keys(settings)
        app.state.positions = WritePositions(app.state.data_keys, settings.data_dir)
        sealer = EventSealer(app.state.data_keys if settings.seal else None)
        producer = BatchProducer(
            bootstrap, COMPONENT, sealer, settings.max_record_bytes, **(producer_overrides or {})
        )
        await run_in_threadpool(producer.refresh_limit)
        app.state.producer = producer
        outbox = None
        if settings.outbox:
            outbox = Outbox(
                settings.outbox_dir, bootstrap, producer, settings.outbox_max_bytes,
                tenant_share=settings.outbox_tenant_share,
            ).start()  # fmt: skip
        app.state.outbox = outbox
        manager, thread = None, None
        if project_vectors:
            manager = vector_manager(settings, bootstrap)
            # Each version's index opens before the API answers (the supervisor holds the
            # port meanwhile): a read right after `memstream up` finds it instead of a 503.
            await run_in_threadpool(manager.sync)
            thread = threading.Thread(target=manager.run_forever, name="vector-projection")
            thread.start()
        app.state.vectors = manager
        follower = BrokerFollower(settings.data_dir, producer, outbox, manager).start()
        app.state.checkout = build_checkout(
            settings, manager, producer, TraceSealer(app.state.data_keys if settings.seal else None)
        )
        app.state.summarizer = summarize_routes.build_summarizer(settings, app.state.checkout)
        app.state.read_after_watch = read_after.KafkaWatch(bootstrap).start()
        # The API's own view of Kafka and the graph: the distributed stack has no supervisor.
        probe = DependencyProbe(COMPONENT, dependency_checks(settings, bootstrap)).start()
        UP.labels(component=COMPONENT).set(1)
        # What start-up built (modules, the embedder, the tokenizer, store clients) lives as
        # long as the process: out of the cyclic collector, whose full passes over it stopped
        # every thread, requests included, for 0.2-0.8 s at a time (measured under a flood of
        # heavy checkouts). Rarer passes over what is left: garbage is freed by reference
        # counting; the collector only finds cycles.
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        try:
            async with mcp_sessions:
                yield
        finally:
            UP.labels(component=COMPONENT).set(0)
            await run_in_threadpool(probe.stop)
            await run_in_threadpool(app.state.read_after_watch.stop)
            await run_in_threadpool(follower.stop)
            if manager is not None and thread is not None:
                manager.stopping.set()
                await run_in_threadpool(thread.join, 60)
            if outbox is not None:
                await run_in_threadpool(outbox.stop)
            await run_in_threadpool(producer.close)

    app = FastAPI(
        title="memstream",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        responses=errors.LIMITS,
    )
    app.state.settings = settings
    app.state.bootstrap = bootstrap
    app.state.keys = KeyStore.from_settings(settings)
    app.state.max_batch = max_batch
    app.state.ingest_slots = ingest.IngestSlots(settings.api_tenant_ingest_concurrency)
    ingest_limit = settings.api_max_ingest_body_bytes
    app.add_middleware(
        BodyGuard,
        default=settings.api_max_body_bytes,
        limits={ingest.PATH: ingest_limit, MCP_PATH: ingest_limit},
        pace=Pace(
            stall_s=settings.api_body_timeout_s,
            deadline_s=settings.api_body_deadline_s,
            min_rate=settings.api_body_min_rate,
            grace_s=settings.api_body_grace_s,
        ),
        on_refused=lambda reason: API_REFUSED.labels(COMPONENT, reason).inc(),
        on_too_large=ingest.count_too_large,
    )
    app.add_middleware(HttpMetrics, component=COMPONENT)  # outermost: it times refusals too
    ingest.init_metrics()
    feedback.init_metrics()
    invalidate_routes.init_metrics()
    read_after.init_metrics()
    app.include_router(ingest.router)
    app.include_router(checkout_routes.router)
    app.include_router(feedback.router)
    app.include_router(invalidate_routes.router)
    app.include_router(latent_routes.router)
    app.include_router(explorer.router)
    app.include_router(summarize_routes.router)
    app.include_router(purge_routes.router)
    fair_share.limit_reads(app, settings, COMPONENT)
    app.state.pending_purges = PendingPurges(COMPONENT)
    mcp_sessions = mount_mcp(app, settings.api_host, COMPONENT, ingest_limit)

    app.add_exception_handler(GraphUnavailable, errors.store_down)
    app.add_exception_handler(IndexUnavailable, errors.store_down)
    app.add_exception_handler(RequestValidationError, errors.request_invalid)

    @app.get(
        "/healthz",
        tags=["ops"],
        summary="Liveness and Kafka reachability",
        response_model=Health,
        responses={503: {"model": Health, "description": "Kafka is unreachable"}},
    )
    async def healthz() -> JSONResponse:
        producer: BatchProducer = app.state.producer
        problem = await run_in_threadpool(producer.reachable)
        if problem is not None:
            return JSONResponse({"status": "unavailable", "reason": problem}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get(
        "/metrics",
        tags=["ops"],
        summary="Prometheus metrics",
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    def metrics() -> Response:
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    def openapi() -> dict[str, Any]:
        # The ingest body is read raw (for whole-batch errors), so its models are added here.
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            _, defs = models_json_schema(
                [(ingest.EventBatch, "validation")],
                ref_template="#/components/schemas/{model}",
            )
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(defs.get("$defs", {}))
            # One event: the union of the typed models, named for the request body's oneOf.
            components["EventIn"] = components["EventBatch"]["properties"]["events"].pop("items")
            components["EventBatch"]["properties"]["events"]["items"] = {
                "$ref": "#/components/schemas/EventIn"
            }
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
