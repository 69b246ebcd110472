"""The values platform teams set on every chart they run (named as cert-manager,
kyverno and ingress-nginx name them; docs/install.md has the table): each renders
where expected, and the API server accepts the result (server-side dry run)."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane
from tests.support.chart import accepted, container, find, fullname, release_name, render

pytestmark = pytest.mark.api

CRD_NAME = "trussiumruntimes.runtime.trussium.io"
COMPONENTS = ("controller", "webhook")
VERSION = (Path(__file__).resolve().parents[2] / "VERSION").read_text().strip()

PLATFORM: dict[str, Any] = {
    "global": {
        "imageRegistry": "mirror.example:5000",
        "imagePullSecrets": [{"name": "mirror-pull"}],
        "clusterName": "eu-1",
    },
    "imagePullSecrets": [{"name": "own-pull"}],
    "commonLabels": {"team": "platform", "app.kubernetes.io/name": "not-the-chart"},
    "crds": {"keep": False},
    "controller": {
        "serviceAccount": {"create": False, "name": "existing-controller"},
        "podDisruptionBudget": {"minAvailable": "50%"},
        "strategy": {"type": "Recreate"},
        "revisionHistoryLimit": 10,
        "livenessProbe": {"periodSeconds": 20, "initialDelaySeconds": 5},
        "readinessProbe": None,
        "nodeSelector": {"pool": "ops"},
    },
    "webhook": {
        "serviceAccount": {
            "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/webhook"}
        },
        "podDisruptionBudget": {"enabled": False},
        "strategy": {"rollingUpdate": {"maxSurge": "50%"}},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081}},
        "nodeSelector": None,
    },
}


def _pod(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    spec: dict[str, Any] = find(objects, "Deployment", name)["spec"]["template"]["spec"]
    return spec


def test_defaults_a_platform_team_expects(plane: ControlPlane, namespace: str) -> None:
    """Linux nodes, a budget and a surge-only rollout for both (docs/install.md, "Upgrade":
    both Deployments roll with maxUnavailable 0), accounts of their own, the CRD kept."""
    release = release_name()
    name = fullname(release)
    objects = render(plane, release, namespace)
    accepted(plane, namespace, objects)
    for component in COMPONENTS:
        deployment = find(objects, "Deployment", f"{name}-{component}")
        assert deployment["spec"]["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
        }
        assert deployment["spec"]["revisionHistoryLimit"] == 3
        pod = deployment["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert pod["serviceAccountName"] == f"{name}-{component}"
        assert "imagePullSecrets" not in pod
        find(objects, "ServiceAccount", f"{name}-{component}")
        budget = find(objects, "PodDisruptionBudget", f"{name}-{component}")["spec"]
        assert budget["maxUnavailable"] == 1
        assert "minAvailable" not in budget
        assert budget["selector"]["matchLabels"]["app.kubernetes.io/component"] == component
        main = container(deployment)
        assert main["image"] == f"ghcr.io/trussiumhq/trussium-operator-python:{VERSION}"
        assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
        assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    crd = find(objects, "CustomResourceDefinition", CRD_NAME)
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert crd["metadata"]["labels"]["app.kubernetes.io/instance"] == release


def test_platform_values_render_where_expected_and_are_accepted(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    release = release_name()
    name = fullname(release)
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(PLATFORM))
    objects = render(plane, release, namespace, "-f", str(values))
    accepted(plane, namespace, objects)

    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["team"] == "platform", f"{obj['kind']}/{obj['metadata']['name']}"
        assert labels["app.kubernetes.io/name"] == "trussium-operator", "the chart's labels win"
    controller = find(objects, "Deployment", f"{name}-controller")
    webhook = find(objects, "Deployment", f"{name}-webhook")
    for deployment in (controller, webhook):
        pod = deployment["spec"]["template"]["spec"]
        assert container(deployment)["image"].startswith(
            "mirror.example:5000/trussiumhq/trussium-operator-python:"
        )
        assert pod["imagePullSecrets"] == [{"name": "own-pull"}, {"name": "mirror-pull"}]
        assert deployment["spec"]["template"]["metadata"]["labels"]["team"] == "platform"
        assert "team" not in deployment["spec"]["selector"]["matchLabels"]

    # An existing ServiceAccount: not created, but used and bound, and the webhook's
    # guard lets exactly that identity change managed Deployments.
    controller_pod = controller["spec"]["template"]["spec"]
    assert controller_pod["serviceAccountName"] == "existing-controller"
    accounts = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ServiceAccount"}
    assert set(accounts) == {f"{name}-webhook"}
    assert accounts[f"{name}-webhook"]["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/webhook"
    }
    bindings = [o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    controller_bindings = [b for b in bindings if "-controller" in b["metadata"]["name"]]
    assert controller_bindings
    for binding in controller_bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "existing-controller", "namespace": namespace}
        ]
    assert (
        f"--operator-username=system:serviceaccount:{namespace}:existing-controller"
        in container(webhook)["args"]
    )

    budgets = {
        o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "PodDisruptionBudget"
    }
    assert set(budgets) == {f"{name}-controller"}
    assert budgets[f"{name}-controller"]["minAvailable"] == "50%"
    assert "maxUnavailable" not in budgets[f"{name}-controller"]

    assert controller["spec"]["strategy"] == {"type": "Recreate"}, "rollingUpdate dropped"
    assert webhook["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": "50%"}
    assert controller["spec"]["revisionHistoryLimit"] == 10
    assert controller_pod["nodeSelector"] == {"kubernetes.io/os": "linux", "pool": "ops"}
    assert "nodeSelector" not in webhook["spec"]["template"]["spec"]

    main = container(controller)
    assert main["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "health"},
        "initialDelaySeconds": 5,
        "periodSeconds": 20,
        "timeoutSeconds": 2,
        "failureThreshold": 3,
    }
    assert "readinessProbe" not in main
    assert container(webhook)["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8081}

    crd = find(objects, "CustomResourceDefinition", CRD_NAME)
    assert "annotations" not in crd["metadata"], "crds.keep=false: uninstall deletes it"


def test_the_crd_can_be_left_out(plane: ControlPlane, namespace: str) -> None:
    objects = render(plane, release_name(), namespace, "--set", "crds.enabled=false")
    assert "CustomResourceDefinition" not in {o["kind"] for o in objects}


def test_no_registry_uses_the_repository_as_it_is(plane: ControlPlane, namespace: str) -> None:
    release = release_name()
    objects = render(
        plane,
        release,
        namespace,
        "--set",
        "image.registry=",
        "--set",
        "image.repository=localhost/trussium-operator-python",
        "--set",
        "image.digest=sha256:" + "a" * 64,
    )
    deployment = find(objects, "Deployment", f"{fullname(release)}-webhook")
    assert container(deployment)["image"] == "localhost/trussium-operator-python@sha256:" + "a" * 64
