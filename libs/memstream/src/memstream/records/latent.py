"""Latent artifacts: derived, versioned, discardable memory.

An artifact is never authoritative: it may steer retrieval, ranking and planning, and every
one cites the ledger events it was derived from (``source_event_refs``), so lineage resolves
it to evidence. ``artifact_id`` comes from the materialization key (builder config hash +
input fingerprint + group key): the same builder over the same ledger gives the same ids.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal, get_args

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from memstream.events.payloads import QuestionFamily
from memstream.records.altitudes import ArtifactType
from memstream.records.projected import JsonScalar, SourceRef

Method = Literal["deterministic", "llm_assisted", "learned_scorer", "hybrid"]
ReviewStatus = Literal["proposed", "accepted", "rejected", "deferred", "conflicted"]
Purpose = Literal["planning", "execution", "review", "reflection", "synthesis", "general"]
PURPOSES: tuple[Purpose, ...] = get_args(Purpose)
PayloadKind = Literal["centroid", "memory_weave", "sparse_feature_vector"]
ARTIFACT_ID_PREFIX = "lat-"


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


class EpisodeDetails(_M):
    """One session (a stream segment without a long pause): who, what, which values, when."""

    kind: Literal["episode"] = "episode"
    stream: str
    events: int
    speakers: list[str]
    key_entities: list[str]
    key_terms: list[str]
    values: list[str]  # quantities and dates found in the turns, as written
    start: AwareDatetime
    end: AwareDatetime


class PreferenceValue(_M):
    key: str  # the preference's predicate without its ``prefers:`` prefix
    value: str
    fact_id: str
    since: AwareDatetime


class PreferenceDetails(_M):
    """The preferences of one subject that hold now (superseded ones are not listed)."""

    kind: Literal["preference"] = "preference"
    subject: str
    preferences: list[PreferenceValue]


class TaskRun(_M):
    task_id: str
    status: str
    outcome_event_id: str
    steps: list[str]  # event types and short texts between start and outcome
    reason: str = ""


class TaskDetails(_M):
    """What tasks of one goal did: the steps of those that worked (procedure) or how they
    failed and which memories they relied on (failure)."""

    kind: Literal["task"] = "task"
    goal: str
    goal_terms: list[str]
    runs: list[TaskRun]
    memories: list[str]  # ids the outcomes named as used


class PolicyDetails(_M):
    """Feedback aggregated per question family: memories favoured and disfavoured."""

    kind: Literal["policy"] = "policy"
    family: QuestionFamily
    favoured: list[str]
    disfavoured: list[str]
    signals: int


Details = Annotated[
    EpisodeDetails | PreferenceDetails | TaskDetails | PolicyDetails, Field(discriminator="kind")
]


class LlmAudit(_M):
    """How an LLM-written summary came to be: an audit tells it from a deterministic build."""

    model: str
    temperature: float
    prompt_template_hash: str
    rendered_prompt_hash: str
    raw_response: str


class LatentArtifact(_M):
    """One artifact as it travels on ``memory.latents`` and is read back from the graph.

    The record of an id may be sent again with ``stale_at`` set (its source was superseded);
    consumers upsert by ``artifact_id``.
    """

    artifact_id: str
    artifact_type: ArtifactType
    tenant: str
    group_key: str
    altitude: Literal["episode", "latent"]
    summary: str
    source_event_refs: list[SourceRef]
    source_entity_refs: list[str] = Field(default_factory=list)
    valid_from: AwareDatetime
    valid_to: AwareDatetime | None = None
    created_at: AwareDatetime
    projection_version: str  # the builder's version
    config_hash: str
    input_fingerprint: str
    method: Method = "deterministic"
    confidence: float = Field(ge=0.0, le=1.0)
    review_status: ReviewStatus = "accepted"
    authority_status: Literal["non_authoritative"] = "non_authoritative"
    purpose_profile: Purpose = "general"
    reasoning_phase: str = "orientation"
    payload_kind: PayloadKind | None = None
    payload_ref: str | None = None
    supersedes: list[str] = Field(default_factory=list)
    stale_at: AwareDatetime | None = None
    details: Details
    centroid: list[float] | None = None  # the payload when ``payload_kind`` is centroid
    diagnostics: dict[str, JsonScalar] = Field(default_factory=dict)
    audit: LlmAudit | None = None

    @property
    def stream(self) -> str | None:
        return self.details.stream if isinstance(self.details, EpisodeDetails) else None

    @property
    def source_ids(self) -> list[str]:
        return [r.event_id for r in self.source_event_refs]

    @property
    def key(self) -> str:
        """Kafka key: the tenant (a tenant's artifacts stay in order)."""
        return self.tenant


class LatentDeletion(_M):
    """An artifact withdrawn because a purge removed one of its sources: consumers delete it
    whole (node, point, summary). Ids only: it holds nothing of what it deletes."""

    artifact_id: str
    tenant: str
    deleted_by: str  # the memory.purge tombstone's event id
    deleted_at: AwareDatetime

    @property
    def key(self) -> str:
        """Kafka key: the tenant, like the artifact's, so it follows the artifact's records."""
        return self.tenant


LatentRecord = LatentArtifact | LatentDeletion


def input_fingerprint(parts: list[str]) -> str:
    """SHA-256 over the inputs' content fingerprints, in the order given (sequence)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\x00")
    return h.hexdigest()


def artifact_id(config_hash: str, artifact_type: str, group_key: str, fingerprint: str) -> str:
    """The materialization key as an id: same builder, same group, same inputs, same id."""
    key = f"{config_hash}|{artifact_type}|{group_key}|{fingerprint}"
    return ARTIFACT_ID_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:24]


def is_artifact_id(item_id: str) -> bool:
    return item_id.startswith(ARTIFACT_ID_PREFIX) and len(item_id) == len(ARTIFACT_ID_PREFIX) + 24
