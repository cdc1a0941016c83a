"""Reads given ``after=``: wait until the projections they read applied a write's position.

The token is checked before anything waits (403: another tenant's; 422: not a position). The
wait runs on the event loop, polling every :data:`POLL_S`: no worker thread is held and no
read budget is charged (the fair share times only the worker thread). Each poll re-reads the
registry (a promote is atomic), the live graph's Progress nodes of the tenant and the vector
projector's progress in this process, and applies the pure rule of
``memstream.projection.progress``. Rule 2's fallback (a record that never reached the ledger)
needs Kafka's committed and end offsets: :class:`KafkaWatch` reads them through long-lived
consumers, and only while some read waits on them. Past ``read_after_max_wait_s``, or when
waiting cannot help, the read answers anyway with a stale warning naming what is missing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request, status
from fastapi.exceptions import RequestValidationError
from memstream.checkout.service import CheckoutService
from memstream.outbox.tracker import Offsets
from memstream.position import ForeignPosition, MalformedPosition, Position, verify
from memstream.projection.progress import Missing, Progress, SegmentView, applied, ledger_marks
from memstream.projection.projectors import VectorProjector
from memstream.projection.runner import ProjectionManager
from memstream.projection.versions import VersionInfo
from memstream.stack.epoch import read_epoch
from prometheus_client import Counter, Histogram
from starlette.concurrency import run_in_threadpool

from memstream_api.context import context, serving
from memstream_api.offsets_watch import KafkaWatch, Snapshot
from memstream_api.outbox import Outbox

log = logging.getLogger(__name__)

POLL_S = 0.025  # how often a waiting read looks at the projections' progress
ROUTES = ("checkout", "recall", "search", "summarize_recall", "invalidate")

WAIT_SECONDS = Histogram(
    "memstream_read_after_wait_seconds",
    "How long a read given after= waited for the projections it reads",
    ["route"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
STALE = Counter(
    "memstream_read_after_stale_total",
    "Reads given after= that answered with a stale warning, per projection not applied",
    ["route", "projection"],
)


def init_metrics() -> None:
    for route in ROUTES:
        WAIT_SECONDS.labels(route)
        for projection in ("graph", "vectors"):
            STALE.labels(route, projection)


@dataclass
class Waited:
    """What a read's wait found: how long, and what was still missing when it answered."""

    waited_s: float
    missing: list[Missing]
    bound_s: float

    def meta(self) -> dict[str, Any]:
        return {
            "waited_ms": round(self.waited_s * 1000),
            "applied": not self.missing,
            "missing": [
                {
                    "projection": m.projection,
                    "version": m.version,
                    "partition": m.partition,
                    "behind": m.behind,
                    "reason": m.reason,
                }
                for m in self.missing
            ],
        }

    def warning(self) -> str | None:
        """The stale warning's message, or None when everything was applied."""
        if not self.missing:
            return None
        clauses = " and ".join(m.describe() for m in self.missing)
        when = (
            "can never be applied here"
            if all(m.final for m in self.missing)
            else f"not yet applied after {self.bound_s:g} s"
        )
        return f"after: {when} by {clauses}; this answer may miss those writes"


def refuse(exc: ForeignPosition | MalformedPosition) -> Exception:
    """403 for another tenant's position, 422 naming ``after`` for anything else."""
    if isinstance(exc, ForeignPosition):
        return HTTPException(status.HTTP_403_FORBIDDEN, detail=f"after: {exc}")
    return RequestValidationError(
        [{"loc": ("body", "after"), "msg": str(exc), "type": "position_invalid"}]
    )


async def checked(request: Request, tenant: str, token: str) -> Position:
    """The position ``token`` names for ``tenant``, or the refusal (before any wait)."""
    secret = await serving(request).positions.secret(tenant)
    try:
        return verify(token, tenant, secret)
    except (ForeignPosition, MalformedPosition) as exc:
        raise refuse(exc) from exc


async def wait_after(request: Request, tenant: str, token: str | None, route: str) -> Waited | None:
    """Refuse a bad ``after=`` token, else wait (bounded) until the live version's graph and
    vectors applied it; None when the read has no ``after``."""
    if token is None:
        return None
    position = await checked(request, tenant, token)
    ctx = context(request)
    up = ctx.serving
    bound = float(ctx.settings.read_after_max_wait_s)
    started = time.monotonic()
    waiter = _Waiter(up.checkout, up.vectors, up.outbox, up.read_after_watch)
    try:
        missing = await waiter.wait(position, started + bound, ctx.settings)
    finally:
        waiter.release()
    done = Waited(time.monotonic() - started, missing, bound)
    WAIT_SECONDS.labels(route).observe(done.waited_s)
    for projection in sorted({m.projection for m in missing}):
        STALE.labels(route, projection).inc()
    return done


class _Waiter:
    """One read's wait: polls progress, asks the watch for Kafka offsets when rule 1 is not
    enough, keeps rule 2's ledger marks from poll to poll."""

    def __init__(
        self,
        service: CheckoutService,
        vectors: ProjectionManager | None,
        outbox: Outbox | None,
        watch: KafkaWatch,
    ) -> None:
        self.service, self.vectors, self.outbox, self.watch = service, vectors, outbox, watch
        self.marks: dict[int, int] = {}
        self.groups: list[str] | None = None  # registered with the watch

    async def wait(self, position: Position, deadline: float, settings: Any) -> list[Missing]:
        while True:
            info = self.service.live()
            missing = await self._missing(position, info, settings)
            if not missing or all(m.final for m in missing) or time.monotonic() >= deadline:
                return missing
            self._need(self._groups(info))
            await asyncio.sleep(POLL_S)

    def _need(self, groups: list[str]) -> None:
        """Have the watch read ``groups``' offsets; a promote during the wait changes the
        live version, and its groups replace the old ones."""
        if groups != self.groups:
            self.release()
            self.watch.need(groups, True)
            self.groups = groups

    def release(self) -> None:
        if self.groups is not None:
            self.watch.need(self.groups, False)
            self.groups = None

    def _groups(self, info: VersionInfo) -> list[str]:
        embedded = self.vectors is not None and self.vectors.committed(info.name) is not None
        return [info.graph_group] if embedded else [info.graph_group, info.vector_group]

    async def _missing(self, position: Position, info: VersionInfo, settings: Any) -> list[Missing]:
        snap = self.watch.latest
        graph = self.service.graph_for(info)
        graph_raw = await run_in_threadpool(graph.applied_raw, position.tenant)
        graph_low = snap.committed.get(info.graph_group)
        progress = [
            _progress("graph", info, position.tenant, graph_raw, graph_low),
            self._vectors(info, position.tenant, snap),
        ]
        self.marks = ledger_marks(position, snap.sequenced, snap.ledger_end, self.marks)
        return applied(
            position,
            progress,
            snap.sequenced,
            self.marks,
            epoch=read_epoch(settings.data_dir),
            partitions=settings.topic_partitions,
            segment=self._segment(position),
        )

    def _vectors(self, info: VersionInfo, tenant: str, snap: Snapshot) -> Progress:
        manager = self.vectors
        projector = manager.projector(info.name) if manager is not None else None
        raw = projector.applied_raw(tenant) if isinstance(projector, VectorProjector) else {}
        low = manager.committed(info.name) if manager is not None else None
        return _progress("vectors", info, tenant, raw, low or snap.committed.get(info.vector_group))

    def _segment(self, position: Position) -> SegmentView | None:
        if position.segment is None or self.outbox is None:
            return None
        held, mark = self.outbox.segment_mark(position.segment)
        return SegmentView(held=held, ledger_mark=mark)


def _progress(
    projection: str,
    info: VersionInfo,
    tenant: str,
    raw: dict[tuple[str, int], int],
    low: Offsets | None,
) -> Progress:
    tenant_raw = {(epoch, tenant, p): o for (epoch, p), o in raw.items()}
    return Progress(projection, info.name, tenant_raw, dict(low or {}))
