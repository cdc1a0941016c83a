"""``memstream``: the command line of the embedded and the distributed stack."""

from __future__ import annotations

import os
from importlib.metadata import entry_points

import typer
from memstream.stack.children import PRIVATE_UMASK

from memstream_cli import (
    checkout_cmd,
    emit_cmd,
    feedback_cmd,
    invalidate_cmd,
    keys_cmd,
    latent_cmd,
    ledger_cmd,
    mcp_cmd,
    projections_cmd,
    purge_cmd,
    stack_cmd,
    summarize_cmd,
)

app = typer.Typer(
    name="memstream",
    help="memstream: agent memory as a stream-processing pipeline on Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def private_files() -> None:
    """What any command writes (keys, data dir, results) is its user's alone, whatever the
    umask it was started with: folders 0700, files 0600."""
    os.umask(PRIVATE_UMASK)


app.command("up")(stack_cmd.up)
app.command("status")(stack_cmd.status)
app.command("emit")(emit_cmd.emit)
app.command("verify")(ledger_cmd.verify)
app.command("replay")(projections_cmd.replay)
app.command("checkout")(checkout_cmd.checkout)
app.command("lineage")(checkout_cmd.lineage)
app.command("feedback")(feedback_cmd.feedback)
app.command("invalidate")(invalidate_cmd.invalidate)
app.command("search")(latent_cmd.search)
app.command("mcp")(mcp_cmd.mcp)
app.command("purge")(purge_cmd.purge)
app.command("summarize")(summarize_cmd.summarize)
app.add_typer(ledger_cmd.ledger_app, name="ledger")
app.add_typer(projections_cmd.projections_app, name="projections")
app.add_typer(keys_cmd.keys_app, name="keys")
app.add_typer(latent_cmd.latents_app, name="latents")
app.add_typer(invalidate_cmd.invalidations_app, name="invalidations")
# Command groups of the tooling packages (``memstream bench``): found by their entry points,
# so the CLI does not import the tools that import it.
for found in entry_points(group="memstream.cli"):
    app.add_typer(found.load(), name=found.name)

if __name__ == "__main__":
    app()
