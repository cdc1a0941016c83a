"""``memstream checkout`` and ``memstream lineage`` (through the HTTP API)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from memstream.client import MemoryHttpClient, MemstreamHttpError
from memstream.keys import KeyStore
from memstream.scope import parse_pairs
from memstream.settings import Settings
from pydantic import ValidationError

from memstream_cli.common import DataDir, endpoints, fail, print_json, settings_for

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
    try:
        found = parse_pairs(pairs)
    except (ValueError, ValidationError) as exc:
        fail(str(exc).splitlines()[0])
    return found.model_dump(exclude_none=True)


def http_client(settings: Settings, tenant: str, key: str | None) -> MemoryHttpClient:
    """The HTTP API as ``tenant``: with the key given, else an operator key for the tenant."""
    ep = endpoints(settings)
    if ep.api_url is None:
        fail("no API endpoint known (start the stack or set MEMSTREAM_API_PORT)")
    return MemoryHttpClient(ep.api_url, key or _operator_key(settings, tenant))


def _operator_key(settings: Settings, tenant: str) -> str:
    """An operator on the stack's machine gets a key per tenant, made once and kept 0600."""
    path: Path = settings.data_dir / "cli-keys" / tenant
    if path.exists():
        return path.read_text().strip()
    key = KeyStore(settings.resolved_keys_file()).create(tenant)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key + "\n")
    return key


def checkout(
    query: Annotated[str, typer.Argument(help="what the agent needs to know")],
    tenant: Tenant,
    as_of: Annotated[str | None, typer.Option("--as-of", help="ISO time to answer as of")] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens")] = 1500,
    k: Annotated[int, typer.Option("--k")] = 10,
    stream: Annotated[str | None, typer.Option("--stream")] = None,
    scope: ScopeOption = None,
    format_: Annotated[str, typer.Option("--format", help="json | markdown | gathered")] = "json",
    purpose: Annotated[
        str | None,
        typer.Option(
            "--purpose",
            help="planning | execution | review | reflection | synthesis | general: "
            "adds a memory weave for that reasoning step",
        ),
    ] = None,
    after: Annotated[
        str | None,
        typer.Option("--after", help="a write's position: answer once memory applied it"),
    ] = None,
    key: ApiKey = None,
    data_dir: DataDir = None,
) -> None:
    """One checkout packet for QUERY."""
    if format_ not in ("json", "markdown", "gathered"):
        fail("--format must be json, markdown or gathered")
    with http_client(settings_for(data_dir), tenant, key) as client:
        try:
            packet = client.checkout(
                query,
                as_of=as_of,
                max_tokens=max_tokens,
                k=k,
                stream=stream,
                scope=scope_arg(scope),
                purpose=purpose,
                format=format_,  # type: ignore[arg-type]
                after=after,
            )
        except MemstreamHttpError as exc:
            fail(str(exc))
    if format_ == "json":
        print_json(packet)
    else:
        print(packet)


def lineage(
    item_id: Annotated[str, typer.Argument(help="event id, fact id or packet id")],
    tenant: Tenant,
    key: ApiKey = None,
    data_dir: DataDir = None,
) -> None:
    """Sources (one hop) and leaves (ledger events) of an item."""
    with http_client(settings_for(data_dir), tenant, key) as client:
        try:
            doc = client.lineage(item_id)
        except MemstreamHttpError as exc:
            fail(str(exc))
    print(json.dumps(doc, indent=2))
