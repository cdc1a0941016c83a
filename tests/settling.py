"""What the learning tests wait on: a tenant's opened ledger, and a stack with nothing left
to read or project."""

from __future__ import annotations

import json
from typing import Any

from memstream.ledger.opening import EntryOpener
from memstream.projection.status import caught_up
from memstream.shred.sqlite import SqliteDataKeys
from stackproc import RunningStack, memstream


def tenant_ledger(stack: RunningStack, tenant: str) -> list[dict[str, Any]]:
    """The tenant's ledger entries, opened through the stack's key store."""
    keys = SqliteDataKeys(stack.data_dir / "data-keys.sqlite")
    try:
        opener = EntryOpener(keys)
        return [opener(e) for e in stack.ledger() if e.get("tenant") == tenant]
    finally:
        keys.close()


def settled(stack: RunningStack) -> bool:
    """Everything ledgered is read by every consumer and projected in the live version."""
    res = memstream("status", "--json", data_dir=stack.data_dir, check=False)
    if res.returncode != 0 or any(
        g.get("total") != 0 for g in json.loads(res.stdout)["lag"].values()
    ):
        return False
    res = memstream("projections", "list", "--json", data_dir=stack.data_dir, check=False)
    if res.returncode != 0:
        return False
    (live,) = [v for v in json.loads(res.stdout)["versions"] if v["live"]]
    return caught_up(live, 0)
