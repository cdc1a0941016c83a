"""The deterministic extractor: one ledger entry -> typed projection records (pure)."""

from __future__ import annotations

from typing import Any

from memstream.events.payloads import MemoryFeedbackPayload, MemoryInvalidatePayload
from memstream.projection.dates import dates
from memstream.projection.quantities import quantities
from memstream.projection.text import event_text
from memstream.records.projected import (
    EntityRecord,
    EventRecord,
    Extraction,
    FactRecord,
    FeedbackRecord,
    GraphBatch,
    InvalidationRecord,
    MentionRecord,
    Side,
    SourceRef,
)
from memstream.text.names import entity_key, name_candidates
from memstream.times import z_suffix

# Part of every projection version's config hash: bump when extraction output changes.
# det-2: names used as a direct address are not mentions
# det-3: accent-folded keys without a leading "the"; entity flags; facts carry recorded_at
# det-4: feedback records
# det-5: names may begin with any capital letter, not only A-Z ("Éloïse", "Łukasz")
# det-6: invalidation records; names may hold combining marks ("Ọ̀kàfor")
EXTRACTOR_VERSION = "det-6"
_SCALAR_META = (str, int, float, bool)
# Whose side of the conversation an event's actor speaks for.
_SIDES: dict[str, Side] = {"message.user": "user", "message.assistant": "assistant"}


def event_record(entry: dict[str, Any]) -> EventRecord:
    meta = entry.get("metadata") or {}
    return EventRecord(
        tenant=entry["tenant"],
        event_id=entry["id"],
        stream=entry["stream"],
        seq=entry["seq"],
        hash=entry["hash"],
        prev_hash=entry["prev_hash"],
        type=entry["type"],
        agent=entry["agent"],
        occurred_at=z_suffix(entry["occurred_at"]),
        ingested_at=z_suffix(entry["ingested_at"]),
        text=event_text(entry),
        metadata={k: v for k, v in meta.items() if v is None or isinstance(v, _SCALAR_META)},
        user=entry.get("user"),
        caused_by=[str(i) for i in entry.get("caused_by") or []],
    )


def _fact(entry: dict[str, Any], ref: SourceRef) -> tuple[FactRecord, list[EntityRecord]] | None:
    p = entry.get("payload") or {}
    tenant, occurred = entry["tenant"], z_suffix(entry["occurred_at"])
    if entry["type"] == "fact.asserted":
        subject, predicate, kind = str(p["subject"]), str(p["predicate"]), "fact"
        obj = p.get("object")
        value = p.get("value")
        valid_from = z_suffix(str(p.get("valid_from") or occurred))
        confidence = float(p.get("confidence", 1.0))
    elif entry["type"] == "preference.set":
        subject = str(p.get("subject") or entry["agent"])
        predicate, kind = f"prefers:{p['key']}", "preference"
        obj, value, valid_from, confidence = None, p.get("value"), occurred, 1.0
    else:
        return None
    entities = [EntityRecord(tenant=tenant, key=entity_key(subject), name=subject, kind="thing")]
    object_key = None
    if obj is not None:
        object_key = entity_key(str(obj))
        entities.append(EntityRecord(tenant=tenant, key=object_key, name=str(obj), kind="thing"))
    shown = str(obj) if obj is not None else ("" if value is None else str(value))
    fact = FactRecord(
        tenant=tenant,
        recorded_at=occurred,
        fact_id=f"{entry['id']}#0",
        subject_key=entity_key(subject),
        predicate=predicate,
        object_key=object_key,
        value=value,
        value_text=shown,
        unit=p.get("unit"),
        valid_from=valid_from,
        confidence=confidence,
        source=ref,
        kind=kind,
        source_agent=str(entry["agent"]),
        source_user=entry.get("user"),
    )
    return fact, entities


def _feedback(entry: dict[str, Any]) -> list[FeedbackRecord]:
    """One record per target of a ``memory.feedback`` entry."""
    if entry["type"] != "memory.feedback":
        return []
    p = MemoryFeedbackPayload.model_validate(entry.get("payload") or {})
    return [
        FeedbackRecord(
            tenant=entry["tenant"],
            feedback_id=f"{entry['id']}#{i}",
            event_id=entry["id"],
            target_id=target,
            signal=p.signal,
            certainty=p.certainty,
            source=p.source,
            task_id=p.task_id,
            outcome=p.outcome,
            family=p.family,
            at=z_suffix(entry["occurred_at"]),
        )
        for i, target in enumerate(dict.fromkeys(p.target_ids))
    ]


def _invalidations(entry: dict[str, Any]) -> list[InvalidationRecord]:
    """One record per target of a ``memory.invalidate`` entry (proposals and decisions too)."""
    if entry["type"] != "memory.invalidate":
        return []
    p = MemoryInvalidatePayload.model_validate(entry.get("payload") or {})
    return [
        InvalidationRecord(
            tenant=entry["tenant"],
            invalidation_id=f"{entry['id']}#{i}",
            event_id=entry["id"],
            target_id=target,
            reason=p.reason,
            status=p.review_status,
            proposal_id=p.proposal_id,
            at=z_suffix(entry["occurred_at"]),
        )
        for i, target in enumerate(dict.fromkeys(p.target_ids))
    ]


def extract(entry: dict[str, Any], light: bool = False) -> Extraction:
    """Entities (the agent always; names in text), facts, quantities and dates of one entry.

    ``light`` skips quantities and dates: no projection stores them (checkout and the
    latent builder find them in the text); feedback and invalidations are always read.
    """
    event = event_record(entry)
    tenant = event.tenant
    ref = event.ref
    entities: dict[str, EntityRecord] = {}
    mentions: dict[str, MentionRecord] = {}

    def mention(key: str, name: str, kind: str, role: str) -> None:
        if not key:
            return
        record = EntityRecord(
            tenant=tenant,
            key=key,
            name=name,
            kind=kind,
            actor=role == "actor",
            subject=role == "subject",
            side=_SIDES.get(event.type) if role == "actor" else None,
        )
        known = entities.get(key)
        entities[key] = record if known is None else known.merged(record)
        if key not in mentions:
            mentions[key] = MentionRecord(
                tenant=tenant, event_id=event.event_id, entity_key=key, role=role
            )

    mention(entity_key(event.agent), event.agent, "agent", "actor")
    facts = []
    found = _fact(entry, ref)
    if found is not None:
        fact, fact_entities = found
        facts.append(fact)
        for i, e in enumerate(fact_entities):
            mention(e.key, e.name, e.kind, "subject" if i == 0 else "object")
    for name in name_candidates(event.text):
        mention(entity_key(name), name, "name", "mention")
    if entry["type"] == "tool.call" or entry["type"] == "tool.result":
        tool = str((entry.get("payload") or {}).get("tool", ""))
        mention(entity_key(tool), tool, "tool", "mention")
    return Extraction(
        event=event,
        entities=list(entities.values()),
        mentions=list(mentions.values()),
        facts=facts,
        feedback=_feedback(entry),
        invalidations=_invalidations(entry),
        quantities=[] if light else quantities(event.text),
        dates=[] if light else dates(event.text, event.occurred_at),
    )


def graph_batch(extractions: list[Extraction]) -> GraphBatch:
    """Merge extractions into one graph write (entities de-duplicated by key)."""
    entities: dict[tuple[str, str], EntityRecord] = {}
    for x in extractions:
        for e in x.entities:
            known = entities.get((e.tenant, e.key))
            entities[(e.tenant, e.key)] = e if known is None else known.merged(e)
    return GraphBatch(
        events=[x.event for x in extractions],
        entities=list(entities.values()),
        mentions=[m for x in extractions for m in x.mentions],
        facts=[f for x in extractions for f in x.facts],
        feedback=[b for x in extractions for b in x.feedback],
        invalidations=[v for x in extractions for v in x.invalidations],
    )
