"""The HTTP API as the commands call it: the options they share (tenant, key, scope) and
one client whose failures end the command with one line.

The client library is imported when a command calls the API, not when the CLI starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memstream_cli.common import fail, located, settings_for

if TYPE_CHECKING:
    from memstream.client import MemoryHttpClient
    from memstream.settings import Settings

Tenant = Annotated[str, typer.Option("--tenant", help="whose memory")]
ApiKey = Annotated[
    str | None, typer.Option("--key", envvar="MEMSTREAM_API_KEY", help="API key of the tenant")
]
ScopeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--scope",
        help="read only user=U, agent=A or stream=S (repeatable; AND across fields, OR within one)",
    ),
]


def scope_arg(pairs: list[str] | None) -> dict[str, list[str]] | None:
    """``--scope`` pairs as the API's scope (exit 1 naming what is wrong)."""
    if not pairs:
        return None
    from memstream.scope import parse_pairs
    from pydantic import ValidationError

    try:
        found = parse_pairs(pairs)
    except (ValueError, ValidationError) as exc:
        fail(str(exc).splitlines()[0])
    return found.model_dump(exclude_none=True)


@contextmanager
def calling(data_dir: Path | None, tenant: str, key: str | None) -> Iterator[MemoryHttpClient]:
    """The API as ``tenant``; a refusal or an API that does not answer ends the command with
    the client's one line (what failed, what to do)."""
    from memstream.client import MemstreamError

    with http_client(settings_for(data_dir), tenant, key) as client:
        try:
            yield client
        except MemstreamError as exc:
            fail(str(exc))


def http_client(settings: Settings, tenant: str, key: str | None) -> MemoryHttpClient:
    """The HTTP API as ``tenant``: with the key given, else an operator key for the tenant."""
    from memstream.client import MemoryHttpClient

    ep = located(settings)  # the API is asked, not the broker: the client names what fails
    if ep.api_url is None:
        fail("no API endpoint known (start the stack or set MEMSTREAM_API_PORT)")
    return MemoryHttpClient(ep.api_url, key or _operator_key(settings, tenant))


def _operator_key(settings: Settings, tenant: str) -> str:
    """An operator on the stack's machine gets a key per tenant, made once and kept 0600."""
    from memstream.keys import KeyStore

    path: Path = settings.data_dir / "cli-keys" / tenant
    if path.exists():
        return path.read_text().strip()
    key = KeyStore(settings.resolved_keys_file()).create(tenant)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key + "\n")
    return key
