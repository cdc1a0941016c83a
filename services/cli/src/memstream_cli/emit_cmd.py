"""``memstream emit``: produce events straight to the raw topic.

Each record carries a key's proof (``memstream.proof``): the key given (``--key`` or
``MEMSTREAM_API_KEY``: its tenant, permissions and scope hold), else the stack's own
producer proof, which an operator on the stack's machine holds in the data dir.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memstream_cli.common import DataDir, endpoints, fail, out, settings_for
from memstream_cli.progress import stages

if TYPE_CHECKING:
    from memstream.events import Event
    from memstream.proof import Prover
    from memstream.scope import Scope
    from memstream.settings import Settings
    from memstream.shred.port import DataKeys
    from pydantic import ValidationError

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
    from memstream.ledger.opening import data_keys
    from memstream.sdk import EventRefusedError, EventTooLargeError, MemoryClient
    from memstream.stack.epoch import read_epoch

    settings = settings_for(data_dir)
    bootstrap = endpoints(settings).kafka_bootstrap
    keys = data_keys(settings)
    prover, scope = _credential(settings, key, tenant)
    if file is not None:
        _emit_file(bootstrap, file, tenant, keys, prover)
        return
    if not (tenant and stream and type_):
        fail("give --tenant, --stream and --type (or --file)")
    body = _payload(payload)
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


def _payload(given: str | None) -> dict[str, Any]:
    """``--payload`` as a JSON object (exit 1 saying where it does not parse)."""
    if not given:
        return {}
    try:
        body = json.loads(given)
    except json.JSONDecodeError as exc:
        fail(f"--payload is not JSON: {exc.msg} at character {exc.pos}")
    if not isinstance(body, dict):
        fail(f"--payload must be a JSON object, not {type(body).__name__}")
    return body


def _credential(settings: Settings, key: str | None, tenant: str | None) -> tuple[Prover, Scope]:
    """The proof the records carry, and the scope they must lie in: the key's (read from
    the key store beside the data dir), or the stack's own."""
    from memstream.keys import KeyStore
    from memstream.proof import Prover, producer_secret
    from memstream.scope import WHOLE

    if key is None:
        return Prover.internal(producer_secret(settings)), WHOLE
    found = KeyStore.from_settings(settings).principal_for(key)
    if found is None:
        fail("the API key is unknown or revoked — create one with memstream keys create")
    if not found.can("write"):
        fail("this key may not write — use a key with the write permission")
    if tenant is not None and tenant != found.tenant:
        fail(f"the API key is a key of tenant {found.tenant!r}, not {tenant!r}")
    return Prover.for_key(key), found.scope


def _emit_file(
    bootstrap: str, file: Path, tenant: str | None, keys: DataKeys | None, prover: Prover
) -> None:
    """Every envelope of ``file``, read and checked first (a bad line ends the command
    naming its line and field, nothing emitted), then emitted with progress on stderr."""
    from memstream.sdk import EventTooLargeError, emit_by_tenant
    from memstream.shred.sealer import KeyDestroyed

    if not file.is_file():
        fail(f"no such file: {file}")
    lines = file.read_text().splitlines()
    with stages(json_out=False) as progress:
        reading = progress.stage(f"reading {file}", total=len(lines))
        events = _read_envelopes(file, lines, tenant, reading.update)
        sending = progress.stage(f"emitting {len(events):,} events", total=len(events))
        try:
            emitted = emit_by_tenant(
                bootstrap, events, keys, prover=prover, progress=sending.update
            )
        except (EventTooLargeError, KeyDestroyed) as exc:
            fail(f"{file}: {exc} (no event of that tenant was emitted)")
    out.print(f"emitted {emitted} events")


def _read_envelopes(
    file: Path, lines: list[str], tenant: str | None, done: Callable[[int], None]
) -> list[Event]:
    from memstream.events import EventIn
    from pydantic import ValidationError

    events = []
    for lineno, line in enumerate(lines, 1):
        if lineno % 1000 == 0:
            done(lineno)
        if not line.strip():
            continue
        kind = None
        try:
            raw = EventIn.model_validate_json(line)
            kind, t = raw.type, raw.tenant or tenant
            if t is None:
                fail(f"{file}:{lineno}: no tenant in the envelope and no --tenant")
            events.append(raw.complete(t, agent=raw.agent or "cli"))
        except ValidationError as exc:
            fail(f"{file}:{lineno}: invalid event: {_first_error(exc, kind)}")
    done(len(lines))
    return events


def _first_error(exc: ValidationError, kind: str | None) -> str:
    """A pydantic error as one line: the first field and why (and how many more); the
    union's tag (the event's ``kind``) is left out of the field's path."""
    from memstream.wire import dotted, shorten

    errors = exc.errors()
    first = errors[0]
    loc = tuple(first["loc"])
    where = dotted(loc[1:] if loc[:1] == (kind,) else loc) or "line"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {shorten(str(first['msg']))}{more}"
