"""Redaction of ``security.redacted_paths`` before an event is hashed or stored."""

from __future__ import annotations

import copy
from typing import Any

REDACTED = "[REDACTED]"


def redact(event: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """Return a copy of ``event`` with the value at every dotted path replaced by a marker.

    Paths that do not exist are ignored: redaction never invents structure.
    """
    if not paths:
        return event
    out = copy.deepcopy(event)
    for path in paths:
        parts = path.split(".")
        node: Any = out
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                break
        if isinstance(node, dict) and parts[-1] in node:
            node[parts[-1]] = REDACTED
    return out
