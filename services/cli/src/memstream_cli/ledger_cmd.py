"""``memstream ledger stats`` and ``memstream verify``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from memstream_cli.common import DataDir, JsonFlag, endpoints, fail, out, print_json, settings_for

ledger_app = typer.Typer(help="The authoritative ledger.", no_args_is_help=True)


@ledger_app.command("stats")
def stats(data_dir: DataDir = None, json_out: JsonFlag = False) -> None:
    """Events, streams and purged entries per tenant, and the DLQ size."""
    from memstream.ledger.stats import ledger_stats

    doc = ledger_stats(endpoints(settings_for(data_dir)).kafka_bootstrap)
    if json_out:
        print_json(doc)
        return
    table = Table("tenant", "events", "streams", "purged")
    for tenant, row in doc["tenants"].items():
        table.add_row(tenant, str(row["events"]), str(row["streams"]), str(row["purged"]))
    out.print(table)
    out.print(f"DLQ: {doc['dlq']} records")


def verify(
    data_dir: DataDir = None,
    tenant: Annotated[str | None, typer.Option(help="only this tenant")] = None,
    stream: Annotated[str | None, typer.Option(help="only this stream")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Walk the archived hash chains; exit 1 naming the first broken link.

    A purged entry passes when a purge tombstone covers it; without one it is broken. A
    sealed entry whose data key is gone counts as purged, and needs a tombstone too.
    """
    from memstream.archive.verify import verify_archive
    from memstream.ledger.opening import reading_keys

    settings = settings_for(data_dir)
    archive = settings.archive_dir
    if tenant is not None and not (archive / tenant).is_dir():
        fail(f"no archive for tenant {tenant!r} in {archive}")
    held = settings.data_keys_url is not None or settings.data_keys_path.exists()
    keys = reading_keys(settings) if held else None

    def key_gone(t: str, event_id: str) -> bool:
        assert keys is not None
        return not keys.get(t, "event", [event_id])

    report = verify_archive(archive, tenant, stream, key_gone if keys is not None else None)
    if json_out:
        print_json(
            {
                "ok": report.broken is None,
                "entries": report.entries,
                "streams": report.streams,
                "purged": report.purged,
                "tombstones": report.tombstones,
                "broken": str(report.broken) if report.broken else None,
            }
        )
    elif report.broken is None:
        out.print(f"ok: {report.entries} entries in {report.streams} streams, every link holds")
        if report.purged:
            out.print(
                f"{report.purged} entries purged (content removed, chain kept) "
                f"by {report.tombstones} purge tombstones"
            )
    else:
        out.print(f"[red]broken link:[/red] {report.broken}")
    if report.broken is not None:
        raise typer.Exit(1)
