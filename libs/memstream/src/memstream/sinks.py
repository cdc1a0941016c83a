"""Where the ledger goes: one declared table of sinks, read by whatever needs to know them.

A sink is a store the ledger is written into by a consumer-group worker: the graph, the
vector index, the archive, the latent artifacts, what the retrospective pass learns. Its
entry names the worker that runs it (and the module the embedded supervisor starts), the
consumer groups and topics it reads, how a purge checks that it obeys a tombstone, whether a
read given ``after=`` waits on it, and the component its metrics carry. The supervisor, the
workers, the purge watch, read-after, ``memstream status`` and the dashboards' source read
this table: adding a store is one entry here plus its adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memstream.archive.segments import read_archive
from memstream.kafka.topics import (
    ARCHIVER_GROUP,
    CHECKOUTS,
    LATENT_INPUTS,
    LATENTS,
    LATENTS_GROUP,
    LATENTS_ROUTE_GROUP,
    LEARNING,
    LEARNING_ROUTE_GROUP,
    LEDGER,
    RAW,
    RETROSPECTIVE_GROUP,
    SEQUENCER_GROUP,
)
from memstream.ledger.purge import is_purged
from memstream.projection.components import GRAPH_PROJECTOR, VECTOR_PROJECTOR

if TYPE_CHECKING:  # types only: a worker reads this table without importing the stores
    from memstream.graph.port import PurgeScope
    from memstream.projection.live import LiveStores
    from memstream.projection.versions import VersionInfo


@dataclass(frozen=True)
class PurgeTarget:
    """What a purge's watch checks a sink against: the live stores, this machine's archive
    directory, and what the purge of one tenant's subject reaches."""

    stores: LiveStores
    archive: Path
    tenant: str
    scope: PurgeScope


StoreCheck = Callable[[], bool]
# A sink's purge check for one purge: None where this process cannot see that store.
PurgeCheck = Callable[[PurgeTarget], StoreCheck | None]
# What a version's store recorded applying of a tenant: (broker epoch, raw partition) ->
# the highest raw offset (read-after's rule 1).
Applied = Callable[["LiveStores", "VersionInfo", str], dict[tuple[str, int], int]]


@dataclass(frozen=True)
class Group:
    """A consumer group a sink's worker runs, and the topics it reads."""

    group: str
    topics: tuple[str, ...]


@dataclass(frozen=True)
class Sink:
    """One store the ledger is written into (see the module docstring)."""

    name: str  # the store, as a purge report and a stale warning name it
    component: str  # the worker, and the ``component`` label of its metrics
    module: str | None  # what the embedded supervisor runs; None: inside the API process
    groups: tuple[Group, ...] = ()  # fixed consumer groups (status reads their lag)
    versioned: Callable[[VersionInfo], str] | None = None  # one group per projection version
    purge_check: PurgeCheck | None = None
    read_after: bool = False  # a read given after= waits until it applied the write
    applied: Applied | None = None  # what its store recorded applying (None: offsets only)
    heavy: bool = False  # throughput work nobody waits on: started nicer
    derived: bool = True  # runs only with the embedded projections (not the spine alone)


def _graph_check(t: PurgeTarget) -> StoreCheck:
    return lambda: t.stores.graph().events_held(t.tenant, t.scope.event_ids) == 0


def _artifacts_check(t: PurgeTarget) -> StoreCheck:
    return lambda: not t.stores.graph().latents_by_id(t.tenant, t.scope.latent_ids)


def _vectors_check(t: PurgeTarget) -> StoreCheck | None:
    if t.stores.index() is None:  # not open in this process: nothing here to watch
        return None

    def gone() -> bool:
        index = t.stores.index()  # None: closed since (it holds nothing to read)
        return index is None or index.holding(t.tenant, t.scope.event_ids) == 0

    return gone


def _archive_check(t: PurgeTarget) -> StoreCheck | None:
    if not t.archive.is_dir():  # the archive lives on another machine
        return None
    ids = set(t.scope.event_ids)

    def gone() -> bool:
        entries = read_archive(t.archive, t.tenant)
        return all(is_purged(e) for e, _ in entries if e.get("id") in ids)

    return gone


SEQUENCER = "sequencer"
SEQUENCER_MODULE = "memstream_sequencer.main"
SEQUENCER_GROUPS = (Group(SEQUENCER_GROUP, (RAW,)),)

SINKS: tuple[Sink, ...] = (
    Sink(
        "archive", "archiver", "memstream_archiver.main",
        groups=(Group(ARCHIVER_GROUP, (LEDGER,)),), purge_check=_archive_check, heavy=True,
        derived=False,
    ),
    Sink(
        "graph", GRAPH_PROJECTOR, "memstream_projector.graph",
        versioned=lambda info: info.graph_group, purge_check=_graph_check, read_after=True,
        applied=lambda stores, info, tenant: stores.graph_for(info).applied_raw(tenant),
    ),
    Sink(
        "vectors", VECTOR_PROJECTOR, None,
        versioned=lambda info: info.vector_group, purge_check=_vectors_check, read_after=True,
    ),
    Sink(
        "learning", "retrospective", "memstream_retrospective.main",
        groups=(
            Group(LEARNING_ROUTE_GROUP, (LEDGER,)),
            Group(RETROSPECTIVE_GROUP, (LEARNING, CHECKOUTS)),
        ),
        heavy=True,
    ),
    Sink(
        "latents", "latent-builder", "memstream_latents.main",
        groups=(Group(LATENTS_ROUTE_GROUP, (LEDGER,)), Group(LATENTS_GROUP, (LATENT_INPUTS,))),
        purge_check=_artifacts_check, heavy=True,
    ),
)  # fmt: skip
# memory.latents is read by the projectors beside the ledger (their versioned groups).
PROJECTED_TOPICS = (LEDGER, LATENTS)


def sink(name: str, sinks: Sequence[Sink] = SINKS) -> Sink:
    """The sink named ``name`` (KeyError: none)."""
    for s in sinks:
        if s.name == name:
            return s
    raise KeyError(name)


def by_component(sinks: Sequence[Sink] = SINKS) -> dict[str, Sink]:
    """The sinks by the worker that runs them."""
    return {s.component: s for s in sinks}
