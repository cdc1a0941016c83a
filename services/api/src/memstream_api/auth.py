"""Bearer API keys: the key decides the tenant."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from memstream.keys import KeyStore, KeyStoreError

from memstream_api.context import context
from memstream_api.errors import retry_after

# auto_error=False: the reasons below are more useful than FastAPI's generic 403.
bearer = HTTPBearer(auto_error=False, description="API key from `memstream keys create --tenant T`")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _unauthorized(reason: str) -> HTTPException:
    return HTTPException(status.HTTP_401_UNAUTHORIZED, detail=reason, headers=_CHALLENGE)


def require_tenant(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> str:
    """The tenant bound to the request's API key, or 401 with the reason."""
    header = request.headers.get("authorization")
    if not header:
        raise _unauthorized("missing Authorization header; send `Authorization: Bearer <api key>`")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer":
        raise _unauthorized("Authorization header must use the Bearer scheme")
    key = key.strip()
    if not key:
        raise _unauthorized("empty API key in the Authorization header")
    keys: KeyStore = context(request).keys
    try:
        tenant = keys.tenant_for(key)
    except KeyStoreError as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, detail=str(exc), headers=retry_after()
        ) from exc
    if tenant is None:
        raise _unauthorized("invalid API key")
    return tenant


Tenant = Annotated[str, Depends(require_tenant)]
