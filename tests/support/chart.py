"""Helpers shared by the chart tests: render the chart, pick objects out of it."""

import json
import secrets
from pathlib import Path
from typing import Any

import yaml

from devcluster import ControlPlane

CHART = Path(__file__).resolve().parents[2] / "charts" / "trussium-operator"
CHART_NAME = "trussium-operator"
CERT_MODE_VALUES: dict[str, tuple[str, ...]] = {
    "selfManaged": (),
    "certManager": ("--set", "certificates.mode=certManager"),
    "provided": (
        "--set",
        "certificates.mode=provided",
        "--set",
        "certificates.provided.existingSecret=my-webhook-tls",
        "--set",
        "certificates.provided.caBundle=Q0EgYnVuZGxl",
    ),
}


def release_name() -> str:
    """Unique per test: the chart's cluster-scoped objects are named after the release."""
    return f"tc-{secrets.token_hex(3)}"


def fullname(release: str) -> str:
    return release if CHART_NAME in release else f"{release}-{CHART_NAME}"


def render(
    plane: ControlPlane, release: str, namespace: str, *args: str, chart: Path = CHART
) -> list[dict[str, Any]]:
    """`helm template` output as objects (no empty documents): what an install creates,
    without the `helm test` hook's objects (tests/apiserver/test_chart_ci_values.py)."""
    out = plane.helm(
        "template", release, str(chart), "--namespace", namespace, "--skip-tests", *args
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def render_error(plane: ControlPlane, *args: str, namespace: str = "trussium-system") -> str:
    """`helm template` that must fail (schema or `fail`): its error output."""
    result = plane.helm("template", "t", str(CHART), "--namespace", namespace, *args, check=False)
    assert result.returncode != 0, "the render succeeded"
    return result.stderr


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


def kinds(objects: list[dict[str, Any]]) -> set[str]:
    return {o["kind"] for o in objects}


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def flag(args: list[str], name: str) -> str:
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"{name}=")]
    assert len(values) == 1, f"{name} passed {len(values)} times in {args}"
    return values[0]


def as_list(objects: list[dict[str, Any]]) -> str:
    """One kubectl-readable document (a v1 List) holding the objects."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


# API groups whose CRDs the api and cluster profiles do not serve.
NOT_IN_CLUSTER = {"cert-manager.io", "monitoring.coreos.com"}


def accepted(plane: ControlPlane, namespace: str, objects: list[dict[str, Any]]) -> None:
    """The API server accepts the objects it serves (server-side dry run)."""
    in_cluster = [o for o in objects if o["apiVersion"].split("/")[0] not in NOT_IN_CLUSTER]
    plane.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-", input=as_list(in_cluster)
    )
