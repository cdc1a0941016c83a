"""``memstream emit``: produce events straight to the raw topic.

Each record carries a key's proof (``memstream.proof``): the key given (``--key`` or
``MEMSTREAM_API_KEY``: its tenant, permissions and scope hold), else the stack's own
producer proof, which an operator on the stack's machine holds in the data dir.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from memstream.events import EventIn
from memstream.keys import KeyStore
from memstream.ledger.opening import data_keys
from memstream.proof import Prover, producer_secret
from memstream.scope import WHOLE, Scope
from memstream.sdk import EventRefusedError, EventTooLargeError, MemoryClient, emit_by_tenant
from memstream.settings import Settings
from memstream.shred.port import DataKeys
from memstream.shred.sealer import KeyDestroyed
from memstream.stack.epoch import read_epoch
from pydantic import ValidationError

from memstream_cli.common import DataDir, endpoints, fail, out, settings_for

TEXT_FIELD = {
    "message.user": "text",
    "message.assistant": "text",
    "observation": "text",
    "task.started": "goal",
}


def emit(
    tenant: Annotated[str | None, typer.Option(help="tenant of the events")] = None,
    stream: Annotated[str | None, typer.Option(help="stream (session/thread)")] = None,
    type_: Annotated[
        str | None, typer.Option("--type", help="event type, e.g. message.user")
    ] = None,
    text: Annotated[str | None, typer.Option(help="text of a message or observation")] = None,
    payload: Annotated[str | None, typer.Option(help="payload as JSON")] = None,
    agent: Annotated[str, typer.Option(help="the acting agent")] = "cli",
    user: Annotated[
        str | None, typer.Option(help="the user the event is about or on whose behalf")
    ] = None,
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            envvar="MEMSTREAM_API_KEY",
            help="prove this API key (default: the stack's own proof, from the data dir)",
        ),
    ] = None,
    file: Annotated[Path | None, typer.Option("--file", help="JSONL file of envelopes")] = None,
    json_: Annotated[
        bool, typer.Option("--json", help="print {id, position} (a read can wait on it: --after)")
    ] = False,
    data_dir: DataDir = None,
) -> None:
    """Emit one event, or every envelope of a JSONL file."""
    settings = settings_for(data_dir)
    bootstrap = endpoints(settings).kafka_bootstrap
    keys = data_keys(settings)
    prover, scope = _credential(settings, key, tenant)
    if file is not None:
        _emit_file(bootstrap, file, tenant, keys, prover)
        return
    if not (tenant and stream and type_):
        fail("give --tenant, --stream and --type (or --file)")
    body: dict[str, Any] = json.loads(payload) if payload else {}
    if text is not None:
        body.setdefault(TEXT_FIELD.get(type_, "text"), text)
    epoch = read_epoch(settings.data_dir)
    with MemoryClient(
        bootstrap, tenant, agent=agent, keys=keys, epoch=epoch, prover=prover, scope=scope
    ) as client:
        try:
            event_id = client.emit(stream, type_, body, user=user)
        except (EventRefusedError, EventTooLargeError) as exc:
            fail(str(exc))
        written = client.flush() if json_ else None
    print(json.dumps({"id": event_id, "position": written}) if json_ else event_id)


def _credential(settings: Settings, key: str | None, tenant: str | None) -> tuple[Prover, Scope]:
    """The proof the records carry, and the scope they must lie in: the key's (read from
    the key store beside the data dir), or the stack's own."""
    if key is None:
        return Prover.internal(producer_secret(settings)), WHOLE
    found = KeyStore.from_settings(settings).principal_for(key)
    if found is None:
        fail("the API key is unknown or revoked")
    if not found.can("write"):
        fail("this key may not write")
    if tenant is not None and tenant != found.tenant:
        fail(f"the API key is a key of tenant {found.tenant!r}, not {tenant!r}")
    return Prover.for_key(key), found.scope


def _emit_file(
    bootstrap: str, file: Path, tenant: str | None, keys: DataKeys | None, prover: Prover
) -> None:
    if not file.is_file():
        fail(f"no such file: {file}")
    events = []
    for lineno, line in enumerate(file.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = EventIn.model_validate_json(line)
            t = raw.tenant or tenant
            if t is None:
                fail(f"{file}:{lineno}: no tenant in the envelope and no --tenant")
            events.append(raw.complete(t, agent=raw.agent or "cli"))
        except ValidationError as exc:
            fail(f"{file}:{lineno}: invalid event: {exc}")
    try:
        emitted = emit_by_tenant(bootstrap, events, keys, prover=prover)
    except (EventTooLargeError, KeyDestroyed) as exc:
        fail(f"{file}: {exc} (no event of that tenant was emitted)")
    out.print(f"emitted {emitted} events")
