"""Typed payloads, one model per event type."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memstream.wire import RfcTimestamp

JsonScalar = str | int | float | bool | None


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MessagePayload(_Payload):
    """A chat turn; ``text`` is what was said."""

    text: str = Field(min_length=1, max_length=200_000)


class ToolCallPayload(_Payload):
    tool: str = Field(min_length=1, max_length=200)
    call_id: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    text: str | None = None


class ToolResultPayload(_Payload):
    tool: str = Field(min_length=1, max_length=200)
    call_id: str | None = None
    output: Any = None
    is_error: bool = False
    text: str | None = None


class ObservationPayload(_Payload):
    text: str = Field(min_length=1, max_length=200_000)
    source: str | None = None


class FactAssertedPayload(_Payload):
    """A claim ``subject predicate object/value`` valid from ``valid_from``."""

    subject: str = Field(min_length=1, max_length=500)
    predicate: str = Field(min_length=1, max_length=200)
    object: str | None = Field(default=None, max_length=2000)
    value: JsonScalar = None
    unit: str | None = Field(default=None, max_length=50)
    valid_from: RfcTimestamp | None = None
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    text: str | None = None


class PreferenceSetPayload(_Payload):
    key: str = Field(min_length=1, max_length=200)
    value: JsonScalar
    subject: str | None = Field(default=None, description="whose preference; default the agent")
    text: str | None = None


class TaskStartedPayload(_Payload):
    task_id: str = Field(min_length=1, max_length=200)
    goal: str | None = None


class TaskOutcomePayload(_Payload):
    task_id: str = Field(min_length=1, max_length=200)
    status: Literal["success", "failure", "partial", "abandoned"]
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    checkout_ids: list[str] = Field(default_factory=list)
    text: str | None = None


class MemoryFeedbackPayload(_Payload):
    target_ids: list[str] = Field(min_length=1)
    signal: float = Field(ge=-1.0, le=1.0, description="-1 harmful .. +1 helpful")
    checkout_id: str | None = None
    reason: str | None = None


class MemoryInvalidatePayload(_Payload):
    target_ids: list[str] = Field(min_length=1)
    reason: str = Field(min_length=1)


class MemoryPurgePayload(_Payload):
    subject: str = Field(min_length=1, max_length=500)
    reason: str | None = None
