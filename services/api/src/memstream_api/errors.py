"""Error bodies and the responses the OpenAPI document lists for them.

Every refusal is JSON with a human-readable ``detail`` string; the document names each status
an operation can answer, so generated clients and fuzzers can hold the API to it.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from memstream.wire import dotted, shorten
from pydantic import BaseModel, Field

RETRY_AFTER_S = 5


class ErrorBody(BaseModel):
    detail: str = Field(description="why the request was refused")


class Problem(BaseModel):
    field: str = Field(description="dotted path in the body (or `query.x`, `path.x`)")
    message: str
    type: str


class RequestErrorBody(BaseModel):
    detail: str
    errors: list[Problem]


def retry_after() -> dict[str, str]:
    """The header every 503 carries: the condition is temporary."""
    return {"Retry-After": str(RETRY_AFTER_S)}


_RETRY_AFTER_DOC = {
    "Retry-After": {
        "description": "seconds to wait before trying again",
        "required": True,
        "schema": {"type": "integer", "minimum": 0},
    }
}
_WWW_AUTHENTICATE_DOC = {
    "WWW-Authenticate": {
        "description": "the scheme to use: `Bearer`",
        "required": True,
        "schema": {"type": "string"},
    }
}


def unavailable(description: str, model: Any = ErrorBody) -> dict[int | str, dict[str, Any]]:
    """A documented 503 with ``Retry-After``."""
    return {503: {"model": model, "description": description, "headers": _RETRY_AFTER_DOC}}


# What `require_tenant` can answer on any authenticated operation.
AUTH: dict[int | str, dict[str, Any]] = {
    401: {
        "model": ErrorBody,
        "description": "missing, malformed or unknown API key",
        "headers": _WWW_AUTHENTICATE_DOC,
    },
    **unavailable("the API key store cannot be read; try again"),
}

# What a read can answer for its key: no `read` permission, or a scope beyond the key's.
READ_FORBIDDEN: dict[int | str, dict[str, Any]] = {
    403: {
        "model": ErrorBody,
        "description": "the key may not read, or the request asks outside the key's scope "
        "(the detail names the field)",
    },
}

# What every operation can answer before it runs (memstream_api.limits, .connections).
LIMITS: dict[int | str, dict[str, Any]] = {
    408: {"model": ErrorBody, "description": "the request's headers or body came too slowly"},
    413: {"model": ErrorBody, "description": "the request body exceeds the route's limit"},
}
# What a tenant over one of its shares is answered: the fair share of the read routes (see
# `fair_share`), its share of the outbox, its open ingest requests.
THROTTLED: dict[int | str, dict[str, Any]] = {
    429: {
        "model": ErrorBody,
        "description": "this tenant is over a share of its own: reads (too many in flight, or "
        "its budget of read time is spent, or every read slot is taken), its backlog in the "
        "outbox, or its open ingest requests; the detail says which",
        "headers": _RETRY_AFTER_DOC,
    },
}


class TooLargeEvent(BaseModel):
    index: int = Field(description="position of the event in the batch")
    id: str
    bytes: int = Field(description="the most bytes its ledger record could take")


class TooLargeBody(BaseModel):
    detail: str
    limit: int = Field(description="the broker's record limit in bytes")
    too_large: list[TooLargeEvent] = Field(description="the events that can never fit")


# What a write answers when an event can never fit (its ledger record could pass the
# broker's record limit) or the tenant's share of the outbox is full.
WRITE_REFUSALS: dict[int | str, dict[str, Any]] = {
    413: {
        "model": TooLargeBody | ErrorBody,
        "description": "the body exceeds the route's limit, or an event can never fit the "
        "broker's record limit (named with the limit); nothing was accepted",
    },
    **THROTTLED,
}

# FastAPI's validation of parameters and body models (see `request_invalid`).
INVALID: dict[int | str, dict[str, Any]] = {
    422: {"model": RequestErrorBody, "description": "the body or a parameter is invalid"},
}
# What FastAPI's body parsing can answer on an operation with a JSON body model.
BODY: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "the body cannot be decoded"},
    **INVALID,
}


def _problem(error: dict[str, Any]) -> Problem:
    loc = tuple(error["loc"])
    message, kind = shorten(str(error["msg"])), str(error["type"])
    if kind == "json_invalid":  # the location is a character offset, not a field
        return Problem(field="", message=f"body is not valid JSON ({message})", type=kind)
    where = dotted(loc[1:] if loc[:1] == ("body",) else loc)  # query and path stay named
    return Problem(field=where, message=message, type=kind)


async def store_down(_request: Request, exc: Exception) -> JSONResponse:
    """A store a read needs is down or reopening (the graph server restarting, the vector
    index reopened by its projector): 503, come again; the supervisor or the platform
    brings it back."""
    return JSONResponse(
        {"detail": f"memory is briefly unavailable: {exc}"},
        status_code=503,
        headers=retry_after(),
    )


async def request_invalid(_request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 with a one-line ``detail`` first, like the ingest route's."""
    assert isinstance(exc, RequestValidationError)
    problems = [_problem(e) for e in exc.errors()]
    first = problems[0] if problems else Problem(field="", message="invalid request", type="")
    more = f" (and {len(problems) - 1} more error(s))" if len(problems) > 1 else ""
    detail = f"{first.field}: {first.message}{more}" if first.field else first.message + more
    body = RequestErrorBody(detail=detail, errors=problems)
    return JSONResponse(body.model_dump(), status_code=422)
