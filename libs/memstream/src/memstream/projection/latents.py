"""How a latent artifact from ``memory.latents`` projects: decoding and its vector point.

One point per current artifact (``latent:<tenant>:<artifact_id>``, payload ``kind: "latent"``);
an artifact re-sent with ``stale_at`` loses its point, so search never returns it, while the
graph keeps it (listed with ``include_stale``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError

from memstream.embed.port import Embedder
from memstream.ledger.opening import EntryOpener
from memstream.records.latent import (
    EpisodeDetails,
    LatentArtifact,
    LatentDeletion,
    LatentRecord,
    PolicyDetails,
    PreferenceDetails,
    TaskDetails,
)
from memstream.records.projected import VectorPoint
from memstream.shred.artifacts import artifact_ref, is_deletion, open_artifact
from memstream.shred.seal import SealBroken, is_sealed
from memstream.times import as_utc, utc_z

CENTROID_REF_PREFIX = "centroid:"  # payload_ref of a centroid: "centroid:<embedder name>"
LATENT_KIND = "latent"  # the payload ``kind`` of artifacts' points (events' is "event")
_WORD = re.compile(r"\w+")


def decode_artifacts(
    raws: Sequence[bytes | None], opener: EntryOpener | None = None
) -> list[LatentRecord | str | None]:
    """Each record's artifact or deletion, None for an artifact whose data key was destroyed
    (a purge shredded it: skipped like a deleted one), or why the record is neither (a dead
    letter's reason). Sealed records open through ``opener`` (one key store round trip per
    tenant for the batch); a sealed record read without one is our bug and raises."""
    docs = [_parse(raw) for raw in raws]
    sealed = [d for d in docs if isinstance(d, dict) and is_sealed(d)]
    if sealed and opener is None:
        raise RuntimeError("a sealed latent artifact read without a data key store")
    keys = opener.artifact_keys(sealed) if opener is not None and sealed else {}
    return [d if isinstance(d, str) else _record(d, keys) for d in docs]


def decode_artifact(
    raw: bytes | None, opener: EntryOpener | None = None
) -> LatentRecord | str | None:
    """One record's :func:`decode_artifacts`."""
    return decode_artifacts([raw], opener)[0]


def _parse(raw: bytes | None) -> dict[str, Any] | str:
    if raw is None:
        return "empty record (no value)"
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return f"not a latent artifact: undecodable ({exc})"
    return doc if isinstance(doc, dict) else f"not a latent artifact: a JSON {type(doc).__name__}"


def _record(doc: dict[str, Any], keys: dict[tuple[str, str], bytes]) -> LatentRecord | str | None:
    if is_sealed(doc):
        ref = artifact_ref(doc)
        if ref is None:
            return "sealed latent artifact without a string tenant and artifact_id"
        if ref not in keys:
            return None
        try:
            doc = open_artifact(doc, keys[ref])
        except SealBroken as exc:
            return f"sealed latent artifact does not open: {exc}"
    try:
        if is_deletion(doc):
            return LatentDeletion.model_validate(doc)
        return LatentArtifact.model_validate(doc)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}"
            for e in exc.errors()[:3]
        )
        return f"not a latent artifact ({exc.error_count()} error(s)): {problems}"


def split_records(records: list[LatentRecord]) -> tuple[list[LatentArtifact], list[LatentDeletion]]:
    """(artifacts to upsert, deletions) of a batch: the last record of an id decides."""
    last = {(r.tenant, r.artifact_id): r for r in records}
    artifacts = [r for r in last.values() if isinstance(r, LatentArtifact)]
    return artifacts, [r for r in last.values() if isinstance(r, LatentDeletion)]


def latest(artifacts: list[LatentArtifact]) -> list[LatentArtifact]:
    """One record per artifact: the last one received (records of an id are upserts)."""
    return list({(a.tenant, a.artifact_id): a for a in artifacts}.values())


def point_key(a: LatentRecord) -> str:
    return f"latent:{a.tenant}:{a.artifact_id}"


def search_text(a: LatentArtifact) -> str:
    """The summary plus the words its details name (who, what), for BM25."""
    d = a.details
    words: list[str] = []
    if isinstance(d, EpisodeDetails):
        words = [*d.speakers, *d.key_entities, *d.key_terms]
    elif isinstance(d, PreferenceDetails):
        words = [d.subject] + [f"{p.key} {p.value}" for p in d.preferences]
    elif isinstance(d, TaskDetails):
        words = [d.goal, *d.goal_terms]
    elif isinstance(d, PolicyDetails):
        words = [*d.family.entities, *d.family.terms]
    # Words the summary already has are left out: repeating them would weigh them twice.
    seen = {w.lower() for w in _WORD.findall(a.summary)}
    extra: list[str] = []
    for w in (w for phrase in words for w in _WORD.findall(phrase)):
        if w.lower() not in seen:
            seen.add(w.lower())
            extra.append(w)
    return " ".join([a.summary, *extra]).strip()


def usable_centroid(a: LatentArtifact, embedder: Embedder) -> list[float] | None:
    """The artifact's centroid when it lives in this version's vector space, else None.

    A centroid built under another embedder (or of another size) would be compared with
    query vectors it has nothing in common with, so the summary is embedded instead.
    """
    if a.centroid is None or a.payload_kind != "centroid" or len(a.centroid) != embedder.dim:
        return None
    return a.centroid if a.payload_ref == CENTROID_REF_PREFIX + embedder.name else None


def latent_point(a: LatentArtifact, dense: list[float]) -> VectorPoint:
    """The artifact's point; ``occurred_at`` = ``valid_from`` bounds it under ``as_of``."""
    return VectorPoint(
        point_key=point_key(a),
        dense=dense,
        text=search_text(a),
        payload={
            "tenant": a.tenant,
            "kind": LATENT_KIND,
            "altitude": a.altitude,
            "artifact_id": a.artifact_id,
            "artifact_type": a.artifact_type,
            "stream": a.stream,
            "occurred_at": utc_z(as_utc(a.valid_from)),
            "valid_to": utc_z(as_utc(a.valid_to)) if a.valid_to is not None else None,
            "entity_keys": a.source_entity_refs,
            "source_ids": list(dict.fromkeys(a.source_ids)),
            "confidence": a.confidence,
            "review_status": a.review_status,
            "text": a.summary,
        },
    )


@dataclass
class LatentChanges:
    """What a batch of artifact records does to the index."""

    upserts: list[VectorPoint] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)  # point keys of artifacts gone stale


def latent_changes(artifacts: list[LatentArtifact], embedder: Embedder) -> LatentChanges:
    """Points for the current artifacts (centroid or embedded summary), deletions for stale."""
    out = LatentChanges()
    current: list[LatentArtifact] = []
    for a in latest(artifacts):
        if a.stale_at is not None:
            out.deletes.append(point_key(a))
        else:
            current.append(a)
    to_embed = [a.summary for a in current if usable_centroid(a, embedder) is None]
    embedded = iter(embedder.embed(to_embed).tolist() if to_embed else [])
    for a in current:  # the embedded summaries come back in the order of ``current``
        centroid = usable_centroid(a, embedder)
        out.upserts.append(latent_point(a, centroid if centroid is not None else next(embedded)))
    return out
