"""``memstream search`` and ``memstream latents list`` (through the HTTP API)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from memstream.records.altitudes import ALTITUDES, ARTIFACT_TYPES
from rich import box
from rich.table import Table

from memstream_cli.api import ApiKey, ScopeOption, Tenant, calling, scope_arg
from memstream_cli.common import DataDir, JsonFlag, fail, out, print_json

latents_app = typer.Typer(
    help="Latent artifacts: derived, suggestive memory (episodes, preferences, ...).",
    no_args_is_help=True,
)
TEXT_WIDTH = 90  # characters of a hit's text or an artifact's summary shown in a table


def _short(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= TEXT_WIDTH else one_line[: TEXT_WIDTH - 1] + "…"


def search(
    query: Annotated[str, typer.Argument(help="what to look for")],
    tenant: Tenant,
    altitude: Annotated[
        str, typer.Option("--altitude", help="event | fact | episode | latent")
    ] = "event",
    k: Annotated[int, typer.Option("--k", min=1, max=50, help="how many hits")] = 10,
    as_of: Annotated[str | None, typer.Option("--as-of", help="ISO time to search as of")] = None,
    scope: ScopeOption = None,
    key: ApiKey = None,
    data_dir: DataDir = None,
    json_out: JsonFlag = False,
) -> None:
    """Search memory at one altitude; drill down from a hit with `memstream lineage`."""
    if altitude not in ALTITUDES:
        fail(f"--altitude must be one of {', '.join(ALTITUDES)}")
    with calling(data_dir, tenant, key) as client:
        hits = client.search(query, altitude=altitude, k=k, as_of=as_of, scope=scope_arg(scope))
    if json_out:
        print_json({"hits": hits})
        return
    if not hits:
        out.print(f"no {altitude} matches")
        return
    table = Table(title=f"{altitude} hits", box=box.SIMPLE_HEAD)
    table.add_column("score", no_wrap=True)
    table.add_column("id / kind", no_wrap=True)
    table.add_column("text", ratio=1)
    table.add_column("sources")
    for h in hits:
        sources = ", ".join(h["sources"][:3]) + (" …" if len(h["sources"]) > 3 else "")
        row_id = f"{h['id']}\n[dim]{h['kind']}[/dim]"
        table.add_row(f"{h['score']:.4f}", row_id, _short(h["text"]), sources)
    out.print(table)


@latents_app.command("list")
def list_(
    tenant: Tenant,
    type_: Annotated[
        list[str] | None,
        typer.Option("--type", help=f"only this type (repeatable): {', '.join(ARTIFACT_TYPES)}"),
    ] = None,
    stream: Annotated[str | None, typer.Option("--stream", help="only this stream")] = None,
    include_stale: Annotated[
        bool, typer.Option("--include-stale", help="also artifacts whose sources changed")
    ] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 100,
    key: ApiKey = None,
    data_dir: DataDir = None,
    json_out: JsonFlag = False,
) -> None:
    """The tenant's latent artifacts, newest first."""
    unknown = [t for t in type_ or [] if t not in ARTIFACT_TYPES]
    if unknown:
        fail(f"unknown --type {unknown[0]!r}; one of {', '.join(ARTIFACT_TYPES)}")
    with calling(data_dir, tenant, key) as client:
        found = client.latents(type_, stream, include_stale, limit)
    if json_out:
        print_json({"artifacts": found})
        return
    if not found:
        out.print("no latent artifacts")
        return
    out.print(_table(found))


def _table(artifacts: list[dict[str, Any]]) -> Table:
    """Id and type never wrap (the id is what ``memstream lineage`` takes); the summary does."""
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("artifact", no_wrap=True)
    table.add_column("type / stream", no_wrap=True)
    table.add_column("from", no_wrap=True)
    table.add_column("summary", ratio=1)
    for a in artifacts:
        stream = a["details"].get("stream")
        kind = a["artifact_type"] + (f"\n{stream}" if stream else "")
        state = f" [red](stale since {a['stale_at'][:10]})[/red]" if a.get("stale_at") else ""
        summary = f"{_short(a['summary'])}{state} [dim]conf. {a['confidence']:.2f}[/dim]"
        table.add_row(a["artifact_id"], kind, a["valid_from"][:10], summary)
    return table
