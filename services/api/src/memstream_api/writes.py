"""How a write's outcome is answered over HTTP: the one mapping of a refusal to its status.

The write path itself is :mod:`memstream.intake`; every route that writes events
(``POST /v1/events``, feedback, invalidations, a purge's tombstone) calls it and answers
through :func:`answer`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request, status
from fastapi.responses import JSONResponse
from memstream.intake import Accepted, Intake, Outcome
from memstream.intake.outcomes import (
    Backlog,
    FieldError,
    Forbidden,
    Invalid,
    Malformed,
    Oversize,
    Purged,
    TooMany,
    Unavailable,
)
from memstream.intake.parse import DEFAULT_AGENT, MAX_REPORTED_ERRORS
from memstream.keys import Principal
from memstream.scope import ScopeField
from pydantic import BaseModel, Field

from memstream_api.context import serving
from memstream_api.errors import retry_after


class FieldErrorBody(BaseModel):
    index: int = Field(description="position of the event in the batch (0 for a single event)")
    field: str
    message: str
    type: str


class ValidationErrorBody(BaseModel):
    detail: str
    errors: list[FieldErrorBody]


class PurgedIdsBody(BaseModel):
    detail: str
    purged_ids: list[str] = Field(
        description="the batch's ids that a purge shredded: never written again"
    )


class DeliveryErrorBody(BaseModel):
    detail: str
    ids: list[str] = Field(
        description="every id of the batch: resend with these to stay idempotent"
    )
    failed_ids: list[str]


def intake(request: Request) -> Intake:
    """The write path of the app answering ``request``."""
    return serving(request).intake


def answer(outcome: Outcome) -> JSONResponse | Accepted:
    """``Accepted`` as it is (the route shapes its 202), a refusal as its JSON answer."""
    if isinstance(outcome, Accepted):
        return outcome
    match outcome:
        case Malformed() | Invalid():
            return _json(422, outcome.detail, errors=[_error(e) for e in outcome.errors])
        case Forbidden():
            return _json(status.HTTP_403_FORBIDDEN, outcome.detail)
        case TooMany():
            return _json(status.HTTP_413_CONTENT_TOO_LARGE, outcome.detail)
        case Oversize():
            shown = outcome.too_large[:MAX_REPORTED_ERRORS]
            too_large = [{"index": o.index, "id": o.event_id, "bytes": o.bound} for o in shown]
            return _json(413, outcome.detail, limit=outcome.limit, too_large=too_large)
        case Purged():
            purged = outcome.purged_ids[:MAX_REPORTED_ERRORS]
            return _json(status.HTTP_409_CONFLICT, outcome.detail, purged_ids=purged)
        case Backlog():
            ids = outcome.ids
            return _json(429, outcome.detail, retry_after(), ids=ids, failed_ids=ids)
        case Unavailable():
            return _json(
                503, outcome.detail, retry_after(), ids=outcome.ids, failed_ids=outcome.failed_ids
            )


def _error(error: FieldError) -> dict[str, Any]:
    return {
        "index": error.index,
        "field": error.field,
        "message": error.message,
        "type": error.type,
    }


def _json(
    code: int, detail: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    return JSONResponse({"detail": detail, **extra}, status_code=code, headers=headers)


@dataclass(frozen=True)
class Stamp:
    """Who an event a route writes names: the agent, user and stream a key's scope fixes to
    one value, else the route's defaults (the stream the request named, when it named one)."""

    agent: str
    user: str | None
    stream: str


def stamp(caller: Principal, stream: str | None, default_stream: str) -> Stamp:
    """The fields of an event ``caller`` writes through a route (see :class:`Stamp`)."""

    def fixed(field: ScopeField) -> str | None:
        values = caller.scope.values(field)
        return values[0] if values is not None and len(values) == 1 else None

    return Stamp(
        agent=fixed("agent") or DEFAULT_AGENT,
        user=fixed("user"),
        stream=stream or fixed("stream") or default_stream,
    )
