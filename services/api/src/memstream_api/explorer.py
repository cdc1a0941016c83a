"""``GET /explorer``: a static page that searches at an altitude and drills down by lineage.

The page itself needs no key: it holds no data. It calls the JSON API (search, lineage,
checkout) with the key the user types, so the API's own authentication applies.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import HTMLResponse, Response

router = APIRouter(include_in_schema=False)

_MEDIA = {"explorer.js": "text/javascript", "explorer.css": "text/css"}
# The page loads only its own script and style; nothing it renders may run code.
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def _read(name: str) -> str:
    return files("memstream_api").joinpath("static", name).read_text(encoding="utf-8")


@router.get("/explorer", response_class=HTMLResponse)
def page() -> HTMLResponse:
    return HTMLResponse(_read("explorer.html"), headers=_HEADERS)


@router.get("/explorer/static/{name}")
def asset(name: str) -> Response:
    if name not in _MEDIA:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no explorer asset {name!r}")
    return Response(_read(name), media_type=_MEDIA[name], headers=_HEADERS)
