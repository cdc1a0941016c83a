"""Latent context of a packet: the artifacts a question is about, labelled suggestive."""

from __future__ import annotations

from memstream.checkout.packet.snippets import focus_stems
from memstream.records.latent import EpisodeDetails, LatentArtifact
from memstream.records.packet import LatentItem, SynthesisPlan
from memstream.text.words import content_stems

MAX_LATENT_ITEMS = 3
MAX_REFS = 6  # the rest resolve through lineage of the artifact id


def _about(a: LatentArtifact) -> str:
    d = a.details
    extra = " ".join(d.key_terms + d.key_entities) if isinstance(d, EpisodeDetails) else ""
    return f"{a.summary} {extra} {' '.join(a.source_entity_refs)}"


def relevant_artifacts(plan: SynthesisPlan, found: list[LatentArtifact]) -> list[LatentArtifact]:
    """The artifacts that share a named entity or a focus word with the question, in the
    order found: a latent hit on vector similarity alone steers nothing."""
    entities = set(plan.entity_keys())
    focus = focus_stems(plan)
    out = []
    for a in found:
        stems = content_stems(_about(a))
        if entities & set(a.source_entity_refs) or focus & stems or entities & stems:
            out.append(a)
    return out


def latent_item(a: LatentArtifact) -> LatentItem:
    return LatentItem(
        artifact_id=a.artifact_id,
        artifact_type=a.artifact_type,
        summary=a.summary,
        confidence=a.confidence,
        source_event_refs=a.source_event_refs[:MAX_REFS],
    )
