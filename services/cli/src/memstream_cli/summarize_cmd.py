"""``memstream summarize``: summarize_recall through the HTTP API."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from memstream_cli.api import ApiKey, Tenant, calling
from memstream_cli.common import DataDir, JsonFlag, out, print_json


def summarize(
    query: Annotated[str, typer.Argument(help="what to ask memory")],
    tenant: Tenant,
    k: Annotated[int, typer.Option("--k", min=1, max=50, help="candidates recalled")] = 10,
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=16, max=4096, help="synthesis budget")
    ] = 500,
    force_refresh: Annotated[
        bool, typer.Option("--force-refresh", help="bypass the summary cache")
    ] = False,
    key: ApiKey = None,
    data_dir: DataDir = None,
    json_out: JsonFlag = False,
) -> None:
    """Recall memories and synthesize one cited answer (needs ANTHROPIC_API_KEY on the API)."""
    with calling(data_dir, tenant, key) as client:
        doc = client.summarize_recall(
            query, k=k, max_tokens=max_tokens, force_refresh=force_refresh
        )
    if json_out:
        print_json(doc)
        return
    # escape: "[id]" would otherwise read as Rich markup
    out.print(escape(doc["summary"]))
    for c in doc["citations"]:
        cite = f"[{c['memory_id']}] ({c['layer']}, {c['score']:.4f}) {c['snippet']}"
        out.print("  " + escape(cite))
    for u in doc["unsupported"]:
        why = f"[{u['memory_id']}]" if u["memory_id"] else "no citation"
        state = "dropped" if u["dropped"] else "id removed"
        out.print(f"  [red]unsupported ({state})[/red] " + escape(f"{why}: {u['sentence']}"))
    for w in doc.get("warnings", []):
        ids = ", ".join(w["memory_ids"])
        out.print("  [yellow]left out[/yellow] " + escape(f"[{ids}] {w['sentence']}"))
    cached = "cached" if doc["cache_hit"] else doc["model"]
    out.print(f"[dim]{doc['sources_used']} source(s) used; {cached}[/dim]")
