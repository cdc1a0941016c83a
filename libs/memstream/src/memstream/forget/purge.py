"""A purge of one subject: what it reaches, its tombstone, and the report it answers with.

The API plans from the graph (which events are linked to the subject, what derives from
them), appends a ``memory.purge`` tombstone that names the subject by digest and the events
by id, then watches the stores obey it. Each consumer applies the tombstone itself, so a
replay or a restart obeys it too.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel, Field

from memstream.events.envelope import MemoryPurge
from memstream.events.payloads import MemoryPurgePayload
from memstream.graph.port import PurgeScope
from memstream.ledger.purge import subject_digest

PURGE_STREAM = "purges"  # the tenant's stream that holds its tombstones
# Stores that apply a tombstone and that the API can watch converge.
WATCHED = ("graph", "latents", "vectors", "archive")


class PurgeReport(BaseModel):
    """What a purge removed (or, with ``dry_run``, would remove) where."""

    subject: str = Field(description="the subject as asked")
    subject_key: str = Field(description="the entity key it resolved to")
    dry_run: bool
    tombstone_id: str | None = Field(description="the memory.purge event; none on a dry run")
    removed: dict[str, int] = Field(
        description="per item kind: events, facts, latent_artifacts, vector_points, "
        "archive_lines, summary_cache_entries, recent_packets, data_keys (destroyed: "
        "every sealed copy of the events' content, in every topic and backup, unreadable), "
        "artifact_keys (destroyed: the sealed latent artifacts the live graph held)"
    )
    completed: dict[str, bool] = Field(
        default_factory=dict,
        description="per store: no longer holds the purged items (empty on a dry run)",
    )
    complete: bool = Field(description="every store completed (true on a dry run)")


def planned(scope: PurgeScope) -> dict[str, int]:
    """The store-side items a purge of ``scope`` removes: one ledger line, one event node
    and one point per event, the facts drawn from them, the artifacts built from them."""
    events = len(scope.event_ids)
    return {
        "events": events,
        "facts": len(scope.fact_ids),
        "latent_artifacts": len(scope.latent_ids),
        "vector_points": events + len(scope.latent_ids),
        "archive_lines": events,
    }


def tombstone(
    tenant: str, subject_key: str, scope: PurgeScope, now: datetime, secret: bytes
) -> MemoryPurge:
    """The ``memory.purge`` event: the subject as a keyed digest (``secret``: the tenant's),
    the events by id, no text."""
    return MemoryPurge(
        id=str(uuid.uuid4()),
        tenant=tenant,
        stream=PURGE_STREAM,
        agent="purge",
        occurred_at=now,
        type="memory.purge",
        payload=MemoryPurgePayload(
            subject=subject_digest(secret, tenant, subject_key),
            event_ids=scope.event_ids,
            # No free-text reason: it would be ledgered, and could name the subject.
        ),
    )


def is_complete(completed: Mapping[str, bool]) -> bool:
    return all(completed.values())
