"""TrussiumRuntimes whose pods really run: the stand-in runtime image in
containerd, the real controller on the host, kubelet's probes over the pod
network. Each test runs its own controller confined to its namespace."""

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane
from devcluster.controller_harness import (
    Obj,
    apply,
    condition,
    get,
    must_get,
    running_controller,
    runtime_manifest,
    scoped,
    wait_condition,
    wait_for,
)
from devcluster.hostoperator import install_crds
from tests.node.runtime_image import (
    MISSING_TAG,
    STANDIN_REPOSITORY,
    STANDIN_TAG,
    UPGRADE_TAG,
    import_standin,
    pin_by_digest,
)

pytestmark = pytest.mark.node
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "valid"
CHECKSUM = "runtime.trussium.io/config-checksum"
SELECTOR = "app.kubernetes.io/instance"
ROLLOUT_SECONDS = 180.0
# Pod deletions wait for the runtime's drain; one second keeps rollouts quick.
QUICK_DRAIN = {"shutdownDrainTimeoutSeconds": 1}
# A short Deployment progress deadline, so a stuck rollout fails within the test.
SHORT_DEADLINE_SECONDS = 20


@pytest.fixture(scope="module", autouse=True)
def standin(node_plane: ControlPlane) -> None:
    install_crds(node_plane)
    import_standin(node_plane)


@pytest.fixture
def controller(plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[None]:
    with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
        yield


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


def proc_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def root_mount_options(pid: int) -> list[str]:
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return fields[5].split(",")
    raise AssertionError(f"no root mount in /proc/{pid}/mountinfo")


def served_config(plane: ControlPlane, pod: Obj) -> Obj:
    """What the stand-in parsed from its environment, through the API server's pod proxy."""
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    raw = plane.kubectl(
        "get", "--raw", f"/api/v1/namespaces/{namespace}/pods/{name}:9000/proxy/standin/config"
    ).stdout
    config: Obj = json.loads(raw)
    return config


def http_status_from_node(plane: ControlPlane, url: str) -> int:
    """GET `url` from inside the node's network namespace (as a host-network client)."""
    code = (
        "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).status)"
    )
    answer = subprocess.run(
        plane.node.enter(sys.executable, "-c", code, url),
        capture_output=True,
        text=True,
        timeout=30,
    )
    return int(answer.stdout.strip() or 0)


@pytest.mark.usefixtures("controller")
def test_a_minimal_runtime_runs_confined_and_becomes_ready_through_its_probes(
    plane: ControlPlane, namespace: str
) -> None:
    began = time.monotonic()
    apply(plane, standin_runtime("minimal", namespace))
    wait_ready(plane, "minimal", namespace, image(STANDIN_TAG))
    print(
        f"minimal runtime: apply to Ready with real containers in {time.monotonic() - began:.1f}s"
    )

    pod = wait_single_pod(plane, "minimal", namespace)
    state = pod["status"]["containerStatuses"][0]
    assert state["ready"]
    assert state["started"]
    assert state["restartCount"] == 0
    pid = container_process(plane, pod)
    status = proc_status(pid)
    assert status["Uid"].split()[:2] == ["10001", "10001"]  # runAsUser, real and effective
    assert status["Gid"].split()[:2] == ["10001", "10001"]
    assert status["CapEff"] == "0000000000000000"  # every capability dropped
    assert status["NoNewPrivs"] == "1"  # allowPrivilegeEscalation: false
    assert status["Seccomp"] == "2"  # RuntimeDefault: a seccomp filter
    assert "ro" in root_mount_options(pid)  # readOnlyRootFilesystem
    config = served_config(plane, pod)
    assert config["provider"] == "openai"
    assert config["port"] == 9000
    assert config["gracefulShutdownSeconds"] == 1
    # The API server reaches the kubelet (logs), as `kubectl logs` users expect.
    plane.kubectl("logs", "-n", namespace, pod["metadata"]["name"])


@pytest.mark.usefixtures("controller")
def test_the_production_example_runs_with_its_secret_service_and_two_replicas(
    plane: ControlPlane, namespace: str
) -> None:
    runtime = yaml.safe_load((SAMPLES / "production.yaml").read_text())
    runtime["metadata"]["namespace"] = namespace
    # The example pins a digest the stand-in cannot have: pin the stand-in's own.
    pinned = pin_by_digest(plane, image(STANDIN_TAG))
    runtime["spec"]["image"] = {"repository": STANDIN_REPOSITORY, "digest": pinned}
    runtime["spec"]["runtime"]["shutdownDrainTimeoutSeconds"] = 1
    secret = runtime["spec"]["provider"]["credentialsSecretRef"]
    plane.kubectl(
        "create", "secret", "generic", secret["name"], "-n", namespace,
        f"--from-literal={secret['key']}=sk-test-not-a-real-key",
    )  # fmt: skip
    # The pull secret must exist (the operator checks); nothing is pulled with it.
    plane.kubectl(
        "create", "secret", "docker-registry", "ghcr-pull", "-n", namespace,
        "--docker-server=ghcr.io", "--docker-username=unused", "--docker-password=unused",
    )  # fmt: skip
    apply(plane, runtime)
    wait_ready(plane, "production", namespace, f"{STANDIN_REPOSITORY}@{pinned}")

    running = ready_pods(plane, "production", namespace)
    assert len(running) == 2  # autoscaling.minReplicas
    for pod in running:
        config = served_config(plane, pod)
        assert config["apiKeySet"] is True
        assert config["baseURL"] == "https://api.openai.com/v1"
        assert config["providerRequestTimeoutSeconds"] == 60
    service = must_get(plane, "service", "production", namespace)
    assert service["spec"]["type"] == "NodePort"
    # kube-proxy's rules route both the ClusterIP and the NodePort to a ready pod.
    port = service["spec"]["ports"][0]
    cluster_ip = f"http://{service['spec']['clusterIP']}:{port['port']}/health/ready"
    node_port = f"http://{plane.node.addresses.node_ip}:{port['nodePort']}/health/ready"
    assert http_status_from_node(plane, cluster_ip) == 200
    assert http_status_from_node(plane, node_port) == 200
    endpoints = plane.kubectl(
        "get", "endpointslices", "-n", namespace,
        "-l", "kubernetes.io/service-name=production", "-o", "json",
    ).stdout  # fmt: skip
    ready = [
        e
        for s in json.loads(endpoints)["items"]
        for e in s.get("endpoints") or []
        if e.get("conditions", {}).get("ready")
    ]
    assert len(ready) == 2


@pytest.mark.usefixtures("controller")
def test_a_provider_change_rolls_the_pod_with_a_new_checksum(
    plane: ControlPlane, namespace: str
) -> None:
    apply(plane, standin_runtime("rolling", namespace))
    wait_ready(plane, "rolling", namespace, image(STANDIN_TAG))
    before = wait_single_pod(plane, "rolling", namespace)

    changed = {"type": "ollama", "model": "llama3", "baseURL": "http://ollama.invalid:11434"}
    apply(plane, standin_runtime("rolling", namespace, provider=changed))
    after = wait_single_pod(plane, "rolling", namespace, other_than=before["metadata"]["name"])

    assert after["metadata"]["annotations"][CHECKSUM] != before["metadata"]["annotations"][CHECKSUM]
    config = served_config(plane, after)
    assert config["provider"] == "ollama"
    assert config["baseURL"] == "http://ollama.invalid:11434"
    wait_ready(plane, "rolling", namespace, image(STANDIN_TAG))


@pytest.mark.usefixtures("controller")
def test_an_image_upgrade_completes_on_the_node(plane: ControlPlane, namespace: str) -> None:
    apply(plane, standin_runtime("upgrade", namespace))
    wait_ready(plane, "upgrade", namespace, image(STANDIN_TAG))

    apply(plane, standin_runtime("upgrade", namespace, tag=UPGRADE_TAG))
    wait_condition(plane, "upgrade", namespace, "Upgrading", "True", "UpgradeInProgress")
    runtime = wait_ready(plane, "upgrade", namespace, image(UPGRADE_TAG))
    wait_condition(plane, "upgrade", namespace, "Upgrading", "False", "UpgradeComplete")
    runtime = must_get(plane, "trussiumruntime", "upgrade", namespace)
    assert runtime["status"]["lastSuccessfulImage"] == image(UPGRADE_TAG)
    pod = wait_single_pod(plane, "upgrade", namespace)
    assert pod["spec"]["containers"][0]["image"] == image(UPGRADE_TAG)


def short_progress_deadline(plane: ControlPlane, namespace: str) -> None:
    """Every Deployment written in `namespace` gets a short progress deadline
    (a MutatingAdmissionPolicy: the operator's own 600 s would outlast the test)."""
    name = f"short-deadline-{namespace}"[:63]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceRules": [
                    {
                        "apiGroups": ["apps"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["deployments"],
                    }
                ],
            },
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "mutations": [
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {
                        "expression": "Object{spec: Object.spec{progressDeadlineSeconds: "
                        f"{SHORT_DEADLINE_SECONDS}}}}}"
                    },
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name},
    }
    plane.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps({"kind": "List", "apiVersion": "v1", "items": [policy, binding]}),
    )

    # The API server applies a new policy once its informer has it: probe until then.
    def deadline_of_a_new_deployment() -> bool:
        probe = plane.kubectl(
            "create", "deployment", "deadline-probe", "-n", namespace,
            "--image=registry.invalid/probe:1", "--dry-run=server", "-o", "json",
        ).stdout  # fmt: skip
        return bool(json.loads(probe)["spec"]["progressDeadlineSeconds"] == SHORT_DEADLINE_SECONDS)

    wait_for(deadline_of_a_new_deployment, "the short progress deadline policy to take effect")


@pytest.mark.usefixtures("controller")
def test_an_upgrade_to_a_tag_missing_from_the_node_fails_then_recovers(
    plane: ControlPlane, namespace: str
) -> None:
    short_progress_deadline(plane, namespace)
    apply(plane, standin_runtime("stuck", namespace))
    wait_ready(plane, "stuck", namespace, image(STANDIN_TAG))
    deployment = must_get(plane, "deployment", "stuck", namespace)
    assert deployment["spec"]["progressDeadlineSeconds"] == SHORT_DEADLINE_SECONDS

    apply(plane, standin_runtime("stuck", namespace, tag=MISSING_TAG))

    def pull_failure() -> str | None:
        for pod in pods(plane, "stuck", namespace):
            for state in pod.get("status", {}).get("containerStatuses") or []:
                reason = (state.get("state", {}).get("waiting") or {}).get("reason")
                if reason in ("ErrImagePull", "ImagePullBackOff"):
                    return str(reason)
        return None

    wait_for(pull_failure, "the new pod to fail pulling the missing tag", ROLLOUT_SECONDS)
    runtime = wait_condition(
        plane, "stuck", namespace, "Upgrading", "False", "UpgradeFailed", ROLLOUT_SECONDS
    )
    assert runtime["status"]["lastSuccessfulImage"] == image(STANDIN_TAG)
    assert len(ready_pods(plane, "stuck", namespace)) == 1, "the old pod keeps serving"

    apply(plane, standin_runtime("stuck", namespace, tag=UPGRADE_TAG))
    wait_ready(plane, "stuck", namespace, image(UPGRADE_TAG))
    wait_condition(plane, "stuck", namespace, "Upgrading", "False", "UpgradeComplete")
    wait_single_pod(plane, "stuck", namespace)


@pytest.mark.usefixtures("controller")
def test_a_rollout_restart_really_replaces_the_pod_and_is_kept(
    plane: ControlPlane, namespace: str
) -> None:
    apply(plane, standin_runtime("restart", namespace))
    wait_ready(plane, "restart", namespace, image(STANDIN_TAG))
    before = wait_single_pod(plane, "restart", namespace)

    plane.kubectl("rollout", "restart", "deployment/restart", "-n", namespace)
    after = wait_single_pod(plane, "restart", namespace, other_than=before["metadata"]["name"])
    assert "kubectl.kubernetes.io/restartedAt" in after["metadata"]["annotations"]
    # The operator reconciles again (a spec change) and still keeps the restart.
    apply(
        plane, standin_runtime("restart", namespace, replicas=1, podMetadata={"labels": {"a": "b"}})
    )
    final = wait_single_pod(plane, "restart", namespace, other_than=after["metadata"]["name"])
    assert "kubectl.kubernetes.io/restartedAt" in final["metadata"]["annotations"]


@pytest.mark.usefixtures("controller")
def test_scale_to_zero_stops_the_containers_and_back_starts_them(
    plane: ControlPlane, namespace: str
) -> None:
    apply(plane, standin_runtime("scaled", namespace))
    wait_ready(plane, "scaled", namespace, image(STANDIN_TAG))
    pid = container_process(plane, wait_single_pod(plane, "scaled", namespace))

    apply(plane, standin_runtime("scaled", namespace, replicas=0))
    wait_condition(plane, "scaled", namespace, "Ready", "True", "ScaledToZero", ROLLOUT_SECONDS)
    wait_for(lambda: not pods(plane, "scaled", namespace), "no pod left", ROLLOUT_SECONDS)
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), "the container process to exit")

    apply(plane, standin_runtime("scaled", namespace, replicas=1))
    wait_ready(plane, "scaled", namespace, image(STANDIN_TAG))
    wait_single_pod(plane, "scaled", namespace)


@pytest.mark.usefixtures("controller")
def test_deleting_the_runtime_garbage_collects_its_pods_and_containers(
    plane: ControlPlane, namespace: str
) -> None:
    apply(plane, standin_runtime("doomed", namespace))
    wait_ready(plane, "doomed", namespace, image(STANDIN_TAG))
    pid = container_process(plane, wait_single_pod(plane, "doomed", namespace))

    plane.kubectl("delete", "trussiumruntime", "doomed", "-n", namespace, "--wait=false")
    wait_for(
        lambda: get(plane, "deployment", "doomed", namespace) is None,
        "the Deployment to be collected",
        ROLLOUT_SECONDS,
    )
    wait_for(lambda: not pods(plane, "doomed", namespace), "its pods to go", ROLLOUT_SECONDS)
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), "the container process to exit")
