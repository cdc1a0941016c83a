"""``DELETE /v1/subjects/{subject}``: purge a data subject from every store, with a report.

The API plans from the live graph, appends the ``memory.purge`` tombstone (durably, like any
event), forgets what it holds in memory (cached summaries, recent packets), then watches the
stores obey the tombstone for up to ``wait_s``. A purge still unfinished when the request
answers keeps being watched; its age is ``memstream_purge_pending_oldest_seconds``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

from confluent_kafka import KafkaException
from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi import Path as PathParam
from fastapi.responses import Response
from memstream.archive.segments import read_archive
from memstream.checkout.service import CheckoutService, NoProjection, RecallRequest
from memstream.forget.metrics import PURGES, PendingPurges
from memstream.forget.purge import PurgeReport, is_complete, planned, tombstone
from memstream.graph.port import GraphUnavailable, PurgeScope
from memstream.ledger.purge import is_purged
from memstream.shred.port import DataKeys
from memstream.summarize.cache import SummaryCache
from memstream.text.names import entity_key, name_forms, names_in
from memstream.vectors.port import IndexUnavailable
from memstream.wire import STORABLE
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from memstream_api.auth import Tenant
from memstream_api.checkout_routes import (
    READ_RESPONSES,
    checkout_service,
    unavailable_error,
)
from memstream_api.errors import INVALID, WRITE_REFUSALS, ErrorBody, retry_after, unavailable
from memstream_api.ingest import COMPONENT, DeliveryErrorBody, deliver
from memstream_api.shredding import Reach, TopicsOutcome, purge_topics

log = logging.getLogger(__name__)
router = APIRouter(tags=["forget"])
POLL_S = 0.25
# A request's watch backs off to this: each check reads the tenant's archive and asks every
# store, and for a purge of thousands of events polling at POLL_S kept the API busy.
WATCH_MAX_POLL_S = 1.0
NAMED_CANDIDATES = 200  # the most a recall returns
BACKGROUND_WATCH_S = 3600.0  # after an hour the purge is left to the alert, not this thread
BACKGROUND_POLL_S = 10.0  # the longest pause between two checks of a purge left running

StoreCheck = Callable[[], bool]
Subject = Annotated[
    str,
    Field(min_length=1, max_length=500),
    STORABLE,
    PathParam(description="a name as written in memory"),
]
Check = Callable[[], dict[str, bool]]


def store_checks(
    checkout: CheckoutService, archive: Path, tenant: str, scope: PurgeScope
) -> dict[str, StoreCheck]:
    """Per watched store, the check that it no longer holds what the purge removes. The live
    graph and index are looked up at each check: a projector that restarted meanwhile has
    another index object."""
    ids = set(scope.event_ids)

    def vectors() -> bool:
        index = checkout.live_index()
        # None: not open in this process (it holds nothing to read)
        return index is None or index.holding(tenant, scope.event_ids) == 0

    def archived() -> bool:
        entries = read_archive(archive, tenant)
        return all(is_purged(e) for e, _ in entries if e.get("id") in ids)

    checks: dict[str, StoreCheck] = {
        "graph": lambda: checkout.live_graph().events_held(tenant, scope.event_ids) == 0,
        "latents": lambda: not checkout.live_graph().latents_by_id(tenant, scope.latent_ids),
    }
    try:
        indexed = checkout.live_index() is not None
    except (NoProjection, IndexUnavailable):  # reopening: checked once it answers again
        indexed = True
    if indexed:
        checks["vectors"] = vectors
    if archive.is_dir():  # the embedded stack: the archive is on this machine
        checks["archive"] = archived
    return checks


def converged(checks: dict[str, StoreCheck], what: str) -> dict[str, bool]:
    """Run every store's check; one that fails (a store down, an index reopening) reads as
    not converged yet, and is logged; the others still answer."""
    done: dict[str, bool] = {}
    for store, check in checks.items():
        try:
            done[store] = check()
        except (GraphUnavailable, IndexUnavailable, NoProjection, OSError) as exc:
            log.warning("%s: %s not checked (will try again): %s", what, store, exc)
            done[store] = False
        except Exception:  # not a store being down: say so loudly, keep watching
            log.exception("%s: checking %s failed (will try again)", what, store)
            done[store] = False
    return done


def named_events(request: Request, tenant: str, subject: str, key: str) -> list[str]:
    """Events whose text names the subject without the extractor linking them (written in
    lower case, say): the best sparse matches, kept when they name it as whole words. A
    bounded search, not a scan: the dry run shows what it found."""
    forms = name_forms(subject, key)
    found = checkout_service(request).recall(
        tenant, RecallRequest(query=subject, k=NAMED_CANDIDATES, mode="sparse")
    )
    return sorted({c.ref.event_id for c in found if names_in(c.text, forms)})


def watch(check: Check, seconds: float, max_poll_s: float = POLL_S) -> dict[str, bool]:
    """Poll ``check`` until every store converged or ``seconds`` passed; the last answer.
    The pause between checks doubles from ``POLL_S`` up to ``max_poll_s``: a purge watched
    for long does not keep the stores busy. ``check`` never raises (see ``converged``)."""
    until = time.monotonic() + seconds
    pause = POLL_S
    while True:
        done = check()
        if is_complete(done) or time.monotonic() >= until:
            return done
        time.sleep(min(pause, max(0.0, until - time.monotonic())))
        pause = min(pause * 2, max_poll_s)


def shred(
    request: Request, keys: DataKeys, tenant: str, subject: str, key: str, scope: PurgeScope
) -> tuple[dict[str, int], TopicsOutcome]:
    """Destroy the data keys of what the purge removes: the events' (every sealed copy in
    raw, ledger, archive and dead letters), then the checkout traces' that name the subject
    or cite what it removes (recent packets of this process included: their traces may not
    be in the topic yet); how many per kind, and what each topic holds now."""
    events = keys.destroy(tenant, "event", scope.event_ids)
    # The latent builder destroys the keys of every artifact ever built from the events when
    # the tombstone reaches it; the ones the live graph names go here already.
    artifacts = keys.destroy(tenant, "latent", scope.latent_ids)
    ids = {*scope.event_ids, *scope.fact_ids, *scope.latent_ids}
    recent = checkout_service(request).packets_reaching(tenant, ids, key)
    reach = Reach(tenant, name_forms(subject, key), ids)
    outcome = purge_topics(
        request.app.state.bootstrap, request.app.state.settings, keys, reach, events, recent
    )
    removed = {"data_keys": events, "artifact_keys": artifacts}
    return removed | {"checkout_traces": outcome.traces_shredded}, outcome


def _topics_unread(tombstone_id: str, exc: Exception) -> HTTPException:
    """The 503 of a purge whose topics could not be read: the tombstone is in and the
    events' keys are gone, but not every trace was looked at. Sending the purge again
    finishes it (destroying a key twice is harmless)."""
    log.warning("purge %s: the topics were not read: %s", tombstone_id, exc)
    return HTTPException(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        detail="the purge is recorded, but the checkout traces could not be read from "
        "Kafka; send it again",
        headers=retry_after(),
    )


def _pending(request: Request) -> PendingPurges:
    pending: PendingPurges = request.app.state.pending_purges
    return pending


def _in_memory(
    request: Request, tenant: str, key: str, scope: PurgeScope, apply: bool
) -> dict[str, int]:
    """What this process holds in memory: cached summaries and recent packets."""
    ids = {*scope.event_ids, *scope.fact_ids, *scope.latent_ids}
    cache: SummaryCache | None = getattr(request.app.state.summarizer, "cache", None)
    checkout = checkout_service(request)
    if not apply:
        cited = [p for p in checkout.packets.values() if p.tenant == tenant]
        return {
            "summary_cache_entries": cache.count(tenant, ids) if cache is not None else 0,
            "recent_packets": sum(1 for p in cited if not ids.isdisjoint(p.cited)),
        }
    return {
        "summary_cache_entries": cache.drop(tenant, ids) if cache is not None else 0,
        "recent_packets": _forget_packets(checkout, tenant, ids, key),
    }


def _forget_packets(checkout: CheckoutService, tenant: str, ids: set[str], key: str) -> int:
    """Forget the recent packets naming the subject, and every parsed artifact of the tenant
    (cheap to read again); returns how many packets went."""
    checkout.forget_tenant(tenant)
    return checkout.forget_packets(tenant, ids, key)


def _follow_up(pending: PendingPurges, tombstone_id: str, check: Check) -> None:
    """Keep watching a purge the request answered before it finished."""
    pending.add(tombstone_id)

    def run() -> None:
        try:
            if is_complete(watch(check, BACKGROUND_WATCH_S, BACKGROUND_POLL_S)):
                pending.done(tombstone_id)
        except Exception:  # a bug here must be seen, not end the thread silently
            log.exception("purge %s: the watch stopped", tombstone_id)

    threading.Thread(target=run, name=f"purge-watch-{tombstone_id[:8]}", daemon=True).start()


@router.delete(
    "/v1/subjects/{subject}",
    summary="Purge a data subject: every event linked to it and all derived from them",
    response_model=PurgeReport,
    responses={
        **INVALID,
        **READ_RESPONSES,
        404: {"model": ErrorBody, "description": "the subject names no entity (no letter)"},
        **WRITE_REFUSALS,
        **unavailable(
            "memory is briefly unavailable, or the tombstone was not accepted (spool full, "
            "Kafka did not acknowledge); send it again",
            DeliveryErrorBody | ErrorBody,
        ),
    },
)
async def purge_subject(
    subject: Subject,
    request: Request,
    tenant: Tenant,
    dry_run: Annotated[bool, Query(description="report what would go; change nothing")] = False,
    wait_s: Annotated[
        float, Query(ge=0, le=120, description="how long to watch the stores obey")
    ] = 30.0,
) -> PurgeReport | Response:
    key = entity_key(subject)
    if not key:
        # No letter or digit (or only "the"): nothing in memory can be named so.
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"{subject!r} names no entity")
    try:
        graph = await run_in_threadpool(checkout_service(request).live_graph)
        named = await run_in_threadpool(named_events, request, tenant, subject, key)
        scope = await run_in_threadpool(graph.purge_scope, tenant, key, named)
    except NoProjection as exc:
        raise unavailable_error(exc) from exc
    removed = planned(scope)
    report = {"subject": subject, "subject_key": key, "removed": removed}
    if dry_run:
        removed |= _in_memory(request, tenant, key, scope, apply=False)
        PURGES.labels(COMPONENT, "dry_run").inc()
        return PurgeReport(**report, dry_run=True, tombstone_id=None, complete=True)
    keys: DataKeys = request.app.state.data_keys
    secret = await run_in_threadpool(keys.tenant_secret, tenant)
    event = tombstone(tenant, key, scope, datetime.now(UTC), secret)
    written = await deliver(request, [event])
    if isinstance(written, Response):
        return written
    # Once the tombstone is durable: every copy of the events' content, in every topic,
    # segment and backup, becomes unreadable at once.
    try:
        shredded, topics = await run_in_threadpool(
            shred, request, keys, tenant, subject, key, scope
        )
    except (KafkaException, TimeoutError) as exc:
        raise _topics_unread(event.id, exc) from exc
    removed |= shredded
    removed |= _in_memory(request, tenant, key, scope, apply=True)
    checkout = checkout_service(request)
    archive = request.app.state.settings.archive_dir
    checks = await run_in_threadpool(store_checks, checkout, archive, tenant, scope)

    def check() -> dict[str, bool]:
        done = converged(checks, f"purge {event.id}")
        checkout.forget_tenant(tenant)  # a checkout may have read one before it went
        return done

    completed = await run_in_threadpool(watch, check, wait_s, WATCH_MAX_POLL_S)
    complete = is_complete(completed)
    PURGES.labels(COMPONENT, "complete" if complete else "incomplete").inc()
    if not complete:
        _follow_up(_pending(request), event.id, check)
    return PurgeReport(
        **report,
        dry_run=False,
        tombstone_id=event.id,
        completed=completed,
        complete=complete,
        topics=topics.topics,
        residual=topics.residual,
    )
