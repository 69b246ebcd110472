"""docs/migration-from-go-operator.md, run in order on the local control plane.

The cluster starts as the Go operator's kustomize bundle leaves it: its CRD
applied client-side, its Deployment, RBAC, Service and leader Lease in
`trussium-operator-system`, runtimes stored under its CRD and their objects
written by `manager`. Each `<!-- step: ... -->` block of the guide then runs
verbatim, in order, except the Helm install of step 4, which on this
control plane is the same chart wiring with both programs as host
processes (devcluster.hostoperator).
"""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    get,
    must_get,
    runtime_manifest,
    wait_for,
)
from devcluster.hostoperator import CRD_NAME, HostOperator, install_crds
from tests.support.doc_steps import run_step
from tests.support.go_operator import (
    GO_CRD,
    GO_LEASE,
    GO_MANAGER,
    OWNED_KINDS,
    accepts_base_url,
    go_create,
    hold_lease,
    managers,
    rendered,
    watching,
    without_scratch,
)
from tests.support.migration_guide import guide_steps

OWN_PLANE = pytest.mark.own_plane(
    "the operator as host processes that the API server calls on 127.0.0.1"
)
pytestmark = [pytest.mark.cluster, OWN_PLANE]
REPO = Path(__file__).resolve().parents[2]
GO_NAMESPACE = "trussium-operator-system"
OUR_NAMESPACE = "trussium-system"
PREFIX = "trussium-operator-"
GO_BUNDLE = REPO / "tests" / "fixtures" / "go-operator-bundle.yaml"


@pytest.fixture
def go_install(plane: ControlPlane) -> Iterator[None]:
    """The Go operator's kustomize install, with its CRD applied client-side."""
    plane.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found", "--wait=true", timeout=300)
    plane.kubectl("apply", "-f", str(GO_CRD))
    wait_for(lambda: accepts_base_url(plane, "localhost:11434"), "the Go CRD served")
    plane.create_namespace(GO_NAMESPACE)
    plane.kubectl("apply", "-f", str(GO_BUNDLE))
    yield
    # Our release's cluster-scoped wiring (RBAC, webhook configurations) outlives the
    # namespaces; left behind, it would block a later `helm install` of the same name.
    ours = HostOperator(plane, namespace=OUR_NAMESPACE, release="trussium-operator")
    plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=ours.render_wiring())
    install_crds(plane)
    plane.delete_namespace(GO_NAMESPACE)
    plane.delete_namespace(OUR_NAMESPACE)


def test_the_migration_guide_runs_in_order_and_loses_nothing(
    plane: ControlPlane, namespace: str, go_install: None, tmp_path: Path
) -> None:
    steps = guide_steps()
    assert {
        "preflight",
        "find-go-lease",
        "stop-kustomize",
        "crd",
        "install",
        "verify",
        "remove-kustomize",
    } <= set(steps)
    assert "rollback-kustomize" in steps
    hold_lease(plane, GO_NAMESPACE, f"{PREFIX}controller-manager-7d9_1f2e", duration=5)
    provider = {"type": "ollama", "model": "m", "baseURL": "http://ollama:11434/v1"}
    plane.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps(runtime_manifest("chat", namespace, provider=provider)),
    )
    for obj in rendered(plane, "chat", namespace):
        go_create(plane, obj)
    legacy = runtime_manifest(
        "legacy", namespace, provider=provider | {"baseURL": "localhost:11434"}
    )
    plane.kubectl("create", "-f", "-", input=json.dumps(legacy))

    def rolled_out() -> dict[str, object] | None:
        deployment = must_get(plane, "deployment", "chat", namespace)
        status = deployment.get("status") or {}
        observed = status.get("observedGeneration") == deployment["metadata"]["generation"]
        return deployment if observed and status.get("readyReplicas") == 1 else None

    before = wait_for(rolled_out, "the Go-era runtime running")
    chat_sets = (
        "get",
        "rs",
        "-n",
        namespace,
        "-l",
        "app.kubernetes.io/instance=chat",
        "-o",
        "name",
    )
    replica_sets = plane.kubectl(*chat_sets).stdout.split()

    # 1. Preflight lists the runtime our stricter rules affect, and what that means; it
    # would be reconciled anyway (nothing freezes, exit 0); the user fixes it.
    code, output = run_step(plane, steps["preflight"])
    assert code == 0, output
    assert (
        f"{namespace}/legacy: warning: spec.provider.baseURL: must be an absolute http or "
        "https URL" in output
    )
    assert "[BaseURLNotHTTP]; still reconciled, with the ConfigurationWarnings condition" in output
    assert f"{namespace}/chat" not in output
    code, output = run_step(plane, steps["find-go-lease"])
    assert code == 0, output
    found = [line.split()[:2] for line in output.splitlines()[1:]]
    assert [GO_NAMESPACE, f"{PREFIX}controller-manager-7d9_1f2e"] in found, output
    plane.kubectl(
        "patch",
        "truntime",
        "legacy",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"provider": provider}}),
    )

    # 2. The Go controller scaled to zero.
    code, output = run_step(plane, steps["stop-kustomize"])
    assert code == 0, output
    assert (
        must_get(plane, "deployment", f"{PREFIX}controller-manager", GO_NAMESPACE)["spec"][
            "replicas"
        ]
        == 0
    )

    # 3. Our CRD, server-side: the stored runtimes stay, the schema becomes ours exactly.
    code, output = run_step(plane, steps["crd"])
    assert code == 0, output
    wait_for(lambda: not accepts_base_url(plane, "localhost:11434"), "our CRD served")
    schema = json.loads(plane.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    spec = schema["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert {"autoscaling", "networkPolicy"} <= set(spec["properties"])
    assert "format" not in spec["properties"]["provider"]["properties"]["baseURL"]
    assert get(plane, "truntime", "chat", namespace) is not None

    # 4. Install ours (the chart's wiring; the programs as host processes).
    assert (
        "helm install trussium-operator ./charts/trussium-operator -n trussium-system"
        in steps["install"]
    )
    with (
        watching(plane, "chat", namespace, tmp_path / "watch.log") as watch,
        HostOperator(plane, namespace=OUR_NAMESPACE, release="trussium-operator"),
    ):
        # 5. Verify, as the guide says: one rollout, for the scratch space, none unavailable.
        code, output = run_step(plane, steps["verify"])
        assert code == 0, output
        after = must_get(plane, "deployment", "chat", namespace)
        assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1  # type: ignore[index]
        template, old_template = after["spec"]["template"], before["spec"]["template"]  # type: ignore[index]
        assert without_scratch(template) == old_template
        sets = plane.kubectl(*chat_sets).stdout.split()
        assert set(replica_sets) < set(sets)
        assert len(sets) == len(replica_sets) + 1
        assert min(state.available for state in watch.states()) == 1
        for kind in OWNED_KINDS[:5]:
            assert GO_MANAGER not in managers(plane, kind, "chat", namespace), kind
        listed = [line.split()[-1].split(",") for line in output.splitlines()[1:] if line.strip()]
        assert listed, output
        assert all(GO_MANAGER not in names for names in listed), output

        # 6. The Go operator removed; its CRD, now ours, and every runtime stay.
        code, output = run_step(plane, steps["remove-kustomize"])
        assert code == 0, output
        for kind, name in (
            ("deployment", "controller-manager"),
            ("service", "controller-manager-metrics-service"),
            ("serviceaccount", "controller-manager"),
            ("role", "leader-election-role"),
            ("rolebinding", "leader-election-rolebinding"),
            ("lease", ""),
        ):
            full = GO_LEASE if kind == "lease" else f"{PREFIX}{name}"
            assert get(plane, kind, full, GO_NAMESPACE) is None, f"{kind} {full} left"
        for kind, name in (
            ("clusterrole", "manager-role"),
            ("clusterrolebinding", "manager-rolebinding"),
        ):
            assert plane.kubectl("get", kind, f"{PREFIX}{name}", check=False).returncode != 0
        assert get(plane, "truntime", "chat", namespace) is not None
        assert get(plane, "truntime", "legacy", namespace) is not None
        assert plane.kubectl("get", "crd", CRD_NAME, check=False).returncode == 0
        plane.kubectl(
            "patch", "truntime", "chat", "-n", namespace, "--type=json",
            "-p", '[{"op":"remove","path":"/spec/provider/baseURL"}]',
        )  # fmt: skip
        wait_for(
            lambda: (
                "TRUSSIUM_PROVIDER__BASE_URL"
                not in must_get(plane, "configmap", "chat", namespace)["data"]
            ),
            "a removed field pruned after the switch",
        )
