"""A values file of the Go operator's chart, given to this chart: its defaults
install exactly what this chart's defaults install, a customized file lands
every key where it means the same, and keys with no equivalent fail the render
with one message naming each of them and what to set instead (ADR 0031)."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane
from tests.support.chart import (
    CHART,
    accepted,
    container,
    find,
    fullname,
    release_name,
    render,
    render_error,
)

pytestmark = pytest.mark.api

GO_DEFAULTS = Path(__file__).resolve().parents[1] / "fixtures" / "go-operator-chart" / "values.yaml"
Obj = dict[str, Any]

# What a team running the Go chart in production typically changed.
CUSTOMIZED: Obj = {
    "image": {"repository": "registry.corp.example/trussiumhq/trussium-operator-python"},
    "imagePullSecrets": [{"name": "corp-registry"}],
    "replicaCount": 2,
    "leaderElection": {"enabled": True},
    "serviceAccount": {
        "create": True,
        "automount": True,
        "name": "trussium-reconciler",
        "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/trussium"},
    },
    "podAnnotations": {"sidecar.istio.io/inject": "false"},
    "podLabels": {"team": "ml-platform"},
    "podSecurityContext": {"fsGroup": 2000},
    "securityContext": {"readOnlyRootFilesystem": True},
    "nodeSelector": {"node-role.example/infra": "true"},
    "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    },
    "metrics": {"serviceMonitor": {"enabled": True, "interval": "15s"}},
}


def _go_values(tmp_path: Path, changes: Obj) -> str:
    """The Go chart's default values file with `changes` merged in, as a team keeps it."""
    values = yaml.safe_load(GO_DEFAULTS.read_text())

    def merge(into: Obj, changes: Obj) -> None:
        for key, value in changes.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = value

    merge(values, changes)
    path = tmp_path / "go-values.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


def _pod(deployment: Obj) -> Obj:
    pod: Obj = deployment["spec"]["template"]
    return pod


def test_the_go_charts_defaults_install_what_ours_do(plane: ControlPlane, namespace: str) -> None:
    release = release_name()
    ours = render(plane, release, namespace)
    from_go = render(plane, release, namespace, "-f", str(GO_DEFAULTS))
    assert from_go == ours
    lint = plane.helm("lint", "--strict", str(CHART), "-f", str(GO_DEFAULTS))
    assert "[WARNING]" not in lint.stdout, lint.stdout
    assert "[ERROR]" not in lint.stdout, lint.stdout


def test_a_customized_go_values_file_keeps_its_meaning(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    release = release_name()
    name = fullname(release)
    objects = render(plane, release, namespace, "-f", _go_values(tmp_path, CUSTOMIZED))
    accepted(plane, namespace, objects)
    controller = find(objects, "Deployment", f"{name}-controller")
    webhook = find(objects, "Deployment", f"{name}-webhook")

    # The Go chart's one Pod was the reconciler: its count, election and account.
    assert controller["spec"]["replicas"] == 2
    assert "--leader-elect" in container(controller)["args"]
    assert _pod(controller)["spec"]["serviceAccountName"] == "trussium-reconciler"
    account = find(objects, "ServiceAccount", "trussium-reconciler")
    assert account["metadata"]["annotations"] == CUSTOMIZED["serviceAccount"]["annotations"]
    binding = find(objects, "ClusterRoleBinding", f"{name}-controller")
    assert binding["subjects"][0]["name"] == "trussium-reconciler"
    assert webhook["spec"]["replicas"] == 2, "the webhook keeps its own"
    assert _pod(webhook)["spec"]["serviceAccountName"] == f"{name}-webhook"
    assert "annotations" not in find(objects, "ServiceAccount", f"{name}-webhook")["metadata"]

    # Both Pods are the operator's: labels, annotations, security and placement.
    for deployment in (controller, webhook):
        pod = _pod(deployment)
        assert pod["metadata"]["labels"]["team"] == "ml-platform"
        assert pod["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
        assert pod["spec"]["securityContext"]["fsGroup"] == 2000
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        assert container(deployment)["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert pod["spec"]["nodeSelector"] == {
            "kubernetes.io/os": "linux",
            "node-role.example/infra": "true",
        }
        assert pod["spec"]["tolerations"] == CUSTOMIZED["tolerations"]
        assert pod["spec"]["affinity"] == CUSTOMIZED["affinity"]
        assert pod["spec"]["imagePullSecrets"] == [{"name": "corp-registry"}]
        # The Go chart takes the registry in the repository.
        assert container(deployment)["image"].startswith(
            "registry.corp.example/trussiumhq/trussium-operator-python:"
        )
        # Sized for these programs, not the Go binary (its default resources were given).
        assert container(deployment)["resources"]["limits"]["memory"] == "256Mi"

    monitor = find(objects, "ServiceMonitor", name)
    assert {e["interval"] for e in monitor["spec"]["endpoints"]} == {"15s"}


def test_go_keys_without_an_equivalent_are_all_named_at_once(
    plane: ControlPlane, tmp_path: Path
) -> None:
    refused = {
        "image": {"tag": "v0.7.0"},
        "serviceAccount": {"automount": False, "create": False},
        "resources": {"limits": {"cpu": "1", "memory": "512Mi"}},
        "metrics": {
            "service": {"enabled": False, "type": "NodePort", "port": 9443},
        },
    }
    error = render_error(plane, "-f", _go_values(tmp_path, refused))
    lines = [line for line in error.splitlines() if line.startswith("- ")]
    named = [line[2:].split(":", 1)[0] for line in lines]
    assert named == [
        "image.tag=v0.7.0 with image.repository=ghcr.io/trussiumhq/trussium-operator",
        "serviceAccount.automount=false",
        "serviceAccount.create=false without serviceAccount.name",
        "resources",
        "metrics.service.enabled=false",
        "metrics.service.type=NodePort",
        "metrics.service.port=9443",
    ]
    assert all("; instead: " in line for line in lines), lines
    assert "7 value(s) of the Go operator's chart cannot be carried over" in error
    assert "controller.resources and webhook.resources" in error


def test_a_copy_of_the_go_image_is_refused(plane: ControlPlane) -> None:
    error = render_error(
        plane, "--set", "image.repository=registry.corp.example/mirror/trussium-operator"
    )
    assert "- image.repository=registry.corp.example/mirror/trussium-operator:" in error
    assert "push trussiumhq/trussium-operator-python to that registry" in error


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["--set", "replicaCount=-1"], "at '/replicaCount': minimum"),
        (["--set", "serviceAccount.automount=maybe"], "at '/serviceAccount/automount'"),
        (["--set", "serviceAccount.token=x"], "additional properties 'token' not allowed"),
        (["--set", "metrics.service.port=0"], "at '/metrics/service/port'"),
        (["--set", "resources.limits.memory=lots"], "at '/resources/limits/memory'"),
    ],
)
def test_the_schema_checks_go_keys_as_their_targets(
    plane: ControlPlane, values: list[str], message: str
) -> None:
    assert message in render_error(plane, *values)
