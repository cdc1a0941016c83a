"""Hand-built latent artifacts (what the latent builder would send on ``memory.latents``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memstream.records.latent import (
    EpisodeDetails,
    LatentArtifact,
    PreferenceDetails,
    PreferenceValue,
    artifact_id,
    input_fingerprint,
)
from memstream.records.projected import SourceRef

CONFIG = "cfg-test"
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def ref(
    tenant: str, event_id: str, stream: str = "atelier de céramique", seq: int = 1
) -> SourceRef:
    return SourceRef(tenant=tenant, stream=stream, seq=seq, hash=f"h-{event_id}", event_id=event_id)


def episode(
    tenant: str,
    stream: str,
    summary: str,
    refs: list[SourceRef],
    *,
    start: datetime = T0,
    key_terms: list[str] | None = None,
    speakers: list[str] | None = None,
    entities: list[str] | None = None,
    centroid: list[float] | None = None,
    payload_ref: str | None = None,
    group: str | None = None,
) -> LatentArtifact:
    group_key = group or f"{tenant}/{stream}/{start.isoformat()}"
    fingerprint = input_fingerprint([r.hash for r in refs])
    return LatentArtifact(
        artifact_id=artifact_id(CONFIG, "episode_latent", group_key, fingerprint),
        artifact_type="episode_latent",
        tenant=tenant,
        group_key=group_key,
        altitude="episode",
        summary=summary,
        source_event_refs=refs,
        source_entity_refs=entities or [],
        valid_from=start,
        created_at=start + timedelta(days=1),
        projection_version="latent-test",
        config_hash=CONFIG,
        input_fingerprint=fingerprint,
        confidence=0.7,
        payload_kind="centroid" if centroid is not None else None,
        payload_ref=payload_ref,
        centroid=centroid,
        details=EpisodeDetails(
            stream=stream,
            events=len(refs),
            speakers=speakers or ["Inès"],
            key_entities=entities or [],
            key_terms=key_terms or [],
            values=[],
            start=start,
            end=start + timedelta(hours=1),
        ),
        diagnostics={"turns": len(refs), "note": "hand-built"},
    )


def preference(
    tenant: str,
    subject: str,
    prefs: dict[str, str],
    refs: list[SourceRef],
    *,
    since: datetime = T0,
    supersedes: list[str] | None = None,
) -> LatentArtifact:
    group_key = f"{tenant}/prefs/{subject}"
    fingerprint = input_fingerprint([r.hash for r in refs] + sorted(prefs.values()))
    return LatentArtifact(
        artifact_id=artifact_id(CONFIG, "preference_latent", group_key, fingerprint),
        artifact_type="preference_latent",
        tenant=tenant,
        group_key=group_key,
        altitude="latent",
        summary=f"{subject} prefers " + ", ".join(f"{k}: {v}" for k, v in prefs.items()),
        source_event_refs=refs,
        source_entity_refs=[subject.lower()],
        valid_from=since,
        created_at=since + timedelta(days=1),
        projection_version="latent-test",
        config_hash=CONFIG,
        input_fingerprint=fingerprint,
        confidence=0.9,
        supersedes=supersedes or [],
        details=PreferenceDetails(
            subject=subject,
            preferences=[
                PreferenceValue(key=k, value=v, fact_id=f"{refs[0].event_id}#0", since=since)
                for k, v in prefs.items()
            ],
        ),
    )


def stale(a: LatentArtifact, at: datetime | None = None) -> LatentArtifact:
    """The same artifact re-sent because a source was superseded."""
    return a.model_copy(update={"stale_at": at or a.created_at + timedelta(days=30)})
