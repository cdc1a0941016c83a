"""The searchable text of an event, per type."""

from __future__ import annotations

import re
from typing import Any

import orjson


def _scalar(v: Any) -> str:
    if isinstance(v, str):
        return v
    return orjson.dumps(v).decode() if v is not None else ""


def event_text(entry: dict[str, Any]) -> str:
    """What an event says, in words; structured payloads are rendered compactly."""
    p: dict[str, Any] = entry.get("payload") or {}
    t = entry.get("type", "")
    explicit = p.get("text")
    if t in ("message.user", "message.assistant", "observation"):
        return str(explicit or "")
    if t == "fact.asserted":
        obj = p.get("object") if p.get("object") is not None else _scalar(p.get("value"))
        unit = f" {p['unit']}" if p.get("unit") else ""
        return str(explicit or f"{p.get('subject')} {p.get('predicate')} {obj}{unit}")
    if t == "preference.set":
        who = p.get("subject") or entry.get("agent")
        return str(explicit or f"{who} prefers {p.get('key')}: {_scalar(p.get('value'))}")
    if t == "tool.call":
        args = orjson.dumps(p.get("arguments") or {}).decode()
        return str(explicit or f"call {p.get('tool')} {args}")
    if t == "tool.result":
        return str(explicit or f"{p.get('tool')} returned {_scalar(p.get('output'))}")
    if t == "task.started":
        return f"task {p.get('task_id')} started: {p.get('goal') or ''}".strip()
    if t == "task.outcome":
        return f"task {p.get('task_id')} {p.get('status')}: {explicit or ''}".strip()
    if t in ("memory.feedback", "memory.invalidate"):
        return str(p.get("reason") or "")
    if t == "memory.purge":
        return ""  # a tombstone must not make its subject easier to find
    return str(explicit or "")


# How ``event_text`` writes a task record: read back by :func:`task_line`.
_TASK_LINE = re.compile(
    r"task (?P<id>\S+) (?P<status>started|success|failure|partial|abandoned):?(?: (?P<rest>.*))?",
    re.DOTALL,
)


def task_line(event_type: str, text: str) -> tuple[str, str, str] | None:
    """A task record's (task id, status — ``started`` for a start —, what it says), read
    from the text :func:`event_text` gave it; None for any other event."""
    if event_type not in ("task.started", "task.outcome"):
        return None
    m = _TASK_LINE.fullmatch(text.strip())
    if m is None:
        return None
    return m["id"], m["status"], (m["rest"] or "").strip()


DESCRIPTIVE_MIN_WORDS = 3


def descriptive_metadata(metadata: dict[str, Any]) -> str:
    """Metadata values written as prose (a caption, a note), joined: they describe the event
    and are searchable with it. Identifiers, codes, numbers and flags are left out."""
    return " ".join(
        " ".join(v.split())
        for v in metadata.values()
        if isinstance(v, str) and len(v.split()) >= DESCRIPTIVE_MIN_WORDS
    )
