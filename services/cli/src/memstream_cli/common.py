"""Options and helpers shared by the commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console

if TYPE_CHECKING:
    from memstream.settings import Settings

    from memstream_cli.stack.locate import Endpoints

# A command imports what it needs when it runs (the settings, the broker's client, the HTTP
# client): `memstream --help` and the commands that only talk to a running stack start
# without loading the stack's libraries (`memstream bench cli` measures it).

err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="stack data dir (default $MEMSTREAM_DATA_DIR or .memstream)"),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="print one JSON document and nothing else")]


def settings_for(data_dir: Path | None, **overrides: Any) -> Settings:
    """The settings (``MEMSTREAM_*``, then ``overrides``); a value that does not parse or
    validate ends the command with one line naming the variable and why."""
    from memstream.settings import Settings
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    if data_dir is not None:
        overrides["data_dir"] = data_dir
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        bad = "; ".join(
            f"MEMSTREAM_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()
        )
        fail(f"settings: {bad}")
    except SettingsError as exc:  # e.g. JSON that does not parse, named by its field
        fail(f"settings: {exc}")


def fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


def endpoints(settings: Settings) -> Endpoints:
    """The stack to talk to, checked to answer, or a clear error."""
    from confluent_kafka import KafkaException
    from memstream.kafka.reading import partition_count
    from memstream.kafka.topics import LEDGER

    ep = located(settings)
    try:
        partition_count(ep.kafka_bootstrap, LEDGER, timeout=5)
    except KafkaException as exc:
        fail(
            f"Kafka at {ep.kafka_bootstrap} does not answer ({exc.args[0].str()}) — is the "
            "stack running (memstream up, memstream status)?"
        )
    return ep


def located(settings: Settings) -> Endpoints:
    """The stack's addresses as the settings or the data dir give them (nothing asked yet),
    or a clear error."""
    from memstream_cli.stack.locate import NoStackError, locate

    try:
        return locate(settings)
    except NoStackError as exc:
        fail(str(exc))


def print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")
