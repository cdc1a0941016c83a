"""``memstream checkout`` and ``memstream lineage`` (through the HTTP API)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from memstream_cli.api import ApiKey, ScopeOption, Tenant, calling, scope_arg
from memstream_cli.common import DataDir, fail, print_json


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
    with calling(data_dir, tenant, key) as client:
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
    with calling(data_dir, tenant, key) as client:
        doc = client.lineage(item_id)
    print(json.dumps(doc, indent=2))
