"""The prospective pass: a memory weave for one reasoning step, inside the packet's budget.

Pure: the packet (already budgeted without the weave), the relevant artifacts and a measure
of the weave's tokens in; the weave out, as data (``checkout.packet`` renders it). Latent
artifacts enter as suggestive context, flagged when they are review-pending or weak; the
packet's cited items enter as the evidence that authorizes claims. Items are dropped from
the end until the weave fits its budget.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from memstream.records.latent import LatentArtifact, Purpose
from memstream.records.packet import (
    CheckoutPacket,
    MemoryWeave,
    WeaveBudget,
    WeaveContext,
    WeaveEvidence,
)
from memstream.records.projected import SourceRef

# The tokens a weave takes in the prompt, as the packet's renderer writes it.
WeaveMeasure = Callable[[MemoryWeave], int]
LOW_CONFIDENCE = 0.5
MAX_REFS = 12
# Which artifact types serve a purpose, most useful first.
PURPOSE_TYPES: dict[Purpose, tuple[str, ...]] = {
    "planning": ("procedure_latent", "failure_latent", "preference_latent", "episode_latent"),
    "execution": ("procedure_latent", "failure_latent", "preference_latent", "episode_latent"),
    "review": ("failure_latent", "episode_latent", "procedure_latent", "preference_latent"),
    "reflection": ("episode_latent", "failure_latent", "procedure_latent", "preference_latent"),
    "synthesis": ("episode_latent", "preference_latent", "procedure_latent", "failure_latent"),
    "general": ("episode_latent", "preference_latent", "procedure_latent", "failure_latent"),
}
PHASES: dict[Purpose, str] = {
    "planning": "planning",
    "execution": "execution",
    "review": "review",
    "reflection": "reflection",
    "synthesis": "synthesis",
    "general": "orientation",
}
EXPECTED_USE = [
    "orientation, planning and recall",
    "cited checkout evidence for factual claims",
]
PROHIBITED_USE = [
    "citing latent context as proof",
    "acting on latent context that conflicts with accepted evidence without re-querying",
]


def _flags(a: LatentArtifact) -> list[str]:
    flags = ["inferred"]
    if a.review_status != "accepted":
        flags.append(f"review_{'pending' if a.review_status == 'proposed' else a.review_status}")
    if a.confidence < LOW_CONFIDENCE:
        flags.append("low_confidence")
    if a.stale_at is not None:
        flags.append("stale")
    return flags


def _by_purpose(artifacts: list[LatentArtifact], order: tuple[str, ...]) -> list[LatentArtifact]:
    """The current artifacts of the purpose's types: the best of each type first (in the
    purpose's order), then the second of each, ...; so a budget that keeps few still keeps
    one of every kind the step can use."""
    seen: dict[str, int] = {}
    ranked: list[tuple[int, int, LatentArtifact]] = []
    for a in artifacts:
        if a.artifact_type in order and a.stale_at is None:
            n = seen[a.artifact_type] = seen.get(a.artifact_type, -1) + 1
            ranked.append((n, order.index(a.artifact_type), a))
    return [a for _, _, a in sorted(ranked, key=lambda r: (r[0], r[1]))]


def _evidence(packet: CheckoutPacket) -> list[WeaveEvidence]:
    """The packet's cited items, answer support first, once each; records of work only
    where the goal asks about the work (``SynthesisPlan.admits``)."""
    out: dict[str, SourceRef] = {}
    for f in packet.facts:
        out.setdefault(f.fact_id, f.ref)
    for r in packet.evidence:
        out.setdefault(r.support_id, r.ref)
    for s in packet.snippets:
        if packet.synthesis_plan.admits(s.type):
            out.setdefault(s.item_id, s.ref)
    support = [i for a in packet.answer_candidates for i in a.support_ids]
    order = [i for i in support if i in out] + [i for i in out if i not in support]
    return [WeaveEvidence(item_id=i, ref=out[i]) for i in dict.fromkeys(order)]


def build_weave(
    *,
    goal: str,
    purpose: Purpose,
    packet: CheckoutPacket,
    artifacts: list[LatentArtifact],
    allowed: int,
    measure: WeaveMeasure,
    created_at: str,
    version: str,
) -> MemoryWeave:
    """The weave for ``goal`` at ``purpose``, at most ``allowed`` tokens in the prompt."""
    chosen = _by_purpose(artifacts, PURPOSE_TYPES[purpose])
    context = [
        WeaveContext(
            artifact_id=a.artifact_id,
            artifact_type=a.artifact_type,
            summary=a.summary,
            confidence=a.confidence,
            review_status=a.review_status,
            flags=_flags(a),
        )
        for a in chosen
    ]
    evidence = _evidence(packet)
    warnings = [w.message for w in packet.warnings]
    if not evidence:
        warnings.append(
            "no ledger evidence in this packet: latent context alone authorizes nothing"
        )
    weave = _weave(goal, purpose, chosen, context, evidence, warnings, created_at, version)
    while True:
        used = measure(weave)
        if used <= allowed or not (context or evidence):
            break
        # at a tie the evidence goes first: the packet cites it already, while the context
        # is what only the weave carries
        if evidence and len(evidence) >= len(context):
            evidence = evidence[:-1]
        else:
            chosen, context = chosen[:-1], context[:-1]
        weave = _weave(goal, purpose, chosen, context, evidence, warnings, created_at, version)
    return weave.model_copy(update={"token_budget": WeaveBudget(allowed=allowed, used=used)})


def _weave(
    goal: str,
    purpose: Purpose,
    chosen: list[LatentArtifact],
    context: list[WeaveContext],
    evidence: list[WeaveEvidence],
    warnings: list[str],
    created_at: str,
    version: str,
) -> MemoryWeave:
    refs: dict[str, SourceRef] = {}
    for a in chosen:
        for r in a.source_event_refs[:MAX_REFS]:
            refs.setdefault(r.event_id, r)
    return MemoryWeave(
        weave_id=f"wv-{uuid.uuid4().hex}",
        goal=goal,
        reasoning_phase=PHASES[purpose],
        purpose_profile=purpose,
        artifact_ids=[a.artifact_id for a in chosen],
        source_event_refs=list(refs.values()),
        accepted_evidence=evidence,
        inferred_context=context,
        warnings=warnings,
        token_budget=WeaveBudget(allowed=0, used=0),
        expected_use=EXPECTED_USE,
        prohibited_use=PROHIBITED_USE,
        created_at=created_at,
        projection_version=version,
    )
