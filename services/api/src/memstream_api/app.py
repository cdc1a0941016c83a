"""The FastAPI application factory; clients are created in the lifespan, never at import."""

from __future__ import annotations

import gc
import threading
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from memstream.forget.metrics import PendingPurges
from memstream.graph.port import GraphUnavailable
from memstream.intake import Intake
from memstream.intake.outbox import Outbox
from memstream.intake.parse import MAX_BATCH, EventBatch
from memstream.intake.positions import WritePositions
from memstream.intake.producer import BatchProducer
from memstream.keys import KeyStore, LastUsed
from memstream.ledger.opening import reading_keys
from memstream.metrics import API_REFUSED, UP
from memstream.ops.health import DependencyProbe, dependency_checks
from memstream.projection.embedded import vector_manager
from memstream.projection.live import open_live_stores
from memstream.projection.purge import PurgeListeners
from memstream.projection.runner import ProjectionManager
from memstream.proof import Prover, producer_secret
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
    producer_routes,
    purge_routes,
    read_after,
    summarize_routes,
    traces,
)
from memstream_api.broker import BrokerFollower
from memstream_api.context import ApiContext, Serving, attach
from memstream_api.http_metrics import HttpMetrics
from memstream_api.limits import BodyGuard, Pace
from memstream_api.mcp_endpoint import PATH as MCP_PATH
from memstream_api.mcp_endpoint import mount_mcp
from memstream_api.media import UNSUPPORTED, JsonOnly
from memstream_api.offsets_watch import KafkaWatch
from memstream_api.slots import IngestSlots
from memstream_api.wiring import build_checkout, build_forget, tombstone_listener

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
    max_batch: int = MAX_BATCH,
    producer_overrides: dict[str, Any] | None = None,
    project_vectors: bool = False,
) -> FastAPI:
    """Build the API for ``settings`` producing to the Kafka cluster at ``bootstrap``.

    With ``project_vectors`` the process also runs the vector projection into its
    in-process Qdrant Edge index (the embedded stack), which checkout reads.
    """
    ctx = ApiContext(
        settings=settings,
        bootstrap=bootstrap,
        component=COMPONENT,
        keys=KeyStore.from_settings(settings),
        last_used=LastUsed(settings.resolved_keys_file()),
        max_batch=max_batch,
        ingest_slots=IngestSlots(settings.api_tenant_ingest_concurrency),
        pending_purges=PendingPurges(COMPONENT),
        fair_share=fair_share.read_share(settings, COMPONENT),
    )
    opening = _Opening(ctx, producer_overrides or {}, project_vectors)
    app = FastAPI(
        title="memstream",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=opening.lifespan,
        responses=errors.LIMITS,
    )
    attach(app, ctx)
    _guard(app, settings)
    _routes(app)
    opening.mcp_sessions = mount_mcp(
        app, settings.api_host, COMPONENT, settings.api_max_ingest_body_bytes
    )
    _ops_routes(app, ctx)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


class _Opening:
    """The lifespan: open what serving needs, close it in reverse at shutdown."""

    def __init__(
        self, ctx: ApiContext, producer_overrides: dict[str, Any], project_vectors: bool
    ) -> None:
        self.ctx = ctx
        self.producer_overrides = producer_overrides
        self.project_vectors = project_vectors
        self.mcp_sessions: AbstractAsyncContextManager[Any] | None = None

    @asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            self.ctx.serve(await self._open(stack))
            probe = DependencyProbe(
                COMPONENT, dependency_checks(self.ctx.settings, self.ctx.bootstrap)
            ).start()
            stack.push_async_callback(run_in_threadpool, probe.stop)
            UP.labels(component=COMPONENT).set(1)
            stack.callback(UP.labels(component=COMPONENT).set, 0)
            # What start-up built (modules, the embedder, the tokenizer, store clients) lives
            # as long as the process: out of the cyclic collector, whose full passes over it
            # stopped every thread, requests included, for 0.2-0.8 s at a time (measured
            # under a flood of heavy checkouts). Rarer passes over what is left: garbage is
            # freed by reference counting; the collector only finds cycles.
            gc.freeze()
            gc.set_threshold(*GC_THRESHOLDS)
            assert self.mcp_sessions is not None  # create_app mounted MCP
            async with self.mcp_sessions:
                yield
            self.ctx.serve(None)

    async def _open(self, stack: AsyncExitStack) -> Serving:
        """Keys, producer, outbox, the vector projection, checkout, summarize and forget;
        each one's closing pushed on ``stack``."""
        settings, bootstrap = self.ctx.settings, self.ctx.bootstrap
        # Always open: purges destroy keys and sign tombstones even with sealing off.
        data_keys = reading_keys(settings)
        sealing = data_keys if settings.seal else None
        prover = Prover.internal(await run_in_threadpool(producer_secret, settings))
        producer = BatchProducer(
            bootstrap, COMPONENT, EventSealer(sealing), settings.max_record_bytes, prover,
            **self.producer_overrides,
        )  # fmt: skip
        await run_in_threadpool(producer.refresh_limit)
        stack.push_async_callback(run_in_threadpool, producer.close)
        outbox = None
        if settings.outbox:
            outbox = Outbox(
                settings.outbox_dir, bootstrap, producer, settings.outbox_max_bytes,
                tenant_share=settings.outbox_tenant_share,
            ).start()  # fmt: skip
            stack.push_async_callback(run_in_threadpool, outbox.stop)
        purges = PurgeListeners()
        manager = await self._vectors(stack, purges) if self.project_vectors else None
        follower = BrokerFollower(settings.data_dir, producer, outbox, manager).start()
        stack.push_async_callback(run_in_threadpool, follower.stop)
        stores = open_live_stores(settings, manager)
        checkout = build_checkout(stores, producer, TraceSealer(sealing))
        summarizer = summarize_routes.build_summarizer(settings, checkout)
        watch = KafkaWatch(bootstrap).start()
        stack.push_async_callback(run_in_threadpool, watch.stop)
        forget = build_forget(self.ctx, stores, checkout, data_keys, summarizer)
        purges.add(tombstone_listener(self.ctx, checkout, summarizer, data_keys))
        intake = Intake(
            producer, WritePositions(data_keys, settings.data_dir), outbox, COMPONENT,
            ack_wait_s=settings.outbox_ack_wait_s, max_batch=self.ctx.max_batch,
        )  # fmt: skip
        return Serving(
            data_keys, intake, producer, outbox, manager, stores, checkout, summarizer, watch,
            forget,
        )  # fmt: skip

    async def _vectors(self, stack: AsyncExitStack, purges: PurgeListeners) -> ProjectionManager:
        """The embedded stack's vector projection, in this process; ``purges`` hear each
        tombstone it obeys."""
        manager = vector_manager(self.ctx.settings, self.ctx.bootstrap, on_purge=purges)
        # Each version's index opens before the API answers (the supervisor holds the port
        # meanwhile): a read right after `memstream up` finds it instead of a 503.
        await run_in_threadpool(manager.sync)
        thread = threading.Thread(target=manager.run_forever, name="vector-projection")
        thread.start()

        async def stop() -> None:
            manager.stopping.set()
            await run_in_threadpool(thread.join, 60)

        stack.push_async_callback(stop)
        return manager


def _guard(app: FastAPI, settings: Settings) -> None:
    """Body limits and pace, and the HTTP metrics around everything."""
    ingest_limit = settings.api_max_ingest_body_bytes
    # Inside the body limit: a body too large is 413 whatever its type; one that is not JSON
    # is 415 before any of it is read.
    app.add_middleware(JsonOnly, prefix="/v1/", accepted={ingest.TRACES_PATH: traces.MEDIA_TYPES})
    app.add_middleware(
        BodyGuard,
        default=settings.api_max_body_bytes,
        limits={
            ingest.PATH: ingest_limit,
            ingest.TRACES_PATH: ingest_limit,
            MCP_PATH: ingest_limit,
        },
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


def _routes(app: FastAPI) -> None:
    """The memory routes, their metrics, and the answers to stores being down."""
    for module in (feedback, invalidate_routes, read_after):
        module.init_metrics()
    for router in (
        ingest.router, checkout_routes.router, feedback.router, invalidate_routes.router,
        latent_routes.router, explorer.router, summarize_routes.router, purge_routes.router,
        producer_routes.router, traces.router,
    ):  # fmt: skip
        app.include_router(router)
    app.add_exception_handler(GraphUnavailable, errors.store_down)
    app.add_exception_handler(IndexUnavailable, errors.store_down)
    app.add_exception_handler(RequestValidationError, errors.request_invalid)


def _ops_routes(app: FastAPI, ctx: ApiContext) -> None:
    """``/healthz`` and ``/metrics``."""

    @app.get(
        "/healthz",
        tags=["ops"],
        summary="Liveness and Kafka reachability",
        response_model=Health,
        responses={503: {"model": Health, "description": "Kafka is unreachable"}},
    )
    async def healthz() -> JSONResponse:
        problem = await run_in_threadpool(ctx.serving.producer.reachable)
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


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The schema, with the models of the ingest body (read raw, for whole-batch errors)."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        _, defs = models_json_schema(
            [(EventBatch, "validation")], ref_template="#/components/schemas/{model}"
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(defs.get("$defs", {}))
        # One event: the union of the typed models, named for the request body's oneOf.
        components["EventIn"] = components["EventBatch"]["properties"]["events"].pop("items")
        components["EventBatch"]["properties"]["events"]["items"] = {
            "$ref": "#/components/schemas/EventIn"
        }
        _document_media(schema)
        app.openapi_schema = schema
    return app.openapi_schema


def _document_media(schema: dict[str, Any]) -> None:
    """Every operation that takes a body can answer 415 (``memstream_api.media``)."""
    refused = {
        "description": "the body is not JSON (its Content-Type is missing or another type)",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            if isinstance(operation, dict) and "requestBody" in operation:
                operation.setdefault("responses", {}).setdefault(str(UNSUPPORTED), refused)
