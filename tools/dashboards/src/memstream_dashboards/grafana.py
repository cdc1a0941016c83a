"""The dashboard model and the Grafana JSON it renders to (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

DATASOURCE = {"type": "prometheus", "uid": "prometheus"}
TAG = "memstream"

Kind = Literal["timeseries", "stat"]
Steps = tuple[tuple[float | None, str], ...]  # (from value, colour); None = the base step


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: Kind = "timeseries"
    width: int = 12
    height: int = 8
    steps: Steps = ()


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    question: str  # what the dashboard answers; its description in Grafana
    panels: tuple[Panel, ...]

    @property
    def filename(self) -> str:
        return f"{self.uid.removeprefix('memstream-')}.json"


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    targets = [
        {
            "datasource": DATASOURCE,
            "expr": q.expr,
            "legendFormat": q.legend or "__auto",
            "range": True,
            "refId": chr(ord("A") + i),
        }
        for i, q in enumerate(panel.queries)
    ]
    options: dict[str, Any]
    if panel.kind == "stat":
        options = {
            "colorMode": "background",
            "graphMode": "none",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        }
    else:
        options = {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    defaults: dict[str, Any] = {"unit": panel.unit}
    if panel.steps:
        defaults["thresholds"] = {
            "mode": "absolute",
            "steps": [{"color": colour, "value": value} for value, colour in panel.steps],
        }
    return {
        "datasource": DATASOURCE,
        "description": panel.description,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "id": panel_id,
        "options": options,
        "targets": targets,
        "title": panel.title,
        "type": panel.kind,
    }


def dashboard_json(dash: Dashboard) -> dict[str, Any]:
    """The Grafana dashboard model (schemaVersion 39), panels flowed left to right."""
    panels: list[dict[str, Any]] = []
    x = y = row_height = 0
    for i, panel in enumerate(dash.panels, start=1):
        if x + panel.width > 24:
            x, y, row_height = 0, y + row_height, 0
        panels.append(_panel_json(panel, i, x, y))
        x += panel.width
        row_height = max(row_height, panel.height)
    return {
        "annotations": {"list": []},
        "description": dash.question,
        "editable": False,
        "graphTooltip": 1,
        "links": [
            {
                "asDropdown": False,
                "includeVars": False,
                "keepTime": True,
                "tags": [TAG],
                "title": "memstream",
                "type": "dashboards",
            }
        ],
        "panels": panels,
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": [TAG],
        "templating": {"list": []},
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "title": dash.title,
        "uid": dash.uid,
        "version": 1,
    }


def render(dash: Dashboard) -> str:
    return json.dumps(dashboard_json(dash), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
