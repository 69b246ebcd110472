"""What a team installing the Go operator relied on, on the control plane: the
TrussiumRuntime roles aggregate into the built-in admin, edit and view
ClusterRoles (kube-controller-manager's aggregation controller does it), a Go
chart values file installs this chart, and the install bundle sits beside the
Go bundle and takes its CRD over without a conflict (ADR 0031)."""

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane
from devcluster.controller_harness import runtime_manifest
from devcluster.hostoperator import install_crds
from devcluster.polling import wait_for
from hack.bundle import render as render_bundle
from tests.support.chart import CHART, find, fullname, release_name
from tests.support.go_operator import GO_CRD

pytestmark = pytest.mark.cluster

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GO_DEFAULTS = FIXTURES / "go-operator-chart" / "values.yaml"
# The Go bundle's access roles (config/rbac, prefixed by config/default); the fixture
# bundle leaves them out, as it leaves out the CRD.
GO_ACCESS_ROLES = [
    f"trussium-operator-trussiumruntime-{role}-role" for role in ("admin", "editor", "viewer")
]
RUNTIMES = "trussiumruntimes.runtime.trussium.io"
# The aggregation controller acts on a watch event; a minute is far more than it needs.
AGGREGATION_SECONDS = 60.0


def _as(
    plane: ControlPlane, user: str, namespace: str, *args: str, body: str | None = None
) -> bool:
    """Whether `user` (impersonated by the cluster admin) may run this kubectl command."""
    answer = plane.kubectl("--as", user, "-n", namespace, *args, input=body, check=False)
    assert answer.returncode == 0 or "forbidden" in answer.stderr.lower(), answer.stderr
    return answer.returncode == 0


def _can(plane: ControlPlane, user: str, namespace: str, verb: str) -> bool:
    answer = plane.kubectl(
        "auth", "can-i", verb, RUNTIMES, "--as", user, "-n", namespace, check=False
    )
    return answer.stdout.strip() == "yes"


def _access_roles(plane: ControlPlane, release: str, *values: str) -> None:
    rendered = plane.helm(
        "template", release, str(CHART), "--show-only", "templates/rbac-runtime-access.yaml",
        *values,
    ).stdout  # fmt: skip
    plane.kubectl("apply", "--server-side", "--field-manager=test", "-f", "-", input=rendered)


def test_edit_and_view_in_a_namespace_reach_trussium_runtimes(
    plane: ControlPlane, namespace: str
) -> None:
    install_crds(plane)
    release = release_name()
    name = fullname(release)
    for user, role in (("alice", "edit"), ("bob", "view"), ("carol", "admin")):
        plane.kubectl(
            "create", "rolebinding", f"{user}-{role}", f"--clusterrole={role}",
            f"--user={user}", "-n", namespace,
        )  # fmt: skip
    assert not _can(plane, "alice", namespace, "create"), "nothing aggregated yet"
    try:
        _access_roles(plane, release)
        wait_for(
            lambda: _can(plane, "alice", namespace, "create"),
            "edit aggregating the role",
            AGGREGATION_SECONDS,
        )
        wait_for(
            lambda: _can(plane, "bob", namespace, "list"),
            "view aggregating the role",
            AGGREGATION_SECONDS,
        )

        runtime = json.dumps(runtime_manifest("shared", namespace))
        assert _as(plane, "alice", namespace, "create", "-f", "-", body=runtime)
        assert _as(plane, "alice", namespace, "patch", "truntime", "shared", "--type=merge",
                   "-p", '{"spec":{"replicas":2}}')  # fmt: skip
        assert _as(plane, "bob", namespace, "get", "truntime", "shared")
        assert not _as(plane, "bob", namespace, "delete", "truntime", "shared")
        assert not _as(plane, "bob", namespace, "create", "-f", "-", body=runtime)
        assert not _as(plane, "dave", namespace, "get", "truntime"), "an unbound user"
        assert _as(plane, "carol", namespace, "delete", "truntime", "shared")
        # Bound in this namespace only.
        assert not _as(plane, "alice", "default", "get", "truntime")

        # Without the labels, the built-in roles drop the rules again.
        _access_roles(plane, release, "--set", "global.rbac.aggregateClusterRoles=false")
        wait_for(
            lambda: not _can(plane, "alice", namespace, "create"),
            "edit dropping the role",
            AGGREGATION_SECONDS,
        )
        assert not _can(plane, "bob", namespace, "list")
    finally:
        plane.kubectl(
            "delete", "clusterrole", "--ignore-not-found",
            *(f"{name}-trussiumruntime-{role}" for role in ("admin", "editor", "viewer")),
        )  # fmt: skip


def test_a_go_chart_values_file_installs(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    install_crds(plane)
    values = yaml.safe_load(GO_DEFAULTS.read_text())
    values |= {
        "replicaCount": 2,
        "podLabels": {"team": "ml-platform"},
        "serviceAccount": values["serviceAccount"] | {"name": "trussium-reconciler"},
        "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
    }
    go_values = tmp_path / "go-values.yaml"
    go_values.write_text(yaml.safe_dump(values))
    release = release_name()
    name = fullname(release)
    try:
        plane.helm(
            "install", release, str(CHART), "-n", namespace, "-f", str(go_values),
            "--set", "crds.enabled=false", "--wait", "--timeout", "180s",
        )  # fmt: skip
        deployments = json.loads(
            plane.kubectl("get", "deployments", "-n", namespace, "-o", "json").stdout
        )["items"]
        controller = find(deployments, "Deployment", f"{name}-controller")
        assert controller["status"]["availableReplicas"] == 2
        pod = controller["spec"]["template"]
        assert pod["spec"]["serviceAccountName"] == "trussium-reconciler"
        assert pod["metadata"]["labels"]["team"] == "ml-platform"
        assert (
            find(deployments, "Deployment", f"{name}-webhook")["status"]["availableReplicas"] == 2
        )
    finally:
        plane.helm("uninstall", release, "-n", namespace, "--wait", "--timeout", "120s")


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def test_the_bundle_sits_beside_the_go_bundle_and_takes_its_crd_over(
    plane: ControlPlane, tmp_path: Path
) -> None:
    bundle = [doc for doc in yaml.safe_load_all(render_bundle(plane.bin_dir / "helm")) if doc]
    go_bundle = yaml.safe_load((FIXTURES / "go-operator-bundle.yaml").read_text())["items"]
    go_names = {_key(o) for o in go_bundle} | {("ClusterRole", "", n) for n in GO_ACCESS_ROLES}
    shared = {_key(o) for o in bundle} & go_names
    assert shared == set(), "only the Namespace and the CRD are the Go bundle's too"

    # The Go bundle applied client-side, step 3 of the migration guide, then the
    # bundle's CRD under the same field manager, without --force-conflicts.
    crd = next(o for o in bundle if o["kind"] == "CustomResourceDefinition")
    try:
        plane.kubectl("apply", "-f", str(GO_CRD))
        plane.kubectl(
            "apply", "--server-side", "--force-conflicts",
            "-f", str(CHART / "files" / "crds"),
        )  # fmt: skip
        applied = plane.kubectl(
            "apply", "--server-side", "-f", "-", input=json.dumps(crd), check=False
        )
        assert applied.returncode == 0, applied.stderr
    finally:
        install_crds(plane)
