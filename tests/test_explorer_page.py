"""``GET /explorer`` serves the page and its assets without a key; nothing else is served."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from memstream.settings import Settings
from memstream_api.app import create_app


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    # No lifespan (no `with`): the page needs no broker, graph or index.
    return TestClient(create_app(Settings(data_dir=tmp_path), "127.0.0.1:1"))


def test_the_page_is_html_without_a_key(client: TestClient) -> None:
    resp = client.get("/explorer")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in resp.headers["content-security-policy"]
    assert '<script src="/explorer/static/explorer.js"' in resp.text
    for testid in ("key-input", "altitude", "results", "sources", "leaves", "packet"):
        assert f'data-testid="{testid}"' in resp.text


@pytest.mark.parametrize(
    ("name", "media", "marker"),
    [("explorer.js", "text/javascript", "textContent"), ("explorer.css", "text/css", ".columns")],
)
def test_assets_are_served(client: TestClient, name: str, media: str, marker: str) -> None:
    resp = client.get(f"/explorer/static/{name}")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith(media)
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert marker in resp.text


def test_only_the_explorer_assets_are_served(client: TestClient) -> None:
    for name in ("explorer.html", "nothing.js", "..%2Fapp.py"):
        resp = client.get(f"/explorer/static/{name}")
        assert resp.status_code == 404, name
        assert resp.json()["detail"], name


def test_the_page_is_not_an_api_operation(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/explorer")]
