"""Lineage: from any id (event, fact, artifact, recent packet) down to the ledger events
beneath it, with what those events say."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from memstream.checkout.memory import PacketMemory
from memstream.graph.port import GraphReader
from memstream.records.latent import LatentArtifact, is_artifact_id
from memstream.records.projected import EventRecord, SourceRef
from memstream.scope import WHOLE, Scope


class LeafEvent(BaseModel):
    """What a leaf says: the ledger event's content, as projected."""

    event_id: str
    type: str
    agent: str
    user: str | None = None
    occurred_at: str
    text: str


class Lineage(BaseModel):
    """Sources one hop up and leaves = the ledger events an item rests on."""

    id: str
    kind: Literal["event", "fact", "packet", "latent"]
    sources: list[str]
    leaves: list[SourceRef]
    artifact: LatentArtifact | None = Field(
        default=None, description="for a latent artifact: the artifact itself (suggestive only)"
    )
    events: list[LeafEvent] = Field(
        default_factory=list,
        description="the leaves' content, in leaf order (a purged event has none)",
    )


class UnknownItem(LookupError):
    """No event, fact or recent packet has this id."""


def lineage(
    graph: GraphReader, packets: PacketMemory, tenant: str, item_id: str, scope: Scope = WHOLE
) -> Lineage:
    """Resolve an event id, a fact id (``<event_id>#n``), an artifact id or a recent packet
    id, with what its leaves say; :class:`UnknownItem` if none has it. Inside ``scope`` an
    item is known when one of its leaves is, and shows only those (and the sources resting
    on them)."""
    found = _resolve(graph, packets, tenant, item_id)
    by_id = {e.event_id: e for e in graph.events(tenant, [r.event_id for r in found.leaves])}
    if not scope.empty:
        by_id = {
            i: e
            for i, e in by_id.items()
            if scope.admits(user=e.user, agent=e.agent, stream=e.stream)
        }
        found = _narrowed(found, set(by_id))
    events = [_leaf_event(by_id[r.event_id]) for r in found.leaves if r.event_id in by_id]
    return found.model_copy(update={"events": events})


def _narrowed(found: Lineage, seen: set[str]) -> Lineage:
    """``found`` with only the leaves in ``seen`` and what rests on them; UnknownItem when
    none is (an item outside a scope is, inside it, unknown)."""
    leaves = [r for r in found.leaves if r.event_id in seen]
    if not leaves:
        raise UnknownItem(found.id)
    artifact = found.artifact
    if artifact is not None:
        refs = [r for r in artifact.source_event_refs if r.event_id in seen]
        artifact = artifact.model_copy(update={"source_event_refs": refs})
    sources = [s for s in found.sources if s.split("#", 1)[0] in seen]
    return found.model_copy(update={"leaves": leaves, "sources": sources, "artifact": artifact})


def _resolve(graph: GraphReader, packets: PacketMemory, tenant: str, item_id: str) -> Lineage:
    if is_artifact_id(item_id):
        return _artifact(graph, tenant, item_id)
    recent = packets.get(tenant, item_id)
    if recent is not None:
        leaves = _leaves(graph, tenant, recent.cited)
        if leaves is None:
            raise UnknownItem(item_id)
        return Lineage(id=item_id, kind="packet", sources=recent.cited, leaves=leaves)
    if "#" in item_id:
        fact = graph.fact(tenant, item_id)
        if fact is None:
            raise UnknownItem(item_id)
        event_id = item_id.split("#", 1)[0]
        return Lineage(id=item_id, kind="fact", sources=[event_id], leaves=[fact.source])
    event = graph.event(tenant, item_id)
    if event is None:
        raise UnknownItem(item_id)
    return Lineage(id=item_id, kind="event", sources=[], leaves=[event.ref])


def _artifact(graph: GraphReader, tenant: str, artifact_id: str) -> Lineage:
    """An artifact rests on the ledger events it was derived from (one hop: they are both
    its sources and its leaves), stale or not."""
    artifact = graph.latent(tenant, artifact_id)
    if artifact is None:
        raise UnknownItem(artifact_id)
    leaves = list({r.event_id: r for r in artifact.source_event_refs}.values())
    sources = [r.event_id for r in leaves]
    return Lineage(id=artifact_id, kind="latent", sources=sources, leaves=leaves, artifact=artifact)


def _leaves(graph: GraphReader, tenant: str, ids: list[str]) -> list[SourceRef] | None:
    event_ids = list(dict.fromkeys(i.split("#", 1)[0] for i in ids))
    events = {e.event_id: e for e in graph.events(tenant, event_ids)}
    if len(events) != len(event_ids):
        return None
    return [events[i].ref for i in event_ids]


def _leaf_event(e: EventRecord) -> LeafEvent:
    return LeafEvent(
        event_id=e.event_id,
        type=e.type,
        agent=e.agent,
        user=e.user,
        occurred_at=e.occurred_at,
        text=e.text,
    )
