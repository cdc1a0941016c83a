"""``memstream bench ...``: measurements through the real pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from memstream.bench.embed import run_embed_bench
from memstream.bench.ingest import run_ingest_bench
from rich.table import Table

from memstream_cli.common import JsonFlag, err, out, print_json

bench_app = typer.Typer(
    help="Benchmarks (tables and JSON, same-run baselines).", no_args_is_help=True
)


@bench_app.command("ingest")
def ingest(
    events: Annotated[int, typer.Option("--events", help="events through the SDK path")] = 100_000,
    http_events: Annotated[
        int, typer.Option("--http-events", help="events through HTTP (0 = skip)")
    ] = 20_000,
    json_out: JsonFlag = False,
) -> None:
    """Events/s from the SDK and HTTP into the ledger, beside the raw broker produce rate."""
    doc = run_ingest_bench(events, http_events, lambda m: err.print(f"[dim]{m}[/dim]"))
    if json_out:
        print_json(doc)
        return
    raw = doc["raw_broker_produce_events_per_s"]
    table = Table("path", "events", "events/s into ledger", "vs raw broker")
    table.add_row("raw broker produce (baseline)", str(events), f"{raw:,}", "1.00")
    table.add_row(
        "SDK -> ledger",
        str(events),
        f"{doc['sdk']['ledger_events_per_s']:,}",
        f"{doc['sdk_ledger_vs_raw']:.2f}",
    )
    if "http" in doc:
        h = doc["http"]
        table.add_row(
            "HTTP -> ledger",
            str(h["events"]),
            f"{h['ledger_events_per_s']:,}",
            f"{doc['http_ledger_vs_raw']:.2f}",
        )
    out.print(table)


@bench_app.command("embed")
def embed(
    docs: Annotated[int, typer.Option("--docs", help="documents to embed")] = 20_000,
    locomo: Annotated[
        Path | None, typer.Option("--locomo", help="LoCoMo file for a recall check beside BM25")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Docs/s of the default embedder (and its LoCoMo recall beside BM25, given --locomo)."""
    doc = run_embed_bench(docs, lambda m: err.print(f"[dim]{m}[/dim]"), locomo)
    if json_out:
        print_json(doc)
        return
    table = Table("embedder", "dim", "docs", "docs/s")
    table.add_row(doc["embedder"], str(doc["dim"]), str(doc["docs"]), f"{doc['docs_per_s']:,.0f}")
    out.print(table)
    if "locomo" in doc:
        out.print_json(data=doc["locomo"])
