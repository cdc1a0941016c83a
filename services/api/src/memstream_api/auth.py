"""Bearer API keys: the key decides the tenant, what the request may do and what it sees.

Every route takes the caller (:class:`Principal`) through one dependency per permission it
needs (``Reader``, ``Writer``, ``Forgetter``): 401 for a missing, unknown or revoked key, 403
naming the permission the key lacks. A read's scope is the request's within the key's
(:func:`read_scope`): asking outside the key's is 403 naming the field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, HTTPException, Query, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from memstream.events.envelope import StreamName
from memstream.keys import KeyStore, KeyStoreError, LastUsed, Permission, Principal
from memstream.scope import Scope, scope_of
from memstream.wire import ItemId

from memstream_api.context import context
from memstream_api.errors import retry_after

# auto_error=False: the reasons below are more useful than FastAPI's generic 403.
bearer = HTTPBearer(auto_error=False, description="API key from `memstream keys create --tenant T`")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _unauthorized(reason: str) -> HTTPException:
    return HTTPException(status.HTTP_401_UNAUTHORIZED, detail=reason, headers=_CHALLENGE)


def bearer_key(request: Request) -> str:
    """The request's API key, or 401 with the reason."""
    header = request.headers.get("authorization")
    if not header:
        raise _unauthorized("missing Authorization header; send `Authorization: Bearer <api key>`")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer":
        raise _unauthorized("Authorization header must use the Bearer scheme")
    key = key.strip()
    if not key:
        raise _unauthorized("empty API key in the Authorization header")
    return key


def principal_of(keys: KeyStore, key: str, used: LastUsed | None = None) -> Principal:
    """Who ``key`` acts as, or 401 (unknown or revoked) / 503 (the key file unreadable)."""
    try:
        found = keys.principal_for(key)
    except KeyStoreError as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, detail=str(exc), headers=retry_after()
        ) from exc
    if found is None:
        raise _unauthorized("invalid API key (unknown or revoked)")
    if used is not None:
        used.mark(found.key_id)
    return found


def require_principal(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """The caller: the request's key as its key file says (any permission)."""
    ctx = context(request)
    return principal_of(ctx.keys, bearer_key(request), ctx.last_used)


def require_tenant(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> str:
    """The tenant bound to the request's API key, or 401 with the reason."""
    return require_principal(request, credentials).tenant


def needs(permission: Permission) -> Callable[..., Principal]:
    """A dependency: the caller, when its key has ``permission`` (else 403 naming it)."""

    def check(caller: Annotated[Principal, Depends(require_principal)]) -> Principal:
        if not caller.can(permission):
            granted = ", ".join(sorted(caller.permissions)) or "none"
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                detail=f"this key may not {permission} (its permissions: {granted})",
            )
        return caller

    return check


def read_scope(caller: Principal, stream: str | None, asked: Scope | None) -> Scope:
    """What a read sees: the request's scope (``stream`` its shorthand) within the key's;
    422 when the two name different streams, 403 naming the field it asks beyond the key's."""
    try:
        scope = scope_of(stream, asked)
    except ValueError as exc:
        raise invalid(("body", "stream"), str(exc)) from exc
    field = scope.outside(caller.scope)
    if field is not None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            detail=f"scope.{field}: outside this key's scope ({caller.scope.label()})",
        )
    return scope.within(caller.scope)


def invalid(loc: tuple[str, ...], message: str) -> RequestValidationError:
    """A 422 for a rule no schema can state, in the form every other 422 takes (``detail``
    and ``errors``, naming the field)."""
    return RequestValidationError([{"loc": loc, "msg": message, "type": "value_error"}])


def query_scope(
    users: Annotated[
        list[ItemId], Query(alias="user", default_factory=list, description="these users' events")
    ],
    agents: Annotated[
        list[ItemId],
        Query(alias="agent", default_factory=list, description="these agents' events"),
    ],
    streams: Annotated[
        list[StreamName],
        Query(alias="stream", default_factory=list, description="these streams' events"),
    ],
) -> Scope:
    """The scope a GET or DELETE names in its query: ``user``, ``agent`` and ``stream``, each
    repeatable (AND across fields, OR within one); none named: the whole tenant."""
    return Scope(user=users or None, agent=agents or None, stream=streams or None)


Tenant = Annotated[str, Depends(require_tenant)]
QueryScope = Annotated[Scope, Depends(query_scope)]
Caller = Annotated[Principal, Depends(require_principal)]
Reader = Annotated[Principal, Depends(needs("read"))]
Writer = Annotated[Principal, Depends(needs("write"))]
Forgetter = Annotated[Principal, Depends(needs("forget"))]
