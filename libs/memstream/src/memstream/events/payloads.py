"""Typed payloads, one model per event type."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memstream.wire import STORABLE, ItemId, RfcTimestamp, StorableJson, StorableScalar, Text

# Every string a payload holds follows memstream.wire's rule: ids printable, text storable;
# every number one the stores hold exactly.
JsonScalar = StorableScalar
Metadata = Annotated[dict[str, JsonScalar], STORABLE]
Name = Annotated[str, Field(min_length=1, max_length=200), STORABLE]
Reason = Annotated[str, Field(min_length=1, max_length=2000), STORABLE]
Body = Annotated[str, Field(min_length=1, max_length=200_000), STORABLE]


class _Payload(BaseModel):
    # hide_input_in_errors: a validation error's text (a traceback, a DLQ reason) must not
    # carry event content into logs; ``errors()`` still has the input for HTTP answers.
    model_config = ConfigDict(
        extra="forbid", frozen=True, hide_input_in_errors=True, allow_inf_nan=False
    )


class MessagePayload(_Payload):
    """A chat turn; ``text`` is what was said."""

    text: Body


class ToolCallPayload(_Payload):
    tool: ItemId
    call_id: ItemId | None = None
    arguments: Annotated[dict[str, StorableJson], STORABLE] = Field(default_factory=dict)
    text: Text | None = None


class ToolResultPayload(_Payload):
    tool: ItemId
    call_id: ItemId | None = None
    output: StorableJson = None
    is_error: bool = False
    text: Text | None = None


class ObservationPayload(_Payload):
    text: Body
    source: Text | None = None


class FactAssertedPayload(_Payload):
    """A claim ``subject predicate object/value`` valid from ``valid_from``."""

    subject: Annotated[str, Field(min_length=1, max_length=500), STORABLE]
    predicate: Name
    object: Annotated[str, Field(max_length=2000), STORABLE] | None = None
    value: JsonScalar = None
    unit: Annotated[str, Field(max_length=50), STORABLE] | None = None
    valid_from: RfcTimestamp | None = None
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    text: Text | None = None


class PreferenceSetPayload(_Payload):
    key: Name
    value: JsonScalar
    subject: Text | None = Field(default=None, description="whose preference; default the agent")
    text: Text | None = None


class TaskStartedPayload(_Payload):
    task_id: ItemId
    goal: Text | None = None


class TaskOutcomePayload(_Payload):
    """How a task went; the retrospective pass learns from it which memories helped."""

    task_id: ItemId
    status: Literal["success", "failure", "partial", "abandoned"]
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    checkout_ids: list[ItemId] = Field(
        default_factory=list, max_length=100, description="packet ids of the task's checkouts"
    )
    used_ids: list[ItemId] = Field(
        default_factory=list,
        max_length=200,
        description="the packet items the agent relied on; without them credit is spread "
        "over the packets' answer support",
    )
    text: Text | None = None


class QuestionFamily(_Payload):
    """What kind of question a memory helped or misled on: the plan's operation, the
    entities it named and its content words (stemmed)."""

    operation: Annotated[str, Field(min_length=1, max_length=40), STORABLE]
    entities: list[Text] = Field(default_factory=list, max_length=20)
    terms: list[Text] = Field(default_factory=list, max_length=40)


class MemoryFeedbackPayload(_Payload):
    """A signal about memories: explicit (an agent or a person) or from the retrospective."""

    target_ids: list[ItemId] = Field(min_length=1, max_length=200)
    signal: float = Field(ge=-1.0, le=1.0, description="-1 harmful .. +1 helpful")
    packet_id: ItemId | None = None
    reason: Annotated[str, Field(max_length=2000), STORABLE] | None = None
    source: Literal["explicit", "retrospective"] = "explicit"
    task_id: ItemId | None = None
    outcome: Literal["success", "failure", "partial", "abandoned"] | None = None
    certainty: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="1 = the targets were named as used; less = spread over a packet's support",
    )
    family: QuestionFamily | None = None


class MemoryInvalidatePayload(_Payload):
    """Facts or events that are wrong: an accepted invalidation closes the facts (``valid_to``
    and the reason; never deleted) and checkout leaves them out; a proposal changes nothing
    until a decision (``proposal_id`` = the proposal's event id) accepts it."""

    target_ids: list[ItemId] = Field(min_length=1, max_length=200)
    reason: Reason
    review_status: Literal["proposed", "accepted", "rejected"] = Field(
        default="accepted",
        description="proposals (from the retrospective pass) change nothing until accepted",
    )
    proposal_id: ItemId | None = Field(
        default=None,
        description="the proposal this accepts or rejects (its memory.invalidate event id)",
    )

    @model_validator(mode="after")
    def _decision_names_a_proposal(self) -> MemoryInvalidatePayload:
        if self.proposal_id is not None and self.review_status == "proposed":
            raise ValueError("a proposal cannot decide another proposal (proposal_id)")
        return self


class MemoryPurgePayload(_Payload):
    """A purge tombstone, written by ``DELETE /v1/subjects/{subject}`` (never by hand): it
    names the subject by digest and the purged ledger events by id, so it holds no text."""

    subject: Annotated[str, Field(min_length=1, max_length=500), STORABLE] = Field(
        description="sha256:<digest>"
    )
    event_ids: list[ItemId] = Field(
        default_factory=list,
        max_length=1_000_000,
        description="the ledger events this purge removes (content gone, chain position kept)",
    )
    reason: Annotated[str, Field(max_length=2000), STORABLE] | None = None
