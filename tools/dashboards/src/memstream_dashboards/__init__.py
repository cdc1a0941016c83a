"""The memstream Grafana dashboards: panels as data (``boards.toml``), rendered to JSON."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from memstream.sinks import SINKS, Sink, sink

from memstream_dashboards.grafana import Dashboard, Panel, Query, render

__all__ = ["Dashboard", "Panel", "Query", "dashboards", "render", "write_all"]


def expand(expr: str, sinks: Sequence[Sink] = SINKS) -> str:
    """A query with the sinks' components filled in from the table of sinks: ``$PROJECTORS``
    is every projection version's worker (``a|b``, for ``=~``), ``${name}`` one sink's."""
    projectors = "|".join(s.component for s in sinks if s.versioned is not None)
    expr = expr.replace("$PROJECTORS", projectors)
    return re.sub(r"\$\{(\w+)\}", lambda m: sink(m[1], sinks).component, expr)


def _panel(doc: dict[str, Any]) -> Panel:
    steps = tuple((s.get("value"), s["color"]) for s in doc.get("steps", ()))
    queries = tuple(Query(expand(q["expr"]), q.get("legend", "")) for q in doc["queries"])
    rest = {k: doc[k] for k in ("unit", "kind", "width", "height") if k in doc}
    return Panel(doc["title"], doc["description"], queries, steps=steps, **rest)


def dashboards() -> tuple[Dashboard, ...]:
    """Every dashboard, as ``boards.toml`` describes it."""
    text = resources.files(__package__).joinpath("boards.toml").read_text(encoding="utf-8")
    return tuple(
        Dashboard(d["uid"], d["title"], d["question"], tuple(_panel(p) for p in d["panel"]))
        for d in tomllib.loads(text)["dashboard"]
    )


def write_all(out_dir: Path) -> list[Path]:
    """Write every dashboard into ``out_dir``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for dash in dashboards():
        path = out_dir / dash.filename
        path.write_text(render(dash), encoding="utf-8")
        written.append(path)
    return written
