"""Ids a write names (feedback, invalidation): each must name a memory of the tenant, or the
write is refused with 404 listing the unknown ones; a mistyped id would otherwise change
nothing without a word."""

from __future__ import annotations

from fastapi import HTTPException, status
from memstream.checkout.scoped import admits_fact
from memstream.graph.port import GraphReader
from memstream.scope import WHOLE, Scope

from memstream_api.read_after import Waited


def unknown_targets(
    graph: GraphReader, tenant: str, ids: list[str], scope: Scope = WHOLE
) -> list[str]:
    """The ids that name neither an event nor a fact of the tenant inside ``scope`` (a latent
    artifact's id, a packet's, another tenant's event or one outside the key's scope names
    no memory here)."""
    events = {
        e.event_id
        for e in graph.events(tenant, ids)
        if scope.admits(user=e.user, agent=e.agent, stream=e.stream)
    }
    unknown = []
    for i in dict.fromkeys(ids):
        if i in events:
            continue
        fact = graph.fact(tenant, i)
        if fact is None or not admits_fact(scope, fact):
            unknown.append(i)
    return unknown


def not_found(unknown: list[str], waited: Waited | None = None) -> HTTPException:
    """The 404: after a wait that saw the write applied, the ids are simply not in memory;
    otherwise they may not be projected yet, and a stale wait says what is missing."""
    ids = ", ".join(unknown)
    if waited is not None and not waited.missing:
        return HTTPException(status.HTTP_404_NOT_FOUND, detail=f"not in memory: {ids}")
    stale = waited.warning() if waited is not None else None
    detail = f"not in memory (or not projected yet): {ids}" + (f"; {stale}" if stale else "")
    return HTTPException(status.HTTP_404_NOT_FOUND, detail=detail)
