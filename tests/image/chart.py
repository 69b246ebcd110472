"""The operator's containers as the chart renders them with its default values."""

import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from devcluster.components import locate

CHART = Path(__file__).resolve().parents[2] / "charts" / "trussium-operator"


@cache
def chart_containers() -> tuple[dict[str, Any], ...]:
    out = subprocess.run(
        [str(locate().bin_dir / "helm"), "template", "images", str(CHART)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    return tuple(
        container
        for doc in yaml.safe_load_all(out)
        if doc and doc["kind"] == "Deployment"
        for container in doc["spec"]["template"]["spec"]["containers"]
    )
