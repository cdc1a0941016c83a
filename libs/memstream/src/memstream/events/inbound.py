"""What the HTTP API accepts: one typed model per event type, as strict as the ledger's.

``EventIn`` (loose ``type``/``payload``) stays the builder for the SDK and CLI; these models
are the published request schema and the API validates against them in strict JSON mode, so
every request the schema allows is accepted and every one it forbids is refused.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
)

from memstream.events.envelope import (
    SCHEMA_VERSION,
    Agent,
    Event,
    EventId,
    Security,
    StreamName,
    Tenant,
    fill_defaults,
)
from memstream.events.payloads import (
    FactAssertedPayload,
    MemoryFeedbackPayload,
    MemoryInvalidatePayload,
    MessagePayload,
    Metadata,
    ObservationPayload,
    PreferenceSetPayload,
    TaskOutcomePayload,
    TaskStartedPayload,
    ToolCallPayload,
    ToolResultPayload,
)
from memstream.wire import JsonInt, RfcDatetime


class InboundEnvelope(BaseModel):
    """Envelope fields as clients send them: ``id``, ``tenant``, ``agent`` and ``occurred_at``
    may be left out (an empty ``agent`` counts as left out)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, hide_input_in_errors=True, allow_inf_nan=False
    )
    id: EventId | None = Field(default=None, description="idempotency key; generated if absent")
    tenant: Tenant | None = Field(default=None, description="must be the API key's tenant")
    stream: StreamName
    agent: Agent | None = None
    user: Agent | None = Field(
        default=None,
        description="the person the event is about or on whose behalf it was written (a "
        "scope reads can ask for); empty counts as left out",
    )
    occurred_at: RfcDatetime | None = Field(default=None, description="default: now")
    parent_id: EventId | None = None
    caused_by: list[EventId] = Field(default_factory=list)
    security: Security = Field(default_factory=Security)
    metadata: Metadata = Field(default_factory=dict)
    # Not Literal[1]: that lets JSON `true` through, which the schema forbids.
    schema_version: JsonInt = Field(default=SCHEMA_VERSION, ge=SCHEMA_VERSION, le=SCHEMA_VERSION)

    def complete(
        self,
        tenant: str,
        now: datetime | None = None,
        agent: str = "unknown",
        user: str | None = None,
    ) -> Event:
        """The typed envelope with defaults filled in (``user``: where it names none)."""
        return fill_defaults(self.model_dump(mode="python"), tenant, now, agent, user)


class MessageUserIn(InboundEnvelope):
    type: Literal["message.user"]
    payload: MessagePayload


class MessageAssistantIn(InboundEnvelope):
    type: Literal["message.assistant"]
    payload: MessagePayload


class ToolCallIn(InboundEnvelope):
    type: Literal["tool.call"]
    payload: ToolCallPayload


class ToolResultIn(InboundEnvelope):
    type: Literal["tool.result"]
    payload: ToolResultPayload


class ObservationIn(InboundEnvelope):
    type: Literal["observation"]
    payload: ObservationPayload


class FactAssertedIn(InboundEnvelope):
    type: Literal["fact.asserted"]
    payload: FactAssertedPayload


class PreferenceSetIn(InboundEnvelope):
    type: Literal["preference.set"]
    payload: PreferenceSetPayload


class TaskStartedIn(InboundEnvelope):
    type: Literal["task.started"]
    payload: TaskStartedPayload


class TaskOutcomeIn(InboundEnvelope):
    type: Literal["task.outcome"]
    payload: TaskOutcomePayload


class MemoryFeedbackIn(InboundEnvelope):
    type: Literal["memory.feedback"]
    payload: MemoryFeedbackPayload


class MemoryInvalidateIn(InboundEnvelope):
    type: Literal["memory.invalidate"]
    payload: MemoryInvalidatePayload


InboundEvent = Annotated[
    MessageUserIn
    | MessageAssistantIn
    | ToolCallIn
    | ToolResultIn
    | ObservationIn
    | FactAssertedIn
    | PreferenceSetIn
    | TaskStartedIn
    | TaskOutcomeIn
    | MemoryFeedbackIn
    | MemoryInvalidateIn,
    # No memory.purge: a tombstone is planned and written by DELETE /v1/subjects/{subject}.
    Field(discriminator="type"),
]
InboundAdapter: TypeAdapter[InboundEvent] = TypeAdapter(
    InboundEvent, config=ConfigDict(hide_input_in_errors=True)
)


def parse_inbound(raw: bytes | str) -> InboundEvent:
    """Validate one client event in strict JSON mode (no ``"1"`` for 1, no ``1`` for a date)."""
    return InboundAdapter.validate_json(raw, strict=True)
