"""The runtime pods of a TrussiumRuntime on the node: the stand-in's manifest, its
pods and their containers as the API server and containerd see them."""

import json
import subprocess
from typing import Any

from devcluster import ControlPlane
from devcluster.controller_harness import (
    Obj,
    apply,
    condition,
    get,
    runtime_manifest,
    wait_for,
)
from tests.node.runtime_image import STANDIN_REPOSITORY, STANDIN_TAG

SELECTOR = "app.kubernetes.io/instance"
ROLLOUT_SECONDS = 180.0
# A request in flight holds a pod's deletion up to the drain period; 1 s keeps rollouts quick.
QUICK_DRAIN = {"shutdownDrainTimeoutSeconds": 1}


def image(tag: str) -> str:
    return f"{STANDIN_REPOSITORY}:{tag}"


def standin_runtime(name: str, namespace: str, tag: str = STANDIN_TAG, **spec: Any) -> Obj:
    spec.setdefault("runtime", QUICK_DRAIN)
    return runtime_manifest(
        name, namespace, image={"repository": STANDIN_REPOSITORY, "tag": tag}, **spec
    )


def pods(plane: ControlPlane, name: str, namespace: str) -> list[Obj]:
    answer = plane.kubectl("get", "pods", "-n", namespace, "-l", f"{SELECTOR}={name}", "-o", "json")
    items: list[Obj] = json.loads(answer.stdout)["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def ready_pods(plane: ControlPlane, name: str, namespace: str) -> list[Obj]:
    def ready(pod: Obj) -> bool:
        conditions = pod.get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    return [p for p in pods(plane, name, namespace) if ready(p)]


def wait_ready(plane: ControlPlane, name: str, namespace: str, image: str) -> Obj:
    """Ready=True for the current generation with `image` rolled out."""

    def check() -> Obj | None:
        runtime = get(plane, "trussiumruntime", name, namespace) or {}
        status = runtime.get("status") or {}
        done = (
            condition(runtime, "Ready") == ("True", "RuntimeReady")
            and status.get("observedGeneration") == runtime.get("metadata", {}).get("generation")
            and status.get("currentImage") == image
        )
        return runtime if done else None

    return wait_for(check, f"{namespace}/{name} Ready with {image}", ROLLOUT_SECONDS)


def wait_single_pod(plane: ControlPlane, name: str, namespace: str, other_than: str = "") -> Obj:
    """The one live pod of the runtime, Ready, once every other pod is gone."""

    def check() -> Obj | None:
        live, ready = pods(plane, name, namespace), ready_pods(plane, name, namespace)
        only = len(live) == 1 and len(ready) == 1
        return ready[0] if only and ready[0]["metadata"]["name"] != other_than else None

    return wait_for(check, f"one Ready pod of {name} (not {other_than!r})", ROLLOUT_SECONDS)


def container_process(plane: ControlPlane, pod: Obj) -> int:
    """The host pid of the pod's runtime container (as containerd reports it)."""
    container_id = pod["status"]["containerStatuses"][0]["containerID"]
    tasks = subprocess.run(
        plane.node.ctr("tasks", "list"), capture_output=True, text=True, check=True
    ).stdout
    for line in tasks.splitlines()[1:]:
        task, pid, state = line.split()[:3]
        if f"containerd://{task}" == container_id and state == "RUNNING":
            return int(pid)
    raise AssertionError(f"{container_id} is not running in containerd:\n{tasks}")


def run_standin(plane: ControlPlane, name: str, namespace: str, **spec: Any) -> Obj:
    """Apply a stand-in runtime and return its one pod once it is Ready."""
    apply(plane, standin_runtime(name, namespace, **spec))
    wait_ready(plane, name, namespace, image(STANDIN_TAG))
    return wait_single_pod(plane, name, namespace)
