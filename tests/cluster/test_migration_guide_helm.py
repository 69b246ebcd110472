"""docs/migration-from-go-operator.md's Helm path and its rollback, run on the local
control plane.

The cluster starts as a Helm install of the Go operator leaves it: a release of
a chart shaped like its chart (tests/fixtures/go-operator-chart: the Go CRD in
`crds/`, a Deployment, ServiceAccount, RBAC and metrics Service named as that
chart names them), its leader Lease, and runtimes stored under its CRD with
their objects written by `manager`. The guide's blocks run verbatim with the
placeholders filled in. This operator is a Helm release of our chart whose
webhook URL points at the two programs running as host processes
(devcluster.hostoperator), so that `helm uninstall` removes what a real
uninstall removes.
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import get, must_get, runtime_manifest, wait_for
from devcluster.hostoperator import CHART, CRD_NAME, HostOperator, install_crds
from tests.support.doc_steps import run_step
from tests.support.go_operator import (
    GO_LEASE,
    accepts_base_url,
    go_create,
    hold_lease,
    rendered,
)
from tests.support.migration_guide import guide_steps

OWN_PLANE = pytest.mark.own_plane(
    "the operator as host processes that the API server calls on 127.0.0.1"
)
pytestmark = [pytest.mark.cluster, OWN_PLANE]
GO_CHART = Path(__file__).resolve().parents[1] / "fixtures" / "go-operator-chart"
GO_NAMESPACE = "trussium-go"
GO_RELEASE = "trussium"
GO_NAME = f"{GO_RELEASE}-trussium-operator"
OUR_NAMESPACE = "trussium-system"
OUR_RELEASE = "trussium-operator"
# What `helm uninstall` of the Go release must remove: (kind, name, namespaced).
GO_OBJECTS = (
    ("deployment", GO_NAME, True),
    ("serviceaccount", GO_NAME, True),
    ("service", f"{GO_NAME}-metrics", True),
    ("role", f"{GO_NAME}-leader-election", True),
    ("rolebinding", f"{GO_NAME}-leader-election", True),
    ("lease", GO_LEASE, True),
    ("clusterrole", f"{GO_NAME}-manager", False),
    ("clusterrolebinding", f"{GO_NAME}-manager", False),
    ("clusterrole", f"{GO_NAME}-metrics-auth", False),
    ("clusterrolebinding", f"{GO_NAME}-metrics-auth", False),
    ("clusterrole", f"{GO_NAME}-metrics-reader", False),
)


def exists(plane: ControlPlane, kind: str, name: str, namespace: str = "") -> bool:
    where = ("-n", namespace) if namespace else ()
    answer = plane.kubectl("get", kind, name, *where, "--ignore-not-found", "-o", "name")
    return bool(answer.stdout.strip())


def uid(plane: ControlPlane, kind: str, name: str, namespace: str = "") -> str:
    where = ("-n", namespace) if namespace else ()
    answer = plane.kubectl("get", kind, name, *where, "-o", "jsonpath={.metadata.uid}")
    return answer.stdout


def kept(plane: ControlPlane, namespace: str) -> dict[str, str]:
    """The uids of the CRD, the runtime and its workload."""
    return {
        "crd": uid(plane, "crd", CRD_NAME),
        "runtime": uid(plane, "truntime", "chat", namespace),
        "deployment": uid(plane, "deployment", "chat", namespace),
    }


def replica_sets(plane: ControlPlane, namespace: str) -> set[str]:
    sets = plane.kubectl(
        "get", "rs", "-n", namespace, "-l", "app.kubernetes.io/instance=chat", "-o", "name"
    )
    return set(sets.stdout.split())


def ours_served(plane: ControlPlane) -> bool:
    """Our CRD's schema: `autoscaling` present, the Go `format: uri` check gone."""
    crd = json.loads(plane.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return {"autoscaling", "networkPolicy"} <= set(spec["properties"]) and not accepts_base_url(
        plane, "localhost:11434"
    )


def go_ready(plane: ControlPlane) -> bool:
    status = must_get(plane, "deployment", GO_NAME, GO_NAMESPACE).get("status") or {}
    return bool(status.get("readyReplicas") == 1)


def released(plane: ControlPlane, release: str, namespace: str) -> bool:
    return plane.helm("status", release, "-n", namespace, check=False).returncode == 0


@pytest.fixture
def go_helm_install(plane: ControlPlane, namespace: str) -> Iterator[dict[str, str]]:
    """The Go operator's Helm release, its Lease, and a running runtime it wrote.

    Yields the guide's steps with the placeholders filled in."""
    wait_for(
        lambda: not any(exists(plane, "namespace", n) for n in (GO_NAMESPACE, OUR_NAMESPACE)),
        "the namespaces an earlier test deleted gone",
    )
    plane.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found", "--wait=true", timeout=300)
    plane.create_namespace(GO_NAMESPACE)
    plane.helm("install", GO_RELEASE, str(GO_CHART), "-n", GO_NAMESPACE)
    wait_for(lambda: accepts_base_url(plane, "localhost:11434"), "the Go CRD served")
    wait_for(lambda: go_ready(plane), "the Go controller running")
    hold_lease(plane, GO_NAMESPACE, f"{GO_NAME}-7d9_1f2e", duration=5)
    provider = {"type": "ollama", "model": "m", "baseURL": "http://ollama:11434/v1"}
    runtime = runtime_manifest("chat", namespace, provider=provider)
    plane.kubectl("create", "-f", "-", input=json.dumps(runtime))
    for obj in rendered(plane, "chat", namespace):
        go_create(plane, obj)
    wait_for(
        lambda: (
            (must_get(plane, "deployment", "chat", namespace).get("status") or {}).get(
                "readyReplicas"
            )
            == 1
        ),
        "the Go-era runtime running",
    )
    yield guide_steps(go_namespace=GO_NAMESPACE, go_release=GO_RELEASE)
    for release, where in ((GO_RELEASE, GO_NAMESPACE), (OUR_RELEASE, OUR_NAMESPACE)):
        plane.helm("uninstall", release, "-n", where, "--ignore-not-found")
    install_crds(plane)
    plane.delete_namespace(GO_NAMESPACE)
    plane.delete_namespace(OUR_NAMESPACE)


@contextmanager
def our_release(plane: ControlPlane) -> Iterator[HostOperator]:
    """Step 4: our chart installed as the guide says, its webhooks calling the programs
    on this host (the chart's own pods are kwok's and do nothing). With the chart's
    defaults and RBAC, the controller finds the Go operator's Lease in its release
    namespace and waits for it to expire before it is ready."""
    operator = HostOperator(plane, namespace=OUR_NAMESPACE, release=OUR_RELEASE)
    plane.helm(
        "install", OUR_RELEASE, str(CHART), "-n", OUR_NAMESPACE, "--create-namespace",
        "--set", "crds.enabled=false",
        "--set", f"webhook.urlOverride={operator.webhook_url}",
    )  # fmt: skip
    with operator:
        yield operator


def stop_go_and_switch(plane: ControlPlane, steps: dict[str, str]) -> None:
    """Steps 2 and 3 of the Helm path."""
    code, output = run_step(plane, steps["stop-helm"])
    assert code == 0, output
    assert must_get(plane, "deployment", GO_NAME, GO_NAMESPACE)["spec"]["replicas"] == 0
    code, output = run_step(plane, steps["crd"])
    assert code == 0, output
    wait_for(lambda: ours_served(plane), "our CRD served")


def test_the_helm_path_removes_the_go_release_and_keeps_every_runtime(
    plane: ControlPlane, namespace: str, go_helm_install: dict[str, str]
) -> None:
    steps = go_helm_install
    before, sets = kept(plane, namespace), replica_sets(plane, namespace)
    code, output = run_step(plane, steps["find-go-lease"])
    assert code == 0, output
    found = [line.split()[:2] for line in output.splitlines()[1:]]
    assert [GO_NAMESPACE, f"{GO_NAME}-7d9_1f2e"] in found, output
    stop_go_and_switch(plane, steps)
    with our_release(plane):
        code, output = run_step(plane, steps["verify"])
        assert code == 0, output
        new_sets = replica_sets(plane, namespace)
        assert sets < new_sets
        assert len(new_sets - sets) == 1, "one rollout, for the scratch space"
        code, output = run_step(plane, steps["remove-helm"])
        assert code == 0, output

        assert not released(plane, GO_RELEASE, GO_NAMESPACE)
        for kind, name, namespaced in GO_OBJECTS:
            assert not exists(plane, kind, name, GO_NAMESPACE if namespaced else ""), name
        assert kept(plane, namespace) == before
        assert ours_served(plane)
        assert get(plane, "configmap", "chat", namespace) is not None


def test_the_rollback_hands_the_runtimes_back_to_the_go_operator(
    plane: ControlPlane, namespace: str, go_helm_install: dict[str, str]
) -> None:
    steps = go_helm_install
    before = kept(plane, namespace)
    stop_go_and_switch(plane, steps)
    # The Go operator changing a runtime's Deployment, as after a spec edit.
    go_write = (
        "patch", "deployment", "chat", "-n", namespace, "--field-manager=manager",
        "--type=merge", "-p", json.dumps({"spec": {"revisionHistoryLimit": 7}}),
    )  # fmt: skip
    with our_release(plane):
        refused = plane.kubectl(*go_write, check=False)
        assert refused.returncode != 0
        assert "denied the request" in refused.stderr, refused.stderr
        code, output = run_step(plane, steps["rollback-helm"])
        assert code == 0, output
    # (Leaving the block stops the host programs, as the uninstall stops our pods.)

    assert not released(plane, OUR_RELEASE, OUR_NAMESPACE)
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        assert not exists(plane, kind, OUR_RELEASE), kind
    assert not exists(plane, "deployment", f"{OUR_RELEASE}-controller", OUR_NAMESPACE)
    assert kept(plane, namespace) == before
    assert ours_served(plane)
    assert go_ready(plane)
    plane.kubectl(*go_write)
    assert must_get(plane, "deployment", "chat", namespace)["spec"]["revisionHistoryLimit"] == 7
