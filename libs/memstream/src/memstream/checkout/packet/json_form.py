"""The JSON rendering: the packet for programs, fields in packet order (answer first, proof
after), full ledger refs."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from memstream.records.packet import CheckoutPacket

CONTENT_FIELDS = (
    "answerability",
    "synthesis_plan",
    "answer_candidates",
    "warnings",
    "facts",
    "evidence",
    "snippets",
    "latent_context",
)
FIELD_ORDER = (
    *CONTENT_FIELDS,
    "memory_weave",
    "budget",
    "packet_id",
    "tenant",
    "as_of",
    "meta",
)


def _dump(obj: BaseModel | str) -> Any:
    return obj.model_dump(mode="json", exclude_none=True) if isinstance(obj, BaseModel) else obj


def item_json(obj: BaseModel | str) -> str:
    """One part of the packet as compact JSON, ``None`` fields left out (the budget unit)."""
    return json.dumps(_dump(obj), ensure_ascii=False, separators=(",", ":"))


def render_json(packet: CheckoutPacket) -> str:
    """The packet as compact JSON, fields in packet order; items as in ``item_json``."""
    doc: dict[str, Any] = {
        "answerability": packet.answerability,
        "synthesis_plan": _dump(packet.synthesis_plan),
    }
    for name in CONTENT_FIELDS[2:]:
        doc[name] = [_dump(x) for x in getattr(packet, name)]
    weave = packet.memory_weave
    doc["memory_weave"] = _dump(weave) if weave is not None else None
    doc["budget"] = packet.budget.model_dump(mode="json")
    doc.update(packet_id=packet.packet_id, tenant=packet.tenant, as_of=packet.as_of)
    doc["meta"] = packet.meta
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str)
