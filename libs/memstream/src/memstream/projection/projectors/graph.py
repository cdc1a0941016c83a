"""The graph projector: a version's ledger and latent artifacts written into its graph store."""

from __future__ import annotations

import logging

from confluent_kafka import Message, Producer

from memstream.graph.port import GraphWriter
from memstream.ledger.opening import EntryOpener
from memstream.projection.components import GRAPH_PROJECTOR
from memstream.projection.extract import graph_batch
from memstream.projection.latents import split_records
from memstream.projection.metrics import (
    PROJECTED_LATENTS,
)
from memstream.projection.projectors.shell import GRAPH, ProjectorShell, by_topic
from memstream.records.latent import LatentDeletion

log = logging.getLogger(__name__)


class GraphProjector(ProjectorShell):
    component = GRAPH_PROJECTOR
    kind = "graph"

    def __init__(
        self,
        store: GraphWriter,
        version: str,
        producer: Producer,
        feedback: bool = True,
        opener: EntryOpener | None = None,
    ) -> None:
        super().__init__(version, producer, opener)
        self.store = store
        self.feedback = feedback  # False: a version that ranks as if no feedback was ever given
        store.ensure_schema()

    def process(self, msgs: list[Message]) -> None:
        """Write the batch, then obey its tombstones and latent deletions (both come after
        what they remove); after any of them, compact the store's files."""
        ledger, latent_records = by_topic(msgs)
        # light: no projection stores quantities or dates (checkout and the latent builder
        # find them in the text), so parsing them here would be wasted
        decoded = self.decode(ledger, light=True)
        records = self.decode_latents(latent_records)
        artifacts, deletions = split_records(records)
        if decoded.extractions:
            batch = graph_batch(decoded.extractions)
            if not self.feedback:
                batch = batch.model_copy(update={"feedback": []})
            self.store.write(batch)
            self.observe(decoded.extractions)
        if artifacts:
            self.store.write_latents(artifacts)
        if records:
            PROJECTED_LATENTS.labels(self.component, self.kind, self.version).inc(len(records))
        for order in decoded.purges:
            self.purged(GRAPH, order, self.store.purge_events(order.tenant, list(order.event_ids)))
        for tenant, ids in _by_tenant(deletions).items():
            self.purged(GRAPH, None, {"latents": self.store.delete_latents(tenant, ids)})
        if decoded.purges or deletions:
            self.store.compact()
        # Last, in the version's own namespace: published only once the batch is applied.
        self.store.record_progress(decoded.applied)

    def close(self) -> None:
        self.producer.flush(10)

    def discard(self) -> None:
        self.store.drop()


def _by_tenant(deletions: list[LatentDeletion]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d in deletions:
        out.setdefault(d.tenant, []).append(d.artifact_id)
    return out
