"""Watching the stores obey a tombstone: one check per store, polled with back-off."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from memstream.forget.metrics import PendingPurges
from memstream.forget.purge import is_complete
from memstream.graph.port import GraphUnavailable, PurgeScope
from memstream.projection.live import LiveStores, NoProjection
from memstream.sinks import SINKS, PurgeCheck, PurgeTarget, Sink, StoreCheck
from memstream.vectors.port import IndexUnavailable

log = logging.getLogger(__name__)
POLL_S = 0.25
# A request's watch backs off to this: each check reads the tenant's archive and asks every
# store, and for a purge of thousands of events polling at POLL_S kept the API busy.
WATCH_MAX_POLL_S = 1.0
BACKGROUND_WATCH_S = 3600.0  # after an hour the purge is left to the alert, not this thread
BACKGROUND_POLL_S = 10.0  # the longest pause between two checks of a purge left running

Check = Callable[[], dict[str, bool]]


def store_checks(
    stores: LiveStores,
    archive: Path,
    tenant: str,
    scope: PurgeScope,
    sinks: Sequence[Sink] = SINKS,
) -> dict[str, StoreCheck]:
    """Per sink of the table whose store this process can see, the check that it no longer
    holds what the purge removes. The live graph and index are looked up at each check: a
    projector that restarted meanwhile has another index object."""
    target = PurgeTarget(stores, archive, tenant, scope)
    checks: dict[str, StoreCheck] = {}
    for s in sinks:
        if s.purge_check is None:
            continue
        try:
            check = s.purge_check(target)
        except (NoProjection, IndexUnavailable, GraphUnavailable):  # checked once it answers
            check = _unseen(s.purge_check, target)
        if check is not None:
            checks[s.name] = check
    return checks


def _unseen(purge_check: PurgeCheck, target: PurgeTarget) -> StoreCheck:
    """A store that did not answer when the purge was planned: asked again at each check."""

    def check() -> bool:
        found = purge_check(target)
        return True if found is None else found()

    return check


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


def follow_up(pending: PendingPurges, tombstone_id: str, check: Check) -> None:
    """Keep watching, on a thread of its own, a purge the request answered before it
    finished; its age is ``memstream_purge_pending_oldest_seconds`` until it does."""
    pending.add(tombstone_id)

    def run() -> None:
        try:
            if is_complete(watch(check, BACKGROUND_WATCH_S, BACKGROUND_POLL_S)):
                pending.done(tombstone_id)
        except Exception:  # a bug here must be seen, not end the thread silently
            log.exception("purge %s: the watch stopped", tombstone_id)

    threading.Thread(target=run, name=f"purge-watch-{tombstone_id[:8]}", daemon=True).start()
