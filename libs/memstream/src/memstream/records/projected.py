"""Typed records the extractor derives from one ledger entry."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memstream.events.payloads import QuestionFamily

JsonScalar = str | int | float | bool | None


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


class SourceRef(_Record):
    """The ledger entry a projected record comes from."""

    tenant: str
    stream: str
    seq: int
    hash: str
    event_id: str


class EventRecord(_Record):
    """An ``Event`` node, chained per tenant/stream by ``NEXT`` in seq order."""

    tenant: str
    event_id: str
    stream: str
    seq: int
    hash: str
    prev_hash: str
    type: str
    agent: str
    occurred_at: str  # ISO 8601, UTC
    ingested_at: str
    text: str = ""
    user: str | None = None  # the person it is about or for (a scope), if the event names one
    metadata: dict[str, JsonScalar] = Field(default_factory=dict)
    caused_by: list[str] = Field(default_factory=list)  # the events it follows from (ids)

    @property
    def ref(self) -> SourceRef:
        """The ledger entry this event node projects."""
        return SourceRef(
            tenant=self.tenant,
            stream=self.stream,
            seq=self.seq,
            hash=self.hash,
            event_id=self.event_id,
        )


Side = Literal["user", "assistant"]


class StreamPage(_Record):
    """A page of one stream's events, newest first; ``next_before`` resumes below it (None:
    the stream has no older events)."""

    events: list[EventRecord]
    next_before: int | None = None


class EntityRecord(_Record):
    """An ``Entity`` node; ``key`` is the normalised name, unique per tenant.

    The flags say what the entity has been, ever (the graph ORs them over writes): the
    actor of some event, the subject of some fact or preference, the speaker of the user's
    or the assistant's messages. Query-time entity resolution reads them.
    """

    tenant: str
    key: str
    name: str
    kind: str  # agent | person | org | place | thing | tool | task | topic
    actor: bool = False
    subject: bool = False
    side: Side | None = None

    def merged(self, other: EntityRecord) -> EntityRecord:
        """This record with ``other``'s flags added (same tenant and key)."""
        return self.model_copy(
            update={
                "actor": self.actor or other.actor,
                "subject": self.subject or other.subject,
                "side": self.side or other.side,
            }
        )


class EntityView(_Record):
    """An entity as read back for query-time resolution."""

    key: str
    name: str
    kind: str
    actor: bool = False
    subject: bool = False
    user_side: bool = False
    assistant_side: bool = False


class MentionRecord(_Record):
    """``(Event)-[:MENTIONS {role}]->(Entity)``."""

    tenant: str
    event_id: str
    entity_key: str
    role: str = "mention"  # actor | subject | object | mention


class FactRecord(_Record):
    """A ``RELATES`` edge from subject to object entity (or a value on the edge).

    ``fact_id`` is deterministic (source event + position) so re-projection is idempotent.
    Supersession is decided by the graph store: a newer fact with the same tenant, subject
    and predicate closes the older one (``valid_to``, ``superseded_by``).
    """

    tenant: str
    fact_id: str
    subject_key: str
    predicate: str
    object_key: str | None = None
    value: JsonScalar = None
    value_text: str = ""  # the object or value as text, for display and search
    unit: str | None = None
    valid_from: str  # ISO 8601, UTC
    recorded_at: str  # when memory learnt it: the source event's occurred_at (ISO, UTC)
    confidence: float = 1.0
    source: SourceRef
    kind: str = "fact"  # fact | preference
    # The source event's scope (its stream is in ``source``): a scope sees the fact when it
    # sees that event.
    source_agent: str = ""
    source_user: str | None = None


class FeedbackRecord(_Record):
    """One signal about one memory, from a ``memory.feedback`` entry.

    ``feedback_id`` = ``<event_id>#<target index>``, so re-projection is idempotent; the
    entry's ``caused_by`` (the outcome, for retrospective feedback) stays in the ledger.
    """

    tenant: str
    feedback_id: str
    event_id: str
    target_id: str
    signal: float  # -1 .. 1
    certainty: float = 1.0  # 1 = named as used; less = spread over a packet's support
    source: str = "explicit"  # explicit | retrospective
    task_id: str | None = None
    outcome: str | None = None
    family: QuestionFamily | None = None
    at: str  # when it was given: the entry's occurred_at (ISO, UTC)


class InvalidationRecord(_Record):
    """One target of a ``memory.invalidate`` entry.

    ``invalidation_id`` = ``<event_id>#<target index>``. Only ``accepted`` ones close facts
    and leave memories out of checkout; ``proposed`` ones wait for a decision, which names
    them by ``proposal_id``.
    """

    tenant: str
    invalidation_id: str
    event_id: str
    target_id: str  # a fact id, or an event id (its facts too)
    reason: str
    status: Literal["proposed", "accepted", "rejected"]
    proposal_id: str | None = None
    at: str  # the entry's occurred_at (ISO, UTC)


class QuantityRecord(_Record):
    """A number with its unit/currency found in event text (evidence for sums, counts)."""

    value: float
    unit: str | None = None
    text: str  # the matched span


class DateRecord(_Record):
    """A date found in event text, resolved to an absolute day against ``occurred_at``."""

    text: str
    date: str  # ISO date (YYYY-MM-DD)
    relative: bool


class Extraction(_Record):
    """Everything derived from one ledger entry."""

    event: EventRecord
    entities: list[EntityRecord] = Field(default_factory=list)
    mentions: list[MentionRecord] = Field(default_factory=list)
    facts: list[FactRecord] = Field(default_factory=list)
    feedback: list[FeedbackRecord] = Field(default_factory=list)
    invalidations: list[InvalidationRecord] = Field(default_factory=list)
    quantities: list[QuantityRecord] = Field(default_factory=list)
    dates: list[DateRecord] = Field(default_factory=list)


class GraphBatch(_Record):
    """One idempotent write to the graph: MERGE by id/key."""

    events: list[EventRecord] = Field(default_factory=list)
    entities: list[EntityRecord] = Field(default_factory=list)
    mentions: list[MentionRecord] = Field(default_factory=list)
    facts: list[FactRecord] = Field(default_factory=list)
    feedback: list[FeedbackRecord] = Field(default_factory=list)
    invalidations: list[InvalidationRecord] = Field(default_factory=list)


class FactView(_Record):
    """A fact as read back from the graph (with its validity)."""

    fact_id: str
    subject_key: str
    predicate: str
    object_key: str | None
    value: JsonScalar
    value_text: str
    unit: str | None
    valid_from: str
    valid_to: str | None
    superseded_by: str | None
    confidence: float
    source: SourceRef
    kind: str
    recorded_at: str | None = None  # None: projected before it was recorded
    source_agent: str = ""  # "": projected before facts kept their source's scope
    source_user: str | None = None
    # An accepted invalidation closed it (valid_to = then, not before valid_from); never deleted.
    invalidated_at: str | None = None
    invalidation_reason: str | None = None
    invalidated_by: str | None = None  # the memory.invalidate event


class VectorPoint(_Record):
    """One point: dense vector + text for the sparse BM25 vector + payload.

    ``point_key`` is deterministic (e.g. ``event:<tenant>:<event_id>``); adapters map it
    to a UUIDv5 point id so upserts are idempotent.
    """

    point_key: str
    dense: list[float]
    text: str
    payload: dict[str, Any]


class VectorHit(_Record):
    point_key: str
    score: float
    payload: dict[str, Any]
