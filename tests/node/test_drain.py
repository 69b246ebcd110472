"""A runtime whose pods never become Ready cannot block a node drain (docs/contract.md
section 4.6): on a real node, the eviction API lets a Running, not-Ready pod of a
two-replica runtime go, as `kubectl drain` asks it to."""

import json
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import Obj, must_get, running_controller, scoped, wait_for
from tests.node.pods import pods, standin_runtime

pytestmark = [pytest.mark.node, pytest.mark.usefixtures("standin")]
# Readiness gated on a provider that never answers (loopback in the pod, nothing there).
NEVER_READY: dict[str, Any] = {
    "replicas": 2,
    "provider": {"type": "ollama", "model": "m", "baseURL": "http://127.0.0.1:1/v1"},
    "readiness": {"dependencyChecks": True},
}
POD_START_SECONDS = 180.0


def running_unready(plane: ControlPlane, name: str, namespace: str) -> list[Obj] | None:
    """Both pods Running, their containers started and neither Ready; else None."""

    def unready(pod: Obj) -> bool:
        status = pod.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or ()}
        started = all(s.get("started") for s in status.get("containerStatuses") or [{}])
        return status.get("phase") == "Running" and started and conditions.get("Ready") == "False"

    found = pods(plane, name, namespace)
    return found if len(found) == 2 and all(unready(p) for p in found) else None


def evict(plane: ControlPlane, pod: Obj) -> tuple[int, str]:
    """Ask the eviction API to evict `pod`, as `kubectl drain` does: 0 if it was
    accepted, else the exit code and what the API server said."""
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    answer = plane.kubectl(
        "create",
        "--raw",
        f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
        "-f",
        "-",
        input=json.dumps(body),
        check=False,
    )
    return answer.returncode, answer.stderr


def budget_exhausted(plane: ControlPlane, name: str, namespace: str) -> Obj | None:
    """The PodDisruptionBudget as the disruption controller has counted both pods."""
    budget = must_get(plane, "poddisruptionbudget", name, namespace)
    status = budget.get("status") or {}
    counted = status.get("expectedPods") == 2 and status.get("currentHealthy") == 0
    return budget if counted and status.get("disruptionsAllowed") == 0 else None


def test_a_running_pod_that_never_becomes_ready_is_evicted(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    name = "never-ready"
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
        plane.kubectl(
            "apply", "-f", "-", input=json.dumps(standin_runtime(name, namespace, **NEVER_READY))
        )
        stuck = wait_for(
            lambda: running_unready(plane, name, namespace),
            "two Running pods that are not Ready",
            POD_START_SECONDS,
        )
        budget = wait_for(lambda: budget_exhausted(plane, name, namespace), "the budget counted")
        assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
        code, said = evict(plane, stuck[0])
        assert code == 0, f"the eviction of a not-Ready pod was refused: {said}"

    # The same pods under the policy Kubernetes defaults to (the controller is stopped,
    # so nothing restores ours): a drain would wait for ever.
    plane.kubectl(
        "patch",
        "poddisruptionbudget",
        name,
        "-n",
        namespace,
        "--type=json",
        "-p",
        json.dumps([{"op": "remove", "path": "/spec/unhealthyPodEvictionPolicy"}]),
    )
    remaining = wait_for(
        lambda: running_unready(plane, name, namespace),
        "the replacement pod Running and not Ready",
        POD_START_SECONDS,
    )
    wait_for(lambda: budget_exhausted(plane, name, namespace), "the budget counted again")
    code, said = evict(plane, remaining[0])
    assert code != 0, "evicted under the default policy: the test proves nothing"
    assert "disruption budget" in said, said
