"""``memstream purge``: forget a data subject, or every event of a scope, in every store
(through the HTTP API)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from memstream_cli.api import ApiKey, Tenant, calling
from memstream_cli.common import DataDir, JsonFlag, fail, out, print_json
from memstream_cli.progress import stages

if TYPE_CHECKING:
    from memstream.scope import Scope


def purge(
    tenant: Tenant,
    subject: Annotated[
        str | None, typer.Option("--subject", help="the name to forget, as written")
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            help="instead of a subject: every event of user=U, agent=A or stream=S "
            "(repeatable; AND across fields, OR within one)",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="list what would go; change nothing")
    ] = False,
    wait_s: Annotated[
        float, typer.Option("--wait", min=0, max=120, help="seconds to watch the stores obey")
    ] = 30.0,
    key: ApiKey = None,
    data_dir: DataDir = None,
    json_out: JsonFlag = False,
) -> None:
    """Purge every event linked to SUBJECT (or in the scope) and all derived from them;
    exit 1 if a store had not finished when the wait ended."""
    if (subject is None) == (not scope):
        fail("give --subject S or --scope FIELD=VALUE (not both)")
    asked = _scope(scope) if scope else None
    what = subject if asked is None else asked.label()
    doing = f"dry run: {what}" if dry_run else f"purging {what} (stores get {wait_s:g} s)"
    with calling(data_dir, tenant, key) as client, stages(json_out, lines=False) as progress:
        progress(doing)
        if asked is None:
            report = client.purge(str(subject), dry_run=dry_run, wait_s=wait_s)
        else:
            fields = asked.model_dump(exclude_none=True)
            report = client.purge_scope(fields, dry_run=dry_run, wait_s=wait_s)
    if json_out:
        print_json(report)
    else:
        _show(report, dry_run)
    if not report["complete"]:
        raise typer.Exit(1)


def _show(report: dict[str, Any], dry_run: bool) -> None:
    """The report as tables: the events, the counts, then what each store and topic did."""
    events = Table(title="events" if not dry_run else "events that would go", box=box.SIMPLE_HEAD)
    for column in ("time", "id", "stream", "agent", "user"):
        events.add_column(column)
    for e in report.get("events", []):
        cells = (e["occurred_at"], e["event_id"], e["stream"], e["agent"], e["user"] or "")
        events.add_row(*(Text(str(c)) for c in cells))  # as written: never read as markup
    out.print(events)
    more = len(report.get("tombstone_ids") or []) - 1
    parts = f" and {more} more" if more > 0 else ""
    title = (
        "dry run: would remove"
        if dry_run
        else f"purged (tombstone {report['tombstone_id']}{parts})"
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


def _scope(pairs: list[str]) -> Scope:
    """``--scope`` pairs as a scope (exit 1 naming what is wrong)."""
    from memstream.scope import parse_pairs
    from pydantic import ValidationError

    try:
        return parse_pairs(pairs)
    except (ValueError, ValidationError) as exc:
        fail(str(exc).splitlines()[0])
