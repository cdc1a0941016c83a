"""What a scope lets a checkout see: the candidates, facts and artifacts it rests on.

One rule (:class:`memstream.scope.Scope`): an event is in when its fields are; a fact when
its source event is; a latent artifact when one of its source events is, and then it cites
only those; feedback and invalidations when their own event is (what the retrospective pass
writes lies in its own stream, so it counts in a read that names no stream, agent or user).
A fact closed by a fact outside the scope is, inside it, as that scope's own facts left it:
still current, and no part of the packet names what closed it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from memstream.graph.port import GraphReader
from memstream.records.latent import LatentArtifact
from memstream.records.packet import Candidate
from memstream.records.projected import FactView
from memstream.scope import Scope

R = TypeVar("R")


def admits(scope: Scope, c: Candidate) -> bool:
    """Whether ``c`` (an event, or a fact by its source event) is in ``scope``."""
    if scope.empty:
        return True
    agent = c.agent if c.kind == "event" else (c.source_agent or "")
    return scope.admits(user=c.user, agent=agent, stream=c.ref.stream)


def admits_fact(scope: Scope, f: FactView) -> bool:
    """Whether a graph fact's source event is in ``scope``."""
    return scope.admits(user=f.source_user, agent=f.source_agent, stream=f.source.stream)


def facts_in(scope: Scope, found: Iterable[FactView]) -> list[FactView]:
    """The facts of ``found`` in ``scope``; one closed by a fact outside it is current there
    (its ``valid_to`` and ``superseded_by`` dropped)."""
    found = list(found)
    if scope.empty:
        return found
    inside = [f for f in found if admits_fact(scope, f)]
    kept = {f.fact_id for f in inside}
    return [
        f
        if f.superseded_by is None or f.superseded_by in kept
        else f.model_copy(update={"valid_to": None, "superseded_by": None})
        for f in inside
    ]


def artifacts_in(
    scope: Scope, graph: GraphReader, tenant: str, artifacts: list[LatentArtifact]
) -> list[LatentArtifact]:
    """The artifacts with a source event in ``scope``, each citing only those (one graph read
    for the source events' scopes)."""
    if scope.empty or not artifacts:
        return artifacts
    ids = list(dict.fromkeys(r.event_id for a in artifacts for r in a.source_event_refs))
    seen = {
        e.event_id
        for e in graph.events(tenant, ids)
        if scope.admits(user=e.user, agent=e.agent, stream=e.stream)
    }
    out = []
    for a in artifacts:
        refs = [r for r in a.source_event_refs if r.event_id in seen]
        if refs:
            out.append(a.model_copy(update={"source_event_refs": refs}))
    return out


def records_in(
    scope: Scope, graph: GraphReader, tenant: str, records: list[R], event_of: Callable[[R], str]
) -> list[R]:
    """The records (feedback, invalidations) whose own event lies in ``scope``: what was
    said about an item outside a scope does not reach a read inside it (one graph read)."""
    if scope.empty or not records:
        return records
    ids = list(dict.fromkeys(event_of(r) for r in records))
    seen = {
        e.event_id
        for e in graph.events(tenant, ids)
        if scope.admits(user=e.user, agent=e.agent, stream=e.stream)
    }
    return [r for r in records if event_of(r) in seen]
