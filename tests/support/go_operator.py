"""Playing the Go operator on the local control plane: its CRD, its writes, its Lease.

Its managed objects are rendered with our core without the two differences
between the two operators' objects: the scratch space in the pod template
and the PodDisruptionBudget's `unhealthyPodEvictionPolicy` (docs/contract.md
sections 4.5 and 4.6); and written as it writes them: plain Update calls under the
field manager `manager`. Its CRD is the fixture restating its Helm chart's
schema.
"""

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devcluster import ControlPlane
from devcluster.controller_harness import must_get, wait_for
from devcluster.hostoperator import install_crds
from trussium_operator.common import constants as c
from trussium_operator.common.parsing import parse_runtime
from trussium_operator.controller.runtime.kinds import render_managed_objects

GO_CRD = Path(__file__).resolve().parents[1] / "fixtures" / "go-operator-crd.yaml"
GO_MANAGER = "manager"
GO_LEASE = "d4fd4c09.trussium.io"
OWNED_KINDS = (
    "configmap",
    "serviceaccount",
    "service",
    "deployment",
    "poddisruptionbudget",
    "networkpolicy",
    "horizontalpodautoscaler",
)
Obj = dict[str, Any]


def accepts_base_url(plane: ControlPlane, base_url: str) -> bool:
    """Whether the CRD being served admits `base_url` (a server-side dry run)."""
    probe = {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "metadata": {"name": "schema-probe", "namespace": "default"},
        "spec": {
            "image": {"repository": "r", "tag": "1"},
            "provider": {"type": "ollama", "model": "m", "baseURL": base_url},
        },
    }
    answer = plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False
    )
    return answer.returncode == 0


def install_go_crd(plane: ControlPlane) -> None:
    """Replace the served CRD by the Go operator's (same field manager as
    install_crds, so fields only ours has are pruned), and wait until it is served."""
    plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(GO_CRD))
    wait_for(lambda: accepts_base_url(plane, "localhost:11434"), "the Go CRD served")


def install_our_crd(plane: ControlPlane) -> None:
    install_crds(plane)
    wait_for(lambda: not accepts_base_url(plane, "localhost:11434"), "our CRD served")


def without_scratch(template: Obj) -> Obj:
    """A pod template (ours, rendered or live) without the scratch space: its
    volume, the container's mount of it and TMPDIR. Nothing else differs from the
    Go operator's template."""
    pod = dict(template["spec"])
    pod.pop("volumes")
    containers = []
    for container in pod["containers"]:
        container = {k: v for k, v in container.items() if k != "volumeMounts"}
        env = [e for e in container.pop("env") if e["name"] != c.SCRATCH_ENV]
        containers.append(container | ({"env": env} if env else {}))
    return {**template, "spec": {**pod, "containers": containers}}


def render(runtime: Obj) -> list[Obj]:
    """The objects the Go operator renders for `runtime` (as stored, with its uid), also
    for a spec that breaks rules a stored runtime may break (`common.ratcheting`): ours
    without the scratch space and the eviction policy for unhealthy pods."""
    model = parse_runtime(runtime, stored=True).runtime
    assert model is not None, parse_runtime(runtime, stored=True).errors
    objects = render_managed_objects(model)
    for obj in objects:
        if obj["kind"] == "Deployment":
            obj["spec"]["template"] = without_scratch(obj["spec"]["template"])
        if obj["kind"] == "PodDisruptionBudget":
            del obj["spec"]["unhealthyPodEvictionPolicy"]
    return objects


def rendered(plane: ControlPlane, name: str, namespace: str) -> list[Obj]:
    return render(must_get(plane, "trussiumruntime", name, namespace))


def go_create(plane: ControlPlane, obj: Obj) -> None:
    """Create `obj` as the Go operator does: an Update-type write by `manager`."""
    plane.kubectl("create", f"--field-manager={GO_MANAGER}", "-f", "-", input=json.dumps(obj))


def managers(plane: ControlPlane, kind: str, name: str, namespace: str) -> set[str]:
    """The field managers of an object (kubectl hides managedFields unless asked)."""
    answer = plane.kubectl(
        "get", kind, name, "-n", namespace, "-o", "json", "--show-managed-fields"
    )
    obj = json.loads(answer.stdout)
    return {str(e.get("manager")) for e in obj["metadata"].get("managedFields") or ()}


def hold_lease(plane: ControlPlane, namespace: str, holder: str, duration: int) -> None:
    """Create or renew the Go operator's leader Lease, as its leader does."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": GO_LEASE, "namespace": namespace},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": stamp,
            "renewTime": stamp,
        },
    }
    plane.kubectl(
        "apply", "--server-side", f"--field-manager={GO_MANAGER}", "-f", "-",
        input=json.dumps(lease),
    )  # fmt: skip


@dataclass(frozen=True)
class DeploymentState:
    generation: int
    replicas: int
    available: int


class DeploymentWatch:
    """Every state a Deployment's watch delivered: what a rollout went through."""

    def __init__(self, log: Path) -> None:
        self._log = log

    def states(self) -> list[DeploymentState]:
        rows = [line.split() for line in self._log.read_text().splitlines() if line.strip()]
        return [DeploymentState(*(0 if v == "<none>" else int(v) for v in row)) for row in rows]


@contextmanager
def watching(
    plane: ControlPlane, name: str, namespace: str, log: Path
) -> Iterator[DeploymentWatch]:
    """Watch the Deployment while the block runs (`kubectl get -w`, one line per event)."""
    columns = "G:.metadata.generation,R:.spec.replicas,A:.status.availableReplicas"
    argv = [
        str(plane.bin_dir / "kubectl"), f"--kubeconfig={plane.kubeconfig}",
        "get", "deployment", name, "-n", namespace, "--watch", "--no-headers",
        f"--output=custom-columns={columns}",
    ]  # fmt: skip
    watch = DeploymentWatch(log)
    with log.open("w") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: watch.states() != [], "the Deployment watched")
            yield watch
        finally:
            process.terminate()
            process.wait(timeout=30)
