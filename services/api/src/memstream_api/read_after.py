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
from memstream.intake.outbox import Outbox
from memstream.outbox.tracker import Offsets
from memstream.position import ForeignPosition, MalformedPosition, Position, verify
from memstream.projection.live import LiveStores
from memstream.projection.progress import Missing, Progress, SegmentView, applied, ledger_marks
from memstream.projection.projectors import VectorProjector
from memstream.projection.runner import ProjectionManager
from memstream.projection.versions import VersionInfo
from memstream.sinks import SINKS, Sink
from memstream.stack.epoch import read_epoch
from prometheus_client import Counter, Histogram
from starlette.concurrency import run_in_threadpool

from memstream_api.context import context, serving
from memstream_api.offsets_watch import KafkaWatch, Snapshot

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


# The sinks a read waits on (the table's ``read_after``), each with how far it applied a
# tenant's writes.
WAITED_ON = tuple(s for s in SINKS if s.read_after)


def init_metrics() -> None:
    for route in ROUTES:
        WAIT_SECONDS.labels(route)
        for s in WAITED_ON:
            STALE.labels(route, s.name)


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
    secret = await serving(request).intake.positions.secret(tenant)
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
    waiter = _Waiter(up.stores, up.vectors, up.outbox, up.read_after_watch)
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
        stores: LiveStores,
        vectors: ProjectionManager | None,
        outbox: Outbox | None,
        watch: KafkaWatch,
    ) -> None:
        self.stores, self.vectors, self.outbox, self.watch = stores, vectors, outbox, watch
        self.marks: dict[int, int] = {}
        self.groups: list[str] | None = None  # registered with the watch

    async def wait(self, position: Position, deadline: float, settings: Any) -> list[Missing]:
        while True:
            info = self.stores.live()
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
        """The groups whose offsets the watch reads: every waited-on sink's, but the one
        this process runs itself (its offsets are known here)."""
        return [
            s.versioned(info) for s in WAITED_ON if s.versioned and not self._in_process(s, info)
        ]

    def _in_process(self, sink: Sink, info: VersionInfo) -> bool:
        """Whether this process runs ``sink``'s projection of ``info`` (embedded vectors)."""
        vectors = self.vectors
        running = vectors is not None and vectors.committed(info.name) is not None
        return sink.module is None and running

    async def _missing(self, position: Position, info: VersionInfo, settings: Any) -> list[Missing]:
        snap = self.watch.latest
        progress = [await self._progress(s, info, position.tenant, snap) for s in WAITED_ON]
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

    async def _progress(
        self, sink: Sink, info: VersionInfo, tenant: str, snap: Snapshot
    ) -> Progress:
        """How far ``sink`` applied the tenant's writes: what its store recorded, and the
        offsets its group committed."""
        assert sink.versioned is not None
        committed = snap.committed.get(sink.versioned(info))
        if self._in_process(sink, info):  # the vector projection of this process
            manager = self.vectors
            assert manager is not None
            projector = manager.projector(info.name)
            raw = projector.applied_raw(tenant) if isinstance(projector, VectorProjector) else {}
            return _progress(sink.name, info, tenant, raw, manager.committed(info.name))
        applied = sink.applied
        raw = {} if applied is None else await run_in_threadpool(applied, self.stores, info, tenant)
        return _progress(sink.name, info, tenant, raw, committed)

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
