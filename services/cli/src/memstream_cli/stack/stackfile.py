"""``<data dir>/stack.json``: how CLI commands find a running embedded stack."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel


class ComponentInfo(BaseModel):
    pid: int
    log: str
    metrics_url: str | None = None
    worker: str | None = None  # the worker a replica belongs to (sequencer-2: sequencer)


class StackInfo(BaseModel):
    pid: int
    started_at: str
    data_dir: str
    kafka_bootstrap: str
    falkordb_url: str
    api_url: str
    metrics_endpoints: list[str]
    components: dict[str, ComponentInfo]
    dev_key_file: str


def stack_file(data_dir: Path) -> Path:
    return data_dir / "stack.json"


def write_stack(info: StackInfo) -> None:
    path = stack_file(Path(info.data_dir))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(info.model_dump_json(indent=2))
    os.replace(tmp, path)


def read_stack(data_dir: Path) -> StackInfo | None:
    """The running stack's endpoints, or None when no live stack owns this data dir."""
    path = stack_file(data_dir)
    if not path.exists():
        return None
    info = StackInfo.model_validate(json.loads(path.read_text()))
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return info
