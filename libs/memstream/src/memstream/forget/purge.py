"""A purge of one subject or one scope: what it reaches, its tombstone, and its report.

The API plans from the graph (which events are linked to the subject, or lie in the scope;
what derives from them), appends a ``memory.purge`` tombstone that names the subject by
digest and the events by id, then watches the stores obey it. Each consumer applies the
tombstone itself, so a replay or a restart obeys it too.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Set
from datetime import datetime
from typing import Any

import orjson
from pydantic import BaseModel, Field

from memstream.events.envelope import MemoryPurge
from memstream.events.payloads import MemoryPurgePayload
from memstream.graph.port import PurgeScope
from memstream.ledger.purge import subject_digest
from memstream.shred.seal import CLEAR_FIELDS, is_sealed, needs_key
from memstream.text.names import names_in

PURGE_STREAM = "purges"  # the tenant's stream that holds its tombstones
# Stores that apply a tombstone and that the API can watch converge.
WATCHED = ("graph", "latents", "vectors", "archive")


class TopicReport(BaseModel):
    """What a purge did to one topic's copies (records are never deleted from a topic)."""

    sealed: bool = Field(
        description="the topic's copies of what the purge reaches are sealed under data keys"
    )
    keys_destroyed: int = Field(
        description="data keys destroyed: the copies sealed under them no longer open"
    )


class Residual(BaseModel):
    """Copies of the purged content that could not be made unreadable: written in the clear."""

    topic: str
    count: int = Field(description="records in the clear that name the subject or are in scope")
    until: datetime = Field(
        description="the latest time they may still exist: produced plus the topic's retention"
    )
    note: str = Field(description="what keeps them, and until when")


RETENTION_NOTE = (
    "written in the clear (a producer without the data key store); a broker enforcing "
    "retention deletes them by 'until'. The embedded broker enforces no retention and keeps "
    "topics in memory: there they remain until it restarts"
)


class PlannedEvent(BaseModel):
    """One event a purge removes: enough to see collateral before anything goes."""

    event_id: str
    stream: str
    agent: str
    user: str | None
    occurred_at: datetime


class PurgeReport(BaseModel):
    """What a purge removed (or, with ``dry_run``, would remove) where."""

    subject: str = Field(
        description="the subject as asked, or the scope (`user=alice agent=planner`)"
    )
    subject_key: str = Field(description="the entity key it resolved to (empty for a scope)")
    dry_run: bool
    events: list[PlannedEvent] = Field(
        default_factory=list,
        description="every event it removes (or would remove), in time order: the subject's "
        "own and those that only mention it, so collateral shows before anything goes",
    )
    tombstone_id: str | None = Field(description="the memory.purge event; none on a dry run")
    tombstone_ids: list[str] = Field(
        default_factory=list,
        description="every memory.purge event of the purge, the first being tombstone_id "
        "(one per 10,000 events it removes; none on a dry run)",
    )
    removed: dict[str, int] = Field(
        description="per item kind: events, facts, latent_artifacts, vector_points, "
        "archive_lines, summary_cache_entries, recent_packets, data_keys (destroyed: "
        "every sealed copy of the events' content, in every topic and backup, unreadable), "
        "artifact_keys (destroyed: the sealed latent artifacts the live graph held), "
        "checkout_traces (keys destroyed of the traces naming the subject or citing it)"
    )
    completed: dict[str, bool] = Field(
        default_factory=dict,
        description="per store: no longer holds the purged items (empty on a dry run)",
    )
    complete: bool = Field(description="every store completed (true on a dry run)")
    topics: dict[str, TopicReport] = Field(
        default_factory=dict,
        description="per Kafka topic: whether its copies are sealed and how many keys went "
        "(empty on a dry run)",
    )
    residual: list[Residual] = Field(
        default_factory=list,
        description="per topic, clear copies a purge cannot reach and until when they may "
        "remain (empty on a dry run)",
    )


def _base(item_id: str) -> str:
    """The event an item rests on (a fact id is ``<event_id>#n``)."""
    return item_id.split("#", 1)[0]


def cites_any(cited: list[Any], ids: Set[str]) -> bool:
    """Whether any cited id is purged, or rests on a purged event."""
    return any(isinstance(i, str) and (i in ids or _base(i) in ids) for i in cited)


def trace_reaches(trace: Mapping[str, Any], forms: frozenset[str], ids: Set[str]) -> bool:
    """An opened checkout trace the purge must shred: its question or question family names
    the subject (``forms``: :func:`memstream.text.names.name_forms`), or it cites an
    item of ``ids`` (events, facts, latents) or a fact of a purged event."""
    query = trace.get("query")
    if isinstance(query, str) and names_in(query, forms):
        return True
    family = trace.get("family")
    named = family.get("entities", []) if isinstance(family, dict) else []
    if any(isinstance(e, str) and (e in forms or names_in(e, forms)) for e in named):
        return True
    return cites_any([*trace.get("answer_ids", []), *trace.get("cited_ids", [])], ids)


def clear_event_reaches(doc: Mapping[str, Any], forms: frozenset[str], ids: Set[str]) -> bool:
    """A raw event left in the clear (not sealed, not a tombstone) that the purge reaches:
    in scope by id, or naming the subject anywhere in its content."""
    if is_sealed(doc) or not needs_key(doc):
        return False
    if doc.get("id") in ids:
        return True
    content = {k: v for k, v in doc.items() if k not in CLEAR_FIELDS}
    return names_in(orjson.dumps(content).decode(), forms)


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


# Ids per tombstone: a purge reaching more events writes several, so that none nears the
# broker's record size (an id is about 40 bytes; 1 MB is the default limit).
TOMBSTONE_EVENT_IDS = 10_000


def tombstones(
    tenant: str,
    subject_key: str,
    scope: PurgeScope,
    now: datetime,
    secret: bytes,
    per: int = TOMBSTONE_EVENT_IDS,
) -> list[MemoryPurge]:
    """The ``memory.purge`` events: the subject as a keyed digest (``secret``: the tenant's),
    the events by id, ``per`` ids each (at least one tombstone), no text. Every reader
    forgets by the ids a tombstone lists, so several are one purge in parts."""
    digest = subject_digest(secret, tenant, subject_key)
    ids = scope.event_ids
    parts = [ids[i : i + per] for i in range(0, len(ids), per)] or [[]]
    return [
        MemoryPurge(
            id=str(uuid.uuid4()),
            tenant=tenant,
            stream=PURGE_STREAM,
            agent="purge",
            occurred_at=now,
            type="memory.purge",
            # No free-text reason: it would be ledgered, and could name the subject.
            payload=MemoryPurgePayload(subject=digest, event_ids=part),
        )
        for part in parts
    ]


def is_complete(completed: Mapping[str, bool]) -> bool:
    return all(completed.values())
