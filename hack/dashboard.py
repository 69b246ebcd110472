"""The chart's Grafana dashboard and its queries as Prometheus reads them: Grafana's
variables replaced by what they expand to (by default every runtime namespace and a
5 m rate window)."""

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from devcluster.hostoperator import CHART

DASHBOARD = CHART / "dashboards" / "trussium-operator.json"
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$runtime_namespace": ".*"}
LABEL_VALUES = re.compile(r"^label_values\((\w+), (\w+)\)$")


def load(path: Path = DASHBOARD) -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(path.read_text())
    return dashboard


def expand(expr: str, variables: dict[str, str] = GRAFANA_VARIABLES) -> str:
    """`expr` with each Grafana variable replaced by its value."""
    for variable, value in variables.items():
        expr = expr.replace(variable, value)
    return expr


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel."""
    for panel in dashboard["panels"]:
        for target in panel.get("targets", ()):
            yield panel["title"], expand(target["expr"])


def variable_reads(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(metric, label) of each query variable (`label_values(metric, label)`)."""
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            match = LABEL_VALUES.match(variable["definition"])
            assert match, variable["definition"]
            yield match.group(1), match.group(2)
