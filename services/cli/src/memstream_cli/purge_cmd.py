"""``memstream purge``: forget a data subject in every store (through the HTTP API)."""

from __future__ import annotations

from typing import Annotated

import typer
from memstream.client import MemstreamHttpError
from rich import box
from rich.table import Table

from memstream_cli.checkout_cmd import ApiKey, Tenant, http_client
from memstream_cli.common import DataDir, JsonFlag, fail, out, print_json, settings_for
from memstream_cli.progress import stages


def purge(
    tenant: Tenant,
    subject: Annotated[str, typer.Option("--subject", help="the name to forget, as written")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="report what would go; change nothing")
    ] = False,
    wait_s: Annotated[
        float, typer.Option("--wait", min=0, max=120, help="seconds to watch the stores obey")
    ] = 30.0,
    key: ApiKey = None,
    data_dir: DataDir = None,
    json_out: JsonFlag = False,
) -> None:
    """Purge every event linked to SUBJECT and all derived from them; exit 1 if a store had
    not finished when the wait ended."""
    doing = f"dry run: {subject}" if dry_run else f"purging {subject} (stores get {wait_s:g} s)"
    with http_client(settings_for(data_dir), tenant, key) as client:
        try:
            with stages(json_out, lines=False) as progress:
                progress(doing)
                report = client.purge(subject, dry_run=dry_run, wait_s=wait_s)
        except MemstreamHttpError as exc:
            fail(str(exc))
    if json_out:
        print_json(report)
    else:
        title = (
            "dry run: would remove" if dry_run else f"purged (tombstone {report['tombstone_id']})"
        )
        table = Table(title=title, box=box.SIMPLE_HEAD)
        table.add_column("items")
        table.add_column("count", justify="right")
        for kind, count in report["removed"].items():
            table.add_row(kind, str(count))
        out.print(table)
        for store, done in report["completed"].items():
            out.print(f"{store}: {'done' if done else '[red]not yet[/red]'}")
        for topic, t in report.get("topics", {}).items():
            how = "sealed" if t["sealed"] else "[red]in the clear[/red]"
            out.print(f"{topic}: {how}, {t['keys_destroyed']} data keys destroyed")
        for r in report.get("residual", []):
            out.print(
                f"[yellow]{r['topic']}: {r['count']} copies in the clear until {r['until']}"
                f"[/yellow] ({r['note']})"
            )
    if not report["complete"]:
        raise typer.Exit(1)
