"""``memstream up`` and ``memstream status``."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from memstream_cli.common import DataDir, JsonFlag, endpoints, fail, out, print_json, settings_for


def up(
    data_dir: DataDir = None,
    api_port: Annotated[int | None, typer.Option("--api-port", help="HTTP API port")] = None,
    sample_data: Annotated[
        bool, typer.Option("--sample-data/--no-sample-data", help="load the sample events once")
    ] = False,
    replicas: Annotated[
        int | None,
        typer.Option(
            "--replicas",
            min=1,
            max=16,
            help="processes of each worker that scales out (MEMSTREAM_REPLICAS)",
        ),
    ] = None,
) -> None:
    """Run the embedded stack (broker, graph server, workers, API) until Ctrl-C."""
    from memstream import logs
    from memstream.stack.binaries import MissingBinaryError
    from memstream.stack.servers import ServerStartError

    from memstream_cli.stack.sample import load_sample_data
    from memstream_cli.stack.supervisor import EmbeddedStack, StackError, install_stop_signals

    settings = settings_for(data_dir, **({} if replicas is None else {"replicas": replicas}))
    logs.configure(settings.log_level)
    stack = EmbeddedStack(settings, settings.data_dir, api_port or settings.api_port)
    install_stop_signals(stack)
    try:
        info = stack.start()
    except (StackError, ServerStartError, MissingBinaryError) as exc:
        fail(str(exc))
    loaded = load_sample_data(info, settings) if sample_data else 0
    table = Table(title="memstream embedded stack", show_header=False)
    table.add_row("HTTP API", info.api_url)
    table.add_row("OpenAPI", f"{info.api_url}/docs")
    table.add_row("Kafka bootstrap", info.kafka_bootstrap)
    table.add_row("FalkorDB", info.falkordb_url)
    table.add_row("metrics", "\n".join(info.metrics_endpoints))
    table.add_row("data dir", info.data_dir)
    table.add_row("dev API key", f"in {info.dev_key_file} (tenant dev)")
    if stack.restored:
        table.add_row("restored from archive", f"{stack.restored} ledger entries")
    if loaded:
        table.add_row("sample data", f"{loaded} events emitted for tenant dev")
    out.print(table)
    out.print(f"dev API key (tenant dev): {stack.dev_key}")
    out.print("Ctrl-C stops every process.", style="dim")
    try:
        stack.supervise()
    finally:
        out.print("stopping: API, draining the pipeline, workers, servers ...", style="dim")
        stack.stop()
        out.print("stopped.", style="dim")


def groups_table(groups: dict[str, Any]) -> Table:
    """One row per member of each consumer group: who it is and what it holds."""
    table = Table("consumer group", "member (client id)", "pid", "partitions", "lag")
    for group, g in groups.items():
        lag = "?" if g["lag"] is None else str(g["lag"])
        if not g["members"]:
            table.add_row(group, "[red]no member[/red]", "", "", lag)
        for i, m in enumerate(g["members"]):
            held = "; ".join(f"{t} {','.join(map(str, ps))}" for t, ps in m["assignment"].items())
            table.add_row(group if i == 0 else "", m["client_id"], str(m["pid"]), held or "none",
                          lag if i == 0 else "")  # fmt: skip
    return table


def status(data_dir: DataDir = None, json_out: JsonFlag = False) -> None:
    """Health of each component and consumer lag per group."""
    from memstream_cli.stack.status import collect_status

    settings = settings_for(data_dir)
    doc = collect_status(endpoints(settings), settings.outbox_max_age_s)
    if json_out:
        print_json(doc)
    else:
        table = Table("component", "healthy", "details")
        for name, c in doc["components"].items():
            shown = {k: v for k, v in c.items() if k not in ("healthy", "consumers", "problems")}
            details = [", ".join(f"{k}={v}" for k, v in shown.items()), *c.get("problems", [])]
            for group, loop in c.get("consumers", {}).items():
                state = "waiting for a store" if loop["waiting"] else "running"
                if not loop["running"]:
                    state = "STOPPED"
                details.append(f"{group}: {state}, lag {loop['lag']}, restarts {loop['restarts']}")
            table.add_row(name, "yes" if c.get("healthy", True) else "NO", "\n".join(details))
        for group, lag in doc["lag"].items():
            table.add_row(f"lag {group}", "", f"{lag.get('topic')}: {lag.get('total', lag)}")
        out.print(table)
        out.print(groups_table(doc["consumer_groups"]))
    if not doc["healthy"]:
        raise typer.Exit(1)
