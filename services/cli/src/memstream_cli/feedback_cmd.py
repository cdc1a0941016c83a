"""``memstream feedback``: explicit feedback on memories (through the HTTP API)."""

from __future__ import annotations

from typing import Annotated

import typer

from memstream_cli.api import ApiKey, Tenant, calling
from memstream_cli.common import DataDir, JsonFlag, out, print_json


def feedback(
    ids: Annotated[list[str], typer.Argument(help="memory ids (event or fact ids)")],
    tenant: Tenant,
    signal: Annotated[
        float, typer.Option("--signal", min=-1.0, max=1.0, help="-1 harmful .. +1 helpful")
    ],
    packet: Annotated[
        str | None, typer.Option("--packet", help="the packet the memories came from")
    ] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="why, in a sentence")] = None,
    stream: Annotated[
        str | None, typer.Option("--stream", help="ledger stream (default feedback)")
    ] = None,
    key: ApiKey = None,
    data_dir: DataDir = None,
    json_out: JsonFlag = False,
) -> None:
    """Tell memory that some memories helped (+) or misled (-); into the ledger. Every id
    must name an event or fact of the tenant: otherwise nothing is written and the unknown
    ids are listed (exit 1)."""
    with calling(data_dir, tenant, key) as client:
        event_id = client.feedback(ids, signal, packet_id=packet, reason=reason, stream=stream)
    if json_out:
        print_json(
            {"id": event_id, "tenant": tenant, "target_ids": ids, "signal": signal,
             "packet_id": packet, "reason": reason}
        )  # fmt: skip
    else:
        out.print(f"feedback {event_id}: signal {signal:+g} on {len(ids)} memories")
