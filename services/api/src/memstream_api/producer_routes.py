"""What a key may learn of itself, and what a Kafka producer of it needs from the stack.

``GET /v1/keys/me``: the calling key (never its secret). ``GET /v1/producer``: the broker,
its epoch, the record limit and whether content is sealed: what the SDK's ``connect`` reads,
so a client built from an endpoint and a key keeps the API's promises (read-your-writes,
sealing). ``POST /v1/data-keys``: the data keys a producer outside the stack seals its own
events with; a key is given only to the API key that made it (a writer never obtains the key
of an event it did not write).
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Request
from memstream.events.envelope import ID_PATTERN
from memstream.keys import KeyRecord, Permission
from memstream.scope import Scope
from memstream.stack.epoch import read_epoch
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from memstream_api.auth import Caller, Writer
from memstream_api.context import context, serving
from memstream_api.errors import AUTH, BODY, ErrorBody

router = APIRouter(tags=["keys"])
MAX_DATA_KEYS = 1000  # ids per request: an SDK batch asks once
FORBIDDEN: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorBody, "description": "the key may not write"}
}


class KeyInfo(BaseModel):
    """A key as its holder may see it: never the secret."""

    key_id: str
    tenant: str
    name: str | None
    permissions: list[Permission]
    scope: Scope | None
    created_at: datetime

    @classmethod
    def of(cls, record: KeyRecord) -> KeyInfo:
        granted = [p for p in ("read", "write", "forget", "admin") if p in record.granted()]
        return cls(
            key_id=record.key_id, tenant=record.tenant, name=record.name,
            permissions=granted, scope=record.scope, created_at=record.created_at,
        )  # fmt: skip


class ProducerConfig(BaseModel):
    """What a Kafka producer of this key needs to keep the API's promises."""

    tenant: str
    key_id: str
    scope: Scope | None = Field(description="the key's scope: events outside it are refused")
    bootstrap: str = Field(description="the Kafka bootstrap the stack writes to")
    epoch: str = Field(
        description="the broker's epoch: named in positions, so a read waits on this log"
    )
    seal: bool = Field(description="content is sealed before it is written (data keys)")
    max_record_bytes: int = Field(description="the topics' record limit")


class DataKeysRequest(BaseModel):
    ids: Annotated[
        list[Annotated[str, Field(pattern=ID_PATTERN)]],
        Field(min_length=1, max_length=MAX_DATA_KEYS),
    ]


class DataKeysAnswer(BaseModel):
    keys: dict[str, str] = Field(description="event id -> its data key (base64)")
    taken: list[str] = Field(description="ids whose key another writer made: not given")
    purged: list[str] = Field(description="ids a purge destroyed: never written again")


@router.get("/v1/keys/me", summary="The calling key", response_model=KeyInfo, responses=AUTH)
async def key_me(request: Request, caller: Caller) -> KeyInfo:
    record = await run_in_threadpool(context(request).keys.record, caller.key_id)
    assert record is not None  # it authenticated this very request
    return KeyInfo.of(record)


@router.get(
    "/v1/producer",
    summary="What a Kafka producer of this key needs: broker, epoch, sealing, record limit",
    response_model=ProducerConfig,
    responses={**AUTH, **FORBIDDEN},
)
async def producer_config(request: Request, caller: Writer) -> ProducerConfig:
    ctx = context(request)
    epoch = await run_in_threadpool(read_epoch, ctx.settings.data_dir)
    return ProducerConfig(
        tenant=caller.tenant, key_id=caller.key_id,
        scope=None if caller.scope.empty else caller.scope, bootstrap=ctx.bootstrap,
        epoch=epoch, seal=ctx.settings.seal,
        max_record_bytes=serving(request).producer.limit.bytes,
    )  # fmt: skip


@router.post(
    "/v1/data-keys",
    summary="Data keys to seal this key's own events with",
    response_model=DataKeysAnswer,
    responses={**AUTH, **BODY, **FORBIDDEN},
)
async def data_keys(body: DataKeysRequest, request: Request, caller: Writer) -> DataKeysAnswer:
    store = serving(request).data_keys
    owned = await run_in_threadpool(
        store.create_owned, caller.tenant, "event", body.ids, caller.key_id
    )
    given = set(owned.keys) | set(owned.taken)
    return DataKeysAnswer(
        keys={i: base64.b64encode(k).decode() for i, k in owned.keys.items()},
        taken=owned.taken,
        purged=[i for i in dict.fromkeys(body.ids) if i not in given],
    )
