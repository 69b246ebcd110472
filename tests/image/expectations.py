"""What the images built here must match: the Dockerfile and the chart."""

import re
import shlex
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from devcluster.components import locate
from tests.unit.test_dockerfile import DOCKERFILE, Stage, parse_stages

CHART = Path(__file__).resolve().parents[2] / "charts" / "trussium-operator"


def final_stage() -> Stage:
    return parse_stages(DOCKERFILE.read_text())[-1]


def dockerfile_python() -> str:
    """The minor Python version of the Dockerfile's base image (python:3.11-slim -> 3.11)."""
    match = re.search(r"^ARG PYTHON_IMAGE=python:(\d+\.\d+)", DOCKERFILE.read_text(), re.M)
    assert match, "the Dockerfile names its python base image"
    return match.group(1)


def pairs(arguments: list[str]) -> dict[str, str]:
    """`KEY=value` words of LABEL or ENV instructions, quotes removed."""
    return dict(word.partition("=")[::2] for args in arguments for word in shlex.split(args))


@cache
def chart_containers() -> tuple[dict[str, Any], ...]:
    """The operator's containers as the chart renders them with its default values."""
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
