"""The node profile runs real containers: a kubelet that registers and goes
Ready, pods on a bridge network, nothing pulled from outside, and nothing
left on the host once the plane stops."""

import ipaddress
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane, Profile
from devcluster.components import pinned_versions
from devcluster.node import Node
from devcluster.nodeconfig import NODE_NAME, SANDBOX_IMAGE
from tests.conftest import Kubectl

pytestmark = pytest.mark.node
WAIT = "--timeout=120s"


def pod(name: str, image: str, pull_policy: str = "Never") -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "main", "image": image, "imagePullPolicy": pull_policy}],
            },
        }
    )


def get_json(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(kubectl("get", *args, "-o", "json").stdout)
    return answer


def node_leftovers(node: Node, root: Path) -> list[str]:
    """What a stopped node could leave on the host, described (empty when clean)."""
    left = []
    link = node.addresses.host_link
    if subprocess.run(["ip", "link", "show", link], capture_output=True).returncode == 0:
        left.append(f"link {link}")
    left += [str(p) for p in Path("/sys/fs/cgroup").glob(f"*{node.addresses.cgroup_root}")]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(root) in cmdline:
                left.append(f"process {entry.name}: {cmdline[:120]}")
    if root.exists():
        left.append(f"directory {root}")
    return left


def test_the_node_registers_ready_with_the_pinned_kubelet_and_containerd(
    plane: ControlPlane, kubectl: Kubectl
) -> None:
    node = get_json(kubectl, "node", NODE_NAME)
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == pinned_versions()["KUBERNETES_VERSION"]
    assert info["containerRuntimeVersion"].startswith("containerd://2.")
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == plane.node.addresses.node_ip
    assert SANDBOX_IMAGE in plane.node.images()


def test_a_pod_runs_in_a_real_container_with_an_address_on_the_pod_network(
    plane: ControlPlane, kubectl: Kubectl, namespace: str
) -> None:
    kubectl("apply", "-n", namespace, "-f", "-", input=pod("sleeper", SANDBOX_IMAGE))
    kubectl("wait", "-n", namespace, "pod/sleeper", "--for=condition=Ready", WAIT)

    status = get_json(kubectl, "pod", "sleeper", "-n", namespace)["status"]
    pod_network = ipaddress.ip_network(plane.node.addresses.pod_cidr)
    assert ipaddress.ip_address(status["podIP"]) in pod_network
    container_id = status["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    tasks = subprocess.run(
        plane.node.ctr("tasks", "list"), capture_output=True, text=True, check=True
    ).stdout
    assert any(
        line.split()[:1] == [container_id] and "RUNNING" in line for line in tasks.splitlines()
    )


def test_an_image_missing_from_the_node_fails_to_pull_at_once_without_leaving_loopback(
    kubectl: Kubectl, namespace: str
) -> None:
    image = "ghcr.io/trussiumhq/not-imported:0.0.1"
    kubectl("apply", "-n", namespace, "-f", "-", input=pod("missing", image, "IfNotPresent"))
    query = "{.status.containerStatuses[0].state.waiting.reason}"
    kubectl(
        "wait", "-n", namespace, "pod/missing", f"--for=jsonpath={query}=ImagePullBackOff", WAIT
    )
    events = get_json(kubectl, "events", "-n", namespace, "--field-selector=reason=Failed")
    messages = " ".join(e.get("message", "") for e in events["items"])
    assert "127.0.0.1:1" in messages  # the closed loopback port every registry maps to


def test_a_stopped_node_plane_leaves_no_process_link_cgroup_or_directory_behind() -> None:
    # A second node plane next to the session's: it claims a slot of its own.
    with ControlPlane(Profile.NODE) as plane:
        plane.kubectl("apply", "-f", "-", input=pod("sleeper", SANDBOX_IMAGE))
        plane.kubectl("wait", "pod/sleeper", "--for=condition=Ready", WAIT)
        node, root = plane.node, plane.directory
        running = node_leftovers(node, root)
        # The check sees a live node: its link, cgroups, processes and directory.
        assert any(item.startswith("link") for item in running)
        assert any(item.startswith("process") for item in running)
        assert any(item.startswith("/sys/fs/cgroup") for item in running)
    assert node_leftovers(node, root) == []
