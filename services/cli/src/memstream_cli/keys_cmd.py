"""``memstream keys create | list | revoke``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, cast

import typer
from rich.table import Table
from rich.text import Text

from memstream_cli.common import DataDir, JsonFlag, fail, out, print_json, settings_for

if TYPE_CHECKING:
    from memstream.keys import KeyRecord, KeyStore, Permission

# The key store (and the models it reads) is imported when a keys command runs.

keys_app = typer.Typer(help="API keys (stored hashed).", no_args_is_help=True)


def _store(data_dir: DataDir) -> KeyStore:
    from memstream.keys import KeyStore

    return KeyStore(settings_for(data_dir).resolved_keys_file())


def _permissions(can: str | None) -> list[Permission] | None:
    from memstream.keys import PERMISSIONS, Permission

    if can is None:
        return None
    asked = [p.strip() for p in can.split(",") if p.strip()]
    unknown = [p for p in asked if p not in PERMISSIONS]
    if unknown or not asked:
        fail(f"--can takes {', '.join(PERMISSIONS)} (comma-separated), not {can!r}")
    return [cast(Permission, p) for p in asked]


def shown(record: KeyRecord, last_used: str | None = None) -> dict[str, object]:
    """A key as ``keys list`` and ``keys create --json`` show it: never the secret."""
    from memstream.keys import PERMISSIONS

    return {
        "id": record.key_id,
        "tenant": record.tenant,
        "name": record.name,
        "permissions": sorted(record.granted(), key=PERMISSIONS.index),
        "scope": record.scope.model_dump(exclude_none=True) if record.scope else None,
        "created_at": record.created_at.isoformat(),
        "last_used_at": last_used,
        "revoked_at": record.revoked_at.isoformat() if record.revoked_at else None,
    }


@keys_app.command("create")
def create(
    tenant: Annotated[str, typer.Option(help="the tenant the key is bound to")],
    name: Annotated[str | None, typer.Option(help="what the key is for (shown by list)")] = None,
    can: Annotated[
        str | None,
        typer.Option(help="its permissions: read,write,forget,admin (default: all of them)"),
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(help="user=U, agent=A or stream=S: what it may write and read (repeat)"),
    ] = None,
    json_out: JsonFlag = False,
    data_dir: DataDir = None,
) -> None:
    """Print a new API key bound to TENANT (shown once; only its hash is stored)."""
    from memstream.scope import parse_pairs
    from pydantic import ValidationError

    permissions = _permissions(can)
    try:
        limits = parse_pairs(scope or [])
        key, record = _store(data_dir).create_record(tenant, name, permissions, limits)
    except (ValueError, ValidationError) as exc:
        fail(str(exc).splitlines()[0])
    if json_out:
        print_json({"key": key, **shown(record)})
        return
    print(key)


@keys_app.command("list")
def list_keys(
    tenant: Annotated[str, typer.Option(help="the tenant whose keys are listed")],
    json_out: JsonFlag = False,
    data_dir: DataDir = None,
) -> None:
    """The tenant's keys: id, name, permissions, scope, created, last used, revoked; never
    a secret."""
    from memstream.keys import PERMISSIONS, LastUsed

    store = _store(data_dir)
    used = LastUsed(store.path).read()
    if json_out:
        print_json({"keys": [shown(r, used.get(r.key_id)) for r in store.list(tenant)]})
        return
    table = Table("id", "name", "permissions", "scope", "created", "last used", "revoked")
    for r in store.list(tenant):
        scope = r.scope.label() if r.scope else "(whole tenant)"
        when = used.get(r.key_id)
        cells = (
            r.key_id, r.name or "", ",".join(sorted(r.granted(), key=PERMISSIONS.index)), scope,
            r.created_at.isoformat()[:19], (when or "")[:19],
            r.revoked_at.isoformat()[:19] if r.revoked_at else "",
        )  # fmt: skip
        table.add_row(*(Text(c) for c in cells))  # names as written: never read as markup
    out.print(table)


@keys_app.command("revoke")
def revoke(
    key_id: Annotated[str, typer.Argument(help="the key's id (from keys list)")],
    json_out: JsonFlag = False,
    data_dir: DataDir = None,
) -> None:
    """Refuse the key from now on, on every API process (they read the key file again when
    it changes)."""
    try:
        record = _store(data_dir).revoke(key_id)
    except KeyError:
        fail(f"no key with id {key_id!r} (see memstream keys list --tenant T)")
    if json_out:
        print_json(shown(record))
        return
    out.print(f"revoked key {record.key_id} of tenant {record.tenant}")
