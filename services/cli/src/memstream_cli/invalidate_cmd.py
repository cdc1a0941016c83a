"""``memstream invalidate`` and ``memstream invalidations``: wrong memories, and the
retrospective's proposals (through the HTTP API)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from memstream_cli.api import ApiKey, Tenant, calling
from memstream_cli.common import DataDir, JsonFlag, fail, out, print_json

invalidations_app = typer.Typer(
    help="Invalidations and the proposals of the retrospective pass.", no_args_is_help=True
)
Reason = Annotated[str | None, typer.Option("--reason", help="why, in a sentence")]


def invalidate(
    ids: Annotated[list[str], typer.Argument(help="fact ids, or event ids (with their facts)")],
    tenant: Tenant,
    reason: Annotated[str, typer.Option("--reason", help="why they are wrong")],
    after: Annotated[
        str | None,
        typer.Option("--after", help="a write's position: check targets once memory applied it"),
    ] = None,
    key: ApiKey = None,
    data_dir: DataDir = None,
    json_out: JsonFlag = False,
) -> None:
    """Say memories are wrong: facts get valid_to and the reason (never deleted), and
    checkout leaves them out."""
    with calling(data_dir, tenant, key) as client:
        event_id = client.invalidate(ids, reason, after=after)
    if json_out:
        print_json({"id": event_id, "tenant": tenant, "target_ids": ids, "reason": reason})
    else:
        out.print(f"invalidation {event_id}: {len(ids)} memories")


@invalidations_app.command("list")
def list_(
    tenant: Tenant,
    status: Annotated[
        str | None, typer.Option("--status", help="proposed | accepted | rejected")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 100,
    key: ApiKey = None,
    data_dir: DataDir = None,
    json_out: JsonFlag = False,
) -> None:
    """Invalidations and proposals, newest first; an open proposal has no decision."""
    if status not in (None, "proposed", "accepted", "rejected"):
        fail(f"--status must be proposed, accepted or rejected, not {status!r}")
    wanted: Literal["proposed", "accepted", "rejected"] | None = status  # type: ignore[assignment]
    with calling(data_dir, tenant, key) as client:
        found = client.invalidations(wanted, limit)
    if json_out:
        print_json(found)
        return
    for v in found:
        decided = ", ".join(v["decisions"]) or ("open" if v["status"] == "proposed" else "")
        out.print(f"{v['id']}  {v['status']:<8} {v['at']}  {' '.join(v['target_ids'])}  {decided}")
        out.print(f"    {v['reason']}", markup=False)


def _decide(
    tenant: str,
    proposal: str,
    accept: bool,
    reason: str | None,
    key: str | None,
    data_dir: Path | None,
    json_out: bool,
) -> None:
    with calling(data_dir, tenant, key) as client:
        event_id = client.decide(proposal, accept, reason=reason)
    verdict = "accepted" if accept else "rejected"
    if json_out:
        print_json({"id": event_id, "proposal_id": proposal, "status": verdict})
    else:
        out.print(f"proposal {proposal} {verdict} ({event_id})")


@invalidations_app.command("accept")
def accept(
    proposal: Annotated[str, typer.Argument(help="the proposal's event id")],
    tenant: Tenant,
    reason: Reason = None,
    key: ApiKey = None,
    data_dir: DataDir = None,
    json_out: JsonFlag = False,
) -> None:
    """Accept a proposal: its targets are invalidated."""
    _decide(tenant, proposal, True, reason, key, data_dir, json_out)


@invalidations_app.command("reject")
def reject(
    proposal: Annotated[str, typer.Argument(help="the proposal's event id")],
    tenant: Tenant,
    reason: Reason = None,
    key: ApiKey = None,
    data_dir: DataDir = None,
    json_out: JsonFlag = False,
) -> None:
    """Reject a proposal: nothing changes but the record of the decision."""
    _decide(tenant, proposal, False, reason, key, data_dir, json_out)
