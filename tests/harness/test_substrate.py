"""The local control plane is a real Kubernetes: rollouts, garbage collection,
quotas, RBAC and the pinned versions all behave as in a cluster."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.components import REPO_ROOT, pinned_versions
from devcluster.process import group_alive
from tests.conftest import Kubectl

WAIT = "--timeout=120s"


def _deployment(name: str, replicas: int) -> str:
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
                },
            },
        }
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.cluster
@pytest.mark.own_plane("its kwok nodes")
def test_deployment_becomes_available_with_ready_pods_on_kwok_nodes(
    kubectl: Kubectl, namespace: str
) -> None:
    kubectl("apply", "-n", namespace, "-f", "-", input=_deployment("web", 2))
    kubectl("wait", "-n", namespace, "deployment/web", "--for=condition=Available", WAIT)
    kubectl(
        "wait", "-n", namespace, "deployment/web", "--for=jsonpath={.status.readyReplicas}=2", WAIT
    )

    nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
    kwok_nodes = {
        n["metadata"]["name"]
        for n in nodes
        if n["metadata"].get("annotations", {}).get("kwok.x-k8s.io/node") == "fake"
    }
    pods = json.loads(kubectl("get", "pods", "-n", namespace, "-l", "app=web", "-o", "json").stdout)
    assert len(pods["items"]) == 2
    for pod in pods["items"]:
        conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert pod["status"]["phase"] == "Running"
        assert conditions["Ready"] == "True"
        assert pod["spec"]["nodeName"] in kwok_nodes


@pytest.mark.cluster
def test_deleting_an_owner_garbage_collects_its_dependents(
    kubectl: Kubectl, namespace: str
) -> None:
    kubectl("create", "configmap", "owner", "-n", namespace)
    uid = kubectl("get", "configmap", "owner", "-n", namespace, "-o", "jsonpath={.metadata.uid}")
    dependent = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "dependent",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid.stdout}
            ],
        },
    }
    kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(dependent))

    kubectl("delete", "configmap", "owner", "-n", namespace, "--cascade=background")
    kubectl("wait", "-n", namespace, "configmap/dependent", "--for=delete", WAIT)


@pytest.mark.cluster
def test_resource_quota_makes_a_deployment_report_replica_failure(
    kubectl: Kubectl, namespace: str
) -> None:
    kubectl("create", "quota", "no-pods", "--hard=pods=0", "-n", namespace)
    kubectl("apply", "-n", namespace, "-f", "-", input=_deployment("blocked", 1))
    kubectl("wait", "-n", namespace, "deployment/blocked", "--for=condition=ReplicaFailure", WAIT)
    message = kubectl(
        "get",
        "deployment/blocked",
        "-n",
        namespace,
        "-o",
        'jsonpath={.status.conditions[?(@.type=="ReplicaFailure")].message}',
    ).stdout
    assert "forbidden" in message


@pytest.mark.api
def test_service_account_token_is_held_to_rbac(plane: ControlPlane, namespace: str) -> None:
    plane.kubectl("create", "serviceaccount", "reader", "-n", namespace)
    token = plane.kubectl("create", "token", "reader", "-n", namespace).stdout.strip()
    as_reader = plane.token_kubeconfig(token, f"{namespace}-reader")
    user = f"system:serviceaccount:{namespace}:reader"

    def can_list_configmaps() -> subprocess.CompletedProcess[str]:
        return plane.kubectl(
            "get", "configmaps", "-n", namespace, kubeconfig=as_reader, check=False
        )

    denied = can_list_configmaps()
    assert denied.returncode != 0
    assert "Forbidden" in denied.stderr
    assert user in denied.stderr  # authenticated as the ServiceAccount, then denied

    plane.kubectl(
        "create", "role", "reader", "--verb=list", "--resource=configmaps", "-n", namespace
    )
    binding = f"--serviceaccount={namespace}:reader"
    plane.kubectl("create", "rolebinding", "reader", "--role=reader", binding, "-n", namespace)
    deadline = time.monotonic() + 30
    while (allowed := can_list_configmaps()).returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.2)  # the RBAC authorizer sees the binding through its informer
    assert allowed.returncode == 0, allowed.stderr

    still_denied = plane.kubectl(
        "get", "secrets", "-n", namespace, kubeconfig=as_reader, check=False
    )
    assert "Forbidden" in still_denied.stderr


@pytest.mark.api
def test_kubectl_and_helm_report_the_pinned_versions(plane: ControlPlane, tmp_path: Path) -> None:
    pins = pinned_versions()
    versions = json.loads(plane.kubectl("version", "-o", "json").stdout)
    assert versions["clientVersion"]["gitVersion"] == pins["KUBERNETES_VERSION"]
    assert versions["serverVersion"]["gitVersion"] == pins["KUBERNETES_VERSION"]
    assert plane.helm("version", "--template", "{{.Version}}").stdout == pins["HELM_VERSION"]

    # Offline rendering (helm template, helm lint) sees the pinned minor too.
    chart = tmp_path / "probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: probe\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: probe}\n"
        "data: {minor: '{{ .Capabilities.KubeVersion.Minor }}'}\n"
    )
    rendered = plane.helm("template", "probe", str(chart)).stdout
    minor = pins["KUBERNETES_VERSION"].split(".")[1]
    assert f"minor: '{minor}'" in rendered


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_text():
                found.append(int(entry.name))
        except OSError:
            continue  # exited while we looked
    return found


@pytest.mark.api
def test_devcluster_up_runs_until_ctrl_c_then_leaves_nothing_behind() -> None:
    up = subprocess.Popen(
        [sys.executable, "-m", "devcluster", "up", "--profile", "api"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert up.stdout is not None
    lines = []
    for line in up.stdout:  # ends at "Press Ctrl-C", or at EOF if startup failed
        lines.append(line)
        if line.startswith("Press Ctrl-C"):
            break
    exports = [line for line in lines if line.startswith("export KUBECONFIG=")]
    assert exports, "".join(lines)
    kubeconfig = Path(exports[0].split()[1].removeprefix("KUBECONFIG="))
    pid_line = next(line for line in lines if line.strip().startswith("pids:"))
    pids = dict(item.split("=") for item in pid_line.split()[1:])
    assert set(pids) == {"etcd", "kube-apiserver"}
    assert all(_pid_alive(int(pid)) for pid in pids.values())
    plane_dir = str(kubeconfig.parent)
    assert kubeconfig.is_file()

    up.send_signal(signal.SIGINT)
    assert up.wait(timeout=60) == 0
    up.stdout.close()
    assert not any(_pid_alive(int(pid)) or group_alive(int(pid)) for pid in pids.values())
    assert not _processes_mentioning(plane_dir)
    assert not Path(plane_dir).exists()
