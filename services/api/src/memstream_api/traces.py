"""``POST /v1/traces``: OTLP/HTTP trace exports (protobuf or JSON) as events, through the
same write path, keys, scopes and limits as ``/v1/events``.

The mapping from GenAI spans to events is :mod:`memstream.intake.otlp`. The answer is an
``ExportTraceServiceResponse`` in the request's encoding; spans left out (without a GenAI
operation, or refused) are counted in its ``partial_success`` with the reason.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from memstream.intake import Accepted as Written
from memstream.intake.otlp import json_ids_as_proto, misshapen, spans_of, translate
from memstream.intake.parse import MAX_BATCH
from memstream.wire import BodyFault, dotted, json_body
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from memstream_api.auth import Writer
from memstream_api.context import context
from memstream_api.errors import AUTH, WRITE_REFUSALS, ErrorBody
from memstream_api.ingest import TRACES_PATH, take_slot
from memstream_api.writes import answer, intake

PROTOBUF = "application/x-protobuf"
MEDIA_TYPES = (PROTOBUF, "application/json")  # what the 415 middleware lets through
router = APIRouter(tags=["ingest"])
# The body is read raw (either encoding), so the document states it here. Below the export's
# first levels the shape is OTLP's own (opentelemetry-proto, its JSON encoding with hex ids).
REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            PROTOBUF: {
                "schema": {
                    "type": "string",
                    "format": "binary",
                    "description": "an ExportTraceServiceRequest, protobuf-encoded",
                }
            },
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": "an ExportTraceServiceRequest in OTLP/JSON",
                    "properties": {
                        # null stands for the empty list, as protobuf's JSON mapping reads it
                        "resourceSpans": {
                            "anyOf": [
                                {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "description": "resource, scopeSpans[].scope and "
                                        "scopeSpans[].spans[], as OTLP/JSON writes them",
                                    },
                                },
                                {"type": "null"},
                            ]
                        }
                    },
                }
            },
        },
    }
}


@router.post(
    TRACES_PATH,
    openapi_extra=REQUEST_BODY,
    summary="Ingest an OTLP/HTTP trace export (GenAI spans become events)",
    responses={
        200: {"description": "ExportTraceServiceResponse, in the request's encoding"},
        **AUTH,
        400: {"model": ErrorBody, "description": "the body does not decode as an export"},
        403: {"model": ErrorBody, "description": "the key may not write, or a span's agent, "
              "user or conversation lies outside the key's scope; nothing accepted"},
        **WRITE_REFUSALS,
        503: {"model": ErrorBody, "description": "not accepted; send the export again"},
    },
)  # fmt: skip
async def post_traces(request: Request, caller: Writer) -> Response:
    """The GenAI spans of an export written as events of the key's tenant, all or none (a
    span refused for its content excepted, and named in ``partial_success``)."""
    # A body of another type was refused (415) before routing (memstream_api.media).
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if (busy := take_slot(request, caller.tenant)) is not None:
        return busy
    try:
        export = _decoded(await request.body(), kind)
        if isinstance(export, str):
            return _error(400, export)
        found = translate(spans_of(export), caller.tenant, datetime.now(UTC))
        if len(found.events) > MAX_BATCH:
            detail = f"{len(found.events)} events from one export, over {MAX_BATCH}: export "
            return _error(413, detail + "fewer spans a request (the exporter's batch size)")
        if found.events:
            written = answer(await intake(request).write(found.events, True, caller.scope))
            if not isinstance(written, Written):
                return written
    finally:
        context(request).ingest_slots.give(caller.tenant)
    return _exported(kind, len(found.refused) + found.ignored, found.summary())


def _decoded(body: bytes, kind: str) -> ExportTraceServiceRequest | str:
    """The export, or why it does not decode."""
    export = ExportTraceServiceRequest()
    try:
        if kind == PROTOBUF:
            export.ParseFromString(body)
        else:
            doc = _json_object(body)
            if isinstance(doc, str):
                return doc
            if (wrong := misshapen(doc, ExportTraceServiceRequest.DESCRIPTOR)) is not None:
                return f"not an OTLP trace export: {wrong}"
            json_format.ParseDict(json_ids_as_proto(doc), export, ignore_unknown_fields=True)
    except (DecodeError, json_format.ParseError, ValueError, TypeError) as exc:
        return f"not an OTLP trace export ({kind or 'no content-type'}): {str(exc)[:200]}"
    return export


def _json_object(body: bytes) -> dict[str, Any] | str:
    """The body's JSON object, or why it is none (read as every JSON body is:
    ``wire.json_body``, which names a place past the nesting limit or a string no store can
    hold)."""
    try:
        doc = json_body(body)
    except BodyFault as fault:
        return fault.problem if fault.loc is None else f"{dotted(fault.loc)}: {fault.rule}"
    if not isinstance(doc, dict):
        return 'an OTLP/JSON export is one object: {"resourceSpans": [...]}'
    return doc


def _exported(kind: str, left_out: int, why: str) -> Response:
    reply = ExportTraceServiceResponse()
    if left_out:
        reply.partial_success.rejected_spans = left_out
        reply.partial_success.error_message = why
    if kind == PROTOBUF:
        return Response(reply.SerializeToString(), media_type=PROTOBUF)
    return JSONResponse(json_format.MessageToDict(reply))


def _error(code: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=code)
