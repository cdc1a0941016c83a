"""``memstream replay`` and ``memstream projections list|promote|drop``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from memstream_cli.common import DataDir, JsonFlag, endpoints, fail, out, print_json, settings_for
from memstream_cli.progress import stages

if TYPE_CHECKING:
    from memstream.projection.versions import FileProjectionRegistry
    from memstream.settings import Settings

projections_app = typer.Typer(
    help="Projection versions built from the ledger.", no_args_is_help=True
)


def _stack_settings(data_dir: DataDir) -> tuple[Settings, str, list[str]]:
    settings = settings_for(data_dir)
    ep = endpoints(settings)
    if ep.stack is not None and settings.falkordb_url is None:
        settings = settings.model_copy(update={"falkordb_url": ep.stack.falkordb_url})
    metrics = list(ep.stack.metrics_endpoints) if ep.stack is not None else []
    return settings, ep.kafka_bootstrap, metrics


def _registry(settings: Settings) -> FileProjectionRegistry:
    from memstream.projection.versions import FileProjectionRegistry, registry_path

    return FileProjectionRegistry(registry_path(settings.data_dir))


def replay(
    version: Annotated[str, typer.Option("--version", help="name of the new projection version")],
    embedder: Annotated[
        str | None, typer.Option(help="embedder of the new version (default: the default)")
    ] = None,
    feedback: Annotated[
        bool,
        typer.Option(
            "--feedback/--no-feedback",
            help="apply feedback priors in this version (--no-feedback: the original ranking)",
        ),
    ] = True,
    plain_keys: Annotated[
        bool,
        typer.Option(
            "--plain-keys/--context-keys",
            help="index events by their own words alone, not by their context keys",
        ),
    ] = False,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="follow until caught up")] = True,
    timeout: Annotated[float, typer.Option(help="seconds to wait for the build")] = 1800,
    data_dir: DataDir = None,
    json_out: JsonFlag = False,
) -> None:
    """Build VERSION from the ledger beside the live one (its own groups, graph, collection)."""
    from memstream.projection.embedded import default_config
    from memstream.projection.versions import RegistryError

    settings, bootstrap, metrics = _stack_settings(data_dir)
    registry = _registry(settings)
    try:
        config = default_config(
            embedder, feedback=feedback, keys="plain" if plain_keys else "context"
        )
        info = registry.register(version, config, live_if_first=True)
    except (RegistryError, ValueError) as exc:
        fail(str(exc))
    doc: dict[str, Any] = {}
    if wait:
        doc = _follow(settings, bootstrap, metrics, info.name, timeout, quiet=json_out)
        registry.set_status(info.name, "ready")
        doc = _version_doc(settings, bootstrap, metrics, info.name)
    if json_out:
        print_json(
            doc or {"name": info.name, "config_hash": info.config_hash, "status": "building"}
        )
    elif wait:
        c = doc["counts"]
        out.print(
            f"{info.name} ready: {c['graph_events']} graph events, {c['entities']} entities, "
            f"{c['facts']} facts, {c['vector_points']} vector points "
            f"(ledger {c['ledger_events']})"
        )
        out.print(f"promote with: memstream projections promote {info.name}")


def _version_doc(
    settings: Settings, bootstrap: str, metrics: list[str], name: str
) -> dict[str, Any]:
    from memstream.projection.status import projection_status

    status = projection_status(settings, bootstrap, metrics)
    return next(v for v in status["versions"] if v["name"] == name)


def _follow(
    settings: Settings, bootstrap: str, metrics: list[str], name: str, timeout: float, quiet: bool
) -> dict[str, Any]:
    from memstream.projection.status import caught_up

    deadline = time.monotonic() + timeout
    with stages(quiet, lines=False) as progress:
        graph = progress.stage(f"{name} graph")
        vector = progress.stage(f"{name} vectors", keep=True)
        while True:
            v = _version_doc(settings, bootstrap, metrics, name)
            c = v["counts"]
            total = c["ledger_events"]
            graph.update(c["graph_events"], total)
            vector.update(c["vector_points"], total)
            # Groups commit only after their writes, so no lag means built. Counts cannot say
            # it: a purge leaves fewer events projected than the ledger holds. They only show
            # that the groups have started (a group not yet seen reads as no lag): one event
            # each, once the ledger holds any.
            if caught_up(v, min(total, 1)):
                return v
            if time.monotonic() > deadline:
                fail(f"{name} not caught up after {timeout:g}s (lag {v['lag']})")
            time.sleep(0.5)


@projections_app.command("list")
def list_(data_dir: DataDir = None, json_out: JsonFlag = False) -> None:
    """Versions, which one is live, their counts against the ledger, and lag."""
    from memstream.projection.status import projection_status

    settings, bootstrap, metrics = _stack_settings(data_dir)
    doc = projection_status(settings, bootstrap, metrics)
    if json_out:
        print_json({"versions": doc["versions"]})
        return
    table = Table(
        "version",
        "live",
        "status",
        "config",
        "ledger",
        "graph events",
        "entities",
        "facts",
        "vector points",
        "lag",
    )
    for v in doc["versions"]:
        c = v["counts"]
        table.add_row(
            v["name"],
            "yes" if v["live"] else "",
            v["status"],
            v["config_hash"],
            str(c["ledger_events"]),
            str(c["graph_events"]),
            str(c["entities"]),
            str(c["facts"]),
            str(c["vector_points"]),
            str(v["lag"]["total"]),
        )
    out.print(table)


@projections_app.command("promote")
def promote(name: str, data_dir: DataDir = None, json_out: JsonFlag = False) -> None:
    """Switch reads to NAME (atomic)."""
    from memstream.projection.versions import RegistryError

    try:
        _registry(settings_for(data_dir)).promote(name)
    except RegistryError as exc:
        fail(str(exc))
    if json_out:
        print_json({"live": name})
    else:
        out.print(f"{name} is live")


@projections_app.command("drop")
def drop(name: str, data_dir: DataDir = None) -> None:
    """Delete a version that is not live: its graph namespace and vector collection."""
    from memstream.graph.factory import open_graph_store
    from memstream.projection.versions import RegistryError

    settings, _bootstrap, _metrics = _stack_settings(data_dir)
    try:
        info = _registry(settings).drop(name)
    except RegistryError as exc:
        fail(str(exc))
    open_graph_store(settings, info.graph_namespace).drop()
    out.print(f"dropped {name} (the vector collection is removed by the process that holds it)")
