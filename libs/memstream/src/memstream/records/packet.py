"""Checkout contracts: retrieved candidates in, the packet out."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memstream.events.envelope import WORK_EVENT_TYPES
from memstream.records.projected import DateRecord, QuantityRecord, SourceRef

JsonScalar = str | int | float | bool | None
# What an item of unknown confidence counts as; the packet warns wherever it is used.
DEFAULT_CONFIDENCE = 0.5

Operation = Literal[
    "lookup",
    "count",
    "sum",
    "difference",
    "average",
    "argmax",
    "argmin",
    "latest_value",
    "temporal_interval",
    "temporal_order",
    "list",
    "absence",
    "change",
    "outcome",
]
Answerability = Literal["answer_from_memory", "refresh_recommended", "ask_user", "no_memory"]
ExclusionReason = Literal[
    "duplicate",
    "stale",
    "superseded",
    "out_of_window",
    "low_confidence",
    "unit_mismatch",
    "invalidated",
    "failure_record",
]
AnswerType = Literal["text", "number", "money", "date", "duration", "entity", "list", "boolean"]
WarningKind = Literal[
    "contradiction",
    "stale",
    "superseded",
    "missing_evidence",
    "low_confidence",
    "default_confidence",
    "misattributed",
    "failure_record",
    "invalidated",
]


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Candidate(_M):
    """One retrieved memory item (phase 1): an event, or a fact read from the graph.

    ``item_id`` is the event id for events and the fact id (``<event_id>#<n>``) for facts;
    both resolve through lineage to ledger events.
    """

    item_id: str
    kind: Literal["event", "fact"]
    text: str
    ref: SourceRef
    type: str
    agent: str
    occurred_at: str
    user: str | None = None  # the event's user; a fact's: its source event's (a scope)
    source_agent: str | None = None  # a fact's source event's agent (a scope)
    score: float = 0.0
    lanes: list[str] = Field(default_factory=list)
    lane_ranks: dict[str, int] = Field(default_factory=dict)  # each lane's rank of it, from 0
    metadata: dict[str, JsonScalar] = Field(default_factory=dict)
    caused_by: list[str] = Field(default_factory=list)  # an event's: what it follows from
    entity_keys: list[str] = Field(default_factory=list)
    quantities: list[QuantityRecord] = Field(default_factory=list)
    dates: list[DateRecord] = Field(default_factory=list)
    # facts only
    subject: str | None = None
    predicate: str | None = None
    value: JsonScalar = None
    value_text: str | None = None
    unit: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    superseded_by: str | None = None
    recorded_at: str | None = None  # when memory learnt the fact (its source event's time)
    relevance: float | None = None  # how well the predicate matches the question (0..1)
    confidence: float | None = None  # None = unknown: DEFAULT_CONFIDENCE, with a warning
    prior: float = 0.0  # bounded feedback prior (-1..1) applied to this checkout
    # An accepted memory.invalidate names it (or, for a fact, its source event) by as_of:
    invalidated_by: str | None = None  # that event's id
    invalidation_reason: str | None = None


class OutcomeRecord(_M):
    """What task outcomes said of one candidate, weighed for this question (see
    ``learning.priors``): synthesis answers from it as learning left it."""

    item_id: str
    prior: float  # -1 .. 1, as applied to the pool
    failed_tasks: list[str] = Field(default_factory=list)
    succeeded_tasks: list[str] = Field(default_factory=list)
    feedback_ids: list[str] = Field(default_factory=list)  # the memory.feedback events
    # A task asking a question of this family succeeded with it (not praise from elsewhere).
    family_success: bool = False

    @property
    def open_failure(self) -> bool:
        """Tasks relying on it failed, and for this question that outweighs any success."""
        return bool(self.failed_tasks) and self.prior < 0

    @property
    def proven(self) -> bool:
        """It helped tasks asking this kind of question, on balance."""
        return self.family_success and self.prior > 0


class AnswerPool(_M):
    """What a question may be answered from: the candidates as the knowledge/work rule,
    invalidations and learning leave them, with what task outcomes said of each."""

    candidates: list[Candidate]
    outcomes: list[OutcomeRecord] = Field(default_factory=list)
    operation: Operation = "lookup"


class TimeWindow(_M):
    """The period a query's dates name; an open side is None."""

    start: str | None = None  # ISO date/time, inclusive
    end: str | None = None  # exclusive
    text: str = ""


class EntityMention(_M):
    """Words of the query that name an entity, and the entity keys they may mean."""

    text: str  # as the query wrote them
    keys: list[str] = Field(min_length=1)  # best first; alternatives ("the user" = two keys)
    # "asker": I/me/my, the user asking; it widens the lanes but does not narrow the answer
    # (what the user did is also told by agents and tools, in the third person).
    match: Literal["exact", "partial", "fuzzy", "role", "asker", "unknown"]
    score: float = Field(ge=0.0, le=1.0)  # 1 exact/role, lower for partial and fuzzy


class SynthesisPlan(_M):
    """What the query asks for, decided deterministically from its words."""

    query: str
    operation: Operation
    answer_type: AnswerType
    entities: list[str] = Field(default_factory=list)  # the first key of each named mention
    mentions: list[EntityMention] = Field(default_factory=list)
    terms: list[str] = Field(default_factory=list)  # content words
    unit: str | None = None  # unit/currency the answer should be in, if stated
    money: bool = False  # about money: a currency, or money words outside the names
    about_work: bool = False  # asks about tasks and how they went (not about the world)
    time_window: TimeWindow | None = None
    as_of: str | None = None

    def keys_of(self, entity: str) -> tuple[str, ...]:
        """Every key the mention led by ``entity`` may mean (just ``entity`` if unknown)."""
        for m in self.mentions:
            if m.keys[0] == entity:
                return tuple(m.keys)
        return (entity,)

    def admits(self, event_type: str) -> bool:
        """Whether an item of ``event_type`` may answer this question: records of work
        (``WORK_EVENT_TYPES``) answer questions about the work only."""
        return self.about_work or event_type not in WORK_EVENT_TYPES

    def entity_keys(self) -> list[str]:
        """Every key of every mention (the asker's too), once, in query order."""
        keys = [k for m in self.mentions for k in m.keys] + list(self.entities)
        return list(dict.fromkeys(keys))


class EvidenceRow(_M):
    """One normalised piece of evidence the operation computes over."""

    row_id: str
    support_id: str  # the candidate's item_id
    label: str
    value: JsonScalar = None
    unit: str | None = None
    entity: str | None = None
    time: str | None = None
    ref: SourceRef


class Exclusion(_M):
    """An item an answer left out, and why."""

    item_id: str
    reason: ExclusionReason
    detail: str = ""


class AnswerCandidate(_M):
    """One answer with its machine value, confidence, support and exclusions."""

    answer: str
    value: JsonScalar | list[JsonScalar] = None
    unit: str | None = None
    confidence: float
    support_ids: list[str]
    excluded_ids: list[Exclusion] = Field(default_factory=list)


class PacketWarning(_M):
    """Something the reader must weigh (contradiction, staleness, missing evidence…)."""

    kind: WarningKind
    message: str
    ids: list[str] = Field(default_factory=list)


class SynthesisResult(_M):
    """What the synthesis layer hands to packet assembly."""

    answerability: Answerability
    answer_candidates: list[AnswerCandidate]
    warnings: list[PacketWarning]
    evidence: list[EvidenceRow]


class FactItem(_M):
    """A fact valid ``as_of`` the query, cited by its source event."""

    fact_id: str
    subject: str
    predicate: str
    value: JsonScalar = None
    value_text: str
    unit: str | None = None
    valid_from: str
    valid_to: str | None = None
    confidence: float
    ref: SourceRef


class Snippet(_M):
    """Minimal cited text of one event."""

    item_id: str
    text: str
    ref: SourceRef
    type: str
    agent: str
    occurred_at: str
    score: float
    metadata: dict[str, JsonScalar] = Field(default_factory=dict)


class LatentItem(_M):
    """Suggestive only: may steer ranking, never authorizes a claim."""

    artifact_id: str
    artifact_type: str
    summary: str
    confidence: float
    source_event_refs: list[SourceRef]
    label: Literal["suggestive"] = "suggestive"


class WeaveContext(_M):
    """A latent artifact in a weave: suggestive context, with what makes it weaker."""

    artifact_id: str
    artifact_type: str
    summary: str
    confidence: float
    review_status: str
    flags: list[str] = Field(default_factory=list)  # review_pending, low_confidence, ...
    label: Literal["suggestive"] = "suggestive"


class WeaveEvidence(_M):
    """A packet item the weave rests on: ledger-backed, citable."""

    item_id: str
    ref: SourceRef


class WeaveBudget(_M):
    allowed: int
    used: int


class MemoryWeave(_M):
    """A purpose-conditioned bundle for one reasoning step: latent
    artifacts for orientation, the packet's evidence for claims."""

    weave_id: str
    goal: str
    reasoning_phase: str
    purpose_profile: str
    artifact_ids: list[str]
    source_event_refs: list[SourceRef]
    accepted_evidence: list[WeaveEvidence]
    inferred_context: list[WeaveContext]
    warnings: list[str]
    token_budget: WeaveBudget
    expected_use: list[str]
    prohibited_use: list[str]
    created_at: str
    projection_version: str


class Dropped(_M):
    """An item (or part of one) left out to fit the budget, with the tokens it would cost."""

    section: str
    item_id: str
    tokens: int


class Budget(_M):
    """Tokens of the Markdown prompt rendering (the form an LLM reads), WordPiece-counted."""

    max_tokens: int
    used: int
    counted: Literal["markdown"] = "markdown"
    dropped: list[Dropped] = Field(default_factory=list)


class CheckoutPacket(_M):
    """Answer first, proof after; fields in this order."""

    answerability: Answerability
    synthesis_plan: SynthesisPlan
    answer_candidates: list[AnswerCandidate]
    warnings: list[PacketWarning]
    facts: list[FactItem]
    evidence: list[EvidenceRow]
    snippets: list[Snippet]
    latent_context: list[LatentItem]
    budget: Budget
    packet_id: str
    tenant: str
    as_of: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)  # timings, lane sizes, version
    # With a ``purpose``: the bundle for that reasoning step (inside the same budget).
    memory_weave: MemoryWeave | None = None
