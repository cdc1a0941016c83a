"""``memstream keys create``."""

from __future__ import annotations

from typing import Annotated

import typer
from memstream.keys import KeyStore

from memstream_cli.common import DataDir, fail, settings_for

keys_app = typer.Typer(help="API keys (stored hashed).", no_args_is_help=True)


@keys_app.command("create")
def create(
    tenant: Annotated[str, typer.Option(help="the tenant the key is bound to")],
    data_dir: DataDir = None,
) -> None:
    """Print a new API key bound to TENANT (shown once; only its hash is stored)."""
    try:
        key = KeyStore(settings_for(data_dir).resolved_keys_file()).create(tenant)
    except ValueError as exc:
        fail(str(exc))
    print(key)
