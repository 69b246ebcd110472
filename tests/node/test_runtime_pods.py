"""TrussiumRuntimes whose pods really run: the stand-in runtime image in
containerd, the real controller on the host, kubelet's probes over the pod
network. Each test runs its own controller confined to its namespace."""

import json
import time
from pathlib import Path

import pytest
import yaml

from devcluster import ControlPlane
from devcluster.controller_harness import (
    Obj,
    apply,
    get,
    must_get,
    wait_condition,
    wait_for,
)
from devcluster.flags import MUTATING_ADMISSION_POLICY_GROUP, mutating_admission_policy_version
from tests.node.pods import (
    ROLLOUT_SECONDS,
    container_process,
    image,
    pods,
    ready_pods,
    standin_runtime,
    wait_ready,
    wait_single_pod,
)
from tests.node.runtime_image import (
    MISSING_TAG,
    STANDIN_REPOSITORY,
    STANDIN_TAG,
    UPGRADE_TAG,
    pin_by_digest,
)
from tests.node.services import get_from_node, wait_routed

pytestmark = [pytest.mark.node, pytest.mark.usefixtures("standin")]
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "valid"
CHECKSUM = "runtime.trussium.io/config-checksum"
# A short Deployment progress deadline, so a stuck rollout fails within the test.
SHORT_DEADLINE_SECONDS = 20


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
    assert config["provider"] == "ollama"
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
    endpoints = wait_routed(plane, service, replicas=2)
    assert sorted(f"{p['status']['podIP']}:9000" for p in running) == endpoints
    port = service["spec"]["ports"][0]
    cluster_ip = f"http://{service['spec']['clusterIP']}:{port['port']}/health/ready"
    node_port = f"http://{plane.node.addresses.node_ip}:{port['nodePort']}/health/ready"
    assert get_from_node(plane, cluster_ip) == (200, ""), cluster_ip
    assert get_from_node(plane, node_port) == (200, ""), node_port


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
    api_version = (
        f"{MUTATING_ADMISSION_POLICY_GROUP}/{mutating_admission_policy_version(plane.minor)}"
    )
    policy = {
        "apiVersion": api_version,
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
        "apiVersion": api_version,
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
