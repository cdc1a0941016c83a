"""The event envelope: one frozen model per type, discriminated by ``type``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter

from memstream.events.payloads import (
    FactAssertedPayload,
    MemoryFeedbackPayload,
    MemoryInvalidatePayload,
    MemoryPurgePayload,
    MessagePayload,
    Metadata,
    ObservationPayload,
    PreferenceSetPayload,
    TaskOutcomePayload,
    TaskStartedPayload,
    ToolCallPayload,
    ToolResultPayload,
)
from memstream.wire import PRINTABLE, ItemId

SCHEMA_VERSION: Literal[1] = 1
# Tenants and streams become Kafka keys ("tenant/stream") and file names.
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
STREAM_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$"

Tenant = Annotated[str, Field(pattern=TENANT_PATTERN)]
StreamName = Annotated[str, Field(pattern=STREAM_PATTERN)]
EventId = Annotated[str, Field(pattern=ID_PATTERN)]
# What a client may send as ``agent``: empty counts as left out (the default agent).
Agent = Annotated[str, Field(max_length=200), PRINTABLE]


class Security(BaseModel):
    """Sensitivity label and dotted payload paths redacted before hashing and storage."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, hide_input_in_errors=True, allow_inf_nan=False
    )
    sensitivity: Literal["public", "internal", "confidential", "secret"] = "internal"
    redacted_paths: list[Annotated[str, Field(pattern=r"^payload(\.[A-Za-z0-9_-]+)+$")]] = Field(
        default_factory=list
    )


class Envelope(BaseModel):
    """Fields common to every event."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, hide_input_in_errors=True, allow_inf_nan=False
    )
    id: EventId
    tenant: Tenant
    stream: StreamName
    agent: ItemId
    user: ItemId | None = Field(
        default=None,
        description="the person the event is about or on whose behalf it was written (a scope)",
    )
    occurred_at: AwareDatetime
    parent_id: EventId | None = None
    caused_by: list[EventId] = Field(default_factory=list)
    security: Security = Field(default_factory=Security)
    metadata: Metadata = Field(default_factory=dict)
    schema_version: Literal[1] = SCHEMA_VERSION

    @property
    def key(self) -> str:
        """Kafka key: per-stream order holds within one partition."""
        return f"{self.tenant}/{self.stream}"


class MessageUser(Envelope):
    type: Literal["message.user"]
    payload: MessagePayload


class MessageAssistant(Envelope):
    type: Literal["message.assistant"]
    payload: MessagePayload


class ToolCall(Envelope):
    type: Literal["tool.call"]
    payload: ToolCallPayload


class ToolResult(Envelope):
    type: Literal["tool.result"]
    payload: ToolResultPayload


class Observation(Envelope):
    type: Literal["observation"]
    payload: ObservationPayload


class FactAsserted(Envelope):
    type: Literal["fact.asserted"]
    payload: FactAssertedPayload


class PreferenceSet(Envelope):
    type: Literal["preference.set"]
    payload: PreferenceSetPayload


class TaskStarted(Envelope):
    type: Literal["task.started"]
    payload: TaskStartedPayload


class TaskOutcome(Envelope):
    type: Literal["task.outcome"]
    payload: TaskOutcomePayload


class MemoryFeedback(Envelope):
    type: Literal["memory.feedback"]
    payload: MemoryFeedbackPayload


class MemoryInvalidate(Envelope):
    type: Literal["memory.invalidate"]
    payload: MemoryInvalidatePayload


class MemoryPurge(Envelope):
    type: Literal["memory.purge"]
    payload: MemoryPurgePayload


Event = Annotated[
    MessageUser
    | MessageAssistant
    | ToolCall
    | ToolResult
    | Observation
    | FactAsserted
    | PreferenceSet
    | TaskStarted
    | TaskOutcome
    | MemoryFeedback
    | MemoryInvalidate
    | MemoryPurge,
    Field(discriminator="type"),
]
EVENT_TYPES: tuple[str, ...] = (
    "message.user",
    "message.assistant",
    "tool.call",
    "tool.result",
    "observation",
    "fact.asserted",
    "preference.set",
    "task.started",
    "task.outcome",
    "memory.feedback",
    "memory.invalidate",
    "memory.purge",
)
# Records of work: what agents did with memory and how it went. They are evidence about the
# work (did the rotation succeed? what failed last week?), never the answer to a question
# about the world (knowledge vs. work). Every other type is knowledge.
WORK_EVENT_TYPES: frozenset[str] = frozenset(
    {"task.started", "task.outcome", "memory.feedback", "memory.invalidate", "memory.purge"}
)
# A union's error text would spell out the input the member models keep to themselves.
_HIDE_INPUT = ConfigDict(hide_input_in_errors=True)
EventAdapter: TypeAdapter[Event] = TypeAdapter(Event, config=_HIDE_INPUT)
EventListAdapter: TypeAdapter[list[Event]] = TypeAdapter(list[Event], config=_HIDE_INPUT)


def parse_event(raw: bytes | str) -> Event:
    """Validate one JSON envelope; raises ``pydantic.ValidationError`` with the reason."""
    return EventAdapter.validate_json(raw)


class EventIn(BaseModel):
    """What clients send: ``id``, ``tenant``, ``occurred_at`` and ``agent`` may be left out."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)
    id: EventId | None = None
    tenant: Tenant | None = None
    stream: StreamName
    agent: Agent | None = None
    user: Agent | None = None
    type: str
    occurred_at: AwareDatetime | None = None
    payload: dict[str, Any]
    parent_id: EventId | None = None
    caused_by: list[EventId] = Field(default_factory=list)
    security: Security = Field(default_factory=Security)
    metadata: Metadata = Field(default_factory=dict)
    schema_version: Literal[1] = SCHEMA_VERSION

    def complete(
        self,
        tenant: str,
        now: datetime | None = None,
        agent: str = "unknown",
        user: str | None = None,
    ) -> Event:
        """Fill defaults and validate into a typed envelope (raises ValidationError)."""
        return fill_defaults(self.model_dump(mode="python"), tenant, now, agent, user)


def fill_defaults(
    data: dict[str, Any], tenant: str, now: datetime | None, agent: str, user: str | None = None
) -> Event:
    """A client event's fields with tenant, id, time, agent and user filled in, as a typed
    envelope."""
    data["tenant"] = data.get("tenant") or tenant
    data["id"] = data.get("id") or str(uuid.uuid4())
    data["occurred_at"] = data.get("occurred_at") or now or datetime.now(UTC)
    data["agent"] = data.get("agent") or agent
    data["user"] = data.get("user") or user  # empty counts as left out
    return EventAdapter.validate_python(data)
