"""The Helm chart installed for real: the operator image (built here, imported
into the node's containerd) runs as the chart's pods, the API server reaches
the webhook pods through their Service, and the controller pod manages
runtimes whose pods run too. One release for the module, in selfManaged mode,
the chart's default: the controller pod writes the webhook's certificate Secret,
which the kubelet mounts into the webhook pods."""

import base64
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from devcluster import ControlPlane
from devcluster.controller_harness import (
    Obj,
    apply,
    condition,
    get,
    runtime_manifest,
    wait_condition,
    wait_for,
)
from devcluster.node import build_image
from tests.node.runtime_image import STANDIN_REPOSITORY, STANDIN_TAG, import_standin

pytestmark = pytest.mark.node
REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "trussium-operator"
EXAMPLES = REPO / "examples"
RELEASE = "trussium"  # object names derive from it; the tests read them from the cluster
NAMESPACE = "trussium-system"
INSTALL_TIMEOUT = "300s"
ROLLOUT_SECONDS = 240.0


@pytest.fixture(scope="module")
def release(node_plane: ControlPlane) -> Iterator[str]:
    """The chart installed (and waited for) with the operator image on the node."""
    node_plane.node.import_image(build_image("operator"))
    import_standin(node_plane)
    node_plane.helm(
        "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace",
        "--wait", f"--timeout={INSTALL_TIMEOUT}",
        timeout=float(INSTALL_TIMEOUT.removesuffix("s")) + 60,
    )  # fmt: skip
    yield RELEASE
    node_plane.helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", check=False)


def deployments(plane: ControlPlane) -> list[Obj]:
    answer = plane.kubectl(
        "get", "deployments", "-n", NAMESPACE, "-l", f"app.kubernetes.io/instance={RELEASE}",
        "-o", "json",
    )  # fmt: skip
    items: list[Obj] = json.loads(answer.stdout)["items"]
    return items


def component(plane: ControlPlane, name: str) -> Obj:
    matches = [
        d
        for d in deployments(plane)
        if d["metadata"]["labels"].get("app.kubernetes.io/component") == name
    ]
    assert len(matches) == 1, f"expected one {name} Deployment, found {len(matches)}"
    return matches[0]


def webhook_configurations(plane: ControlPlane) -> list[Obj]:
    answer = plane.kubectl(
        "get", "validatingwebhookconfigurations,mutatingwebhookconfigurations",
        "-l", f"app.kubernetes.io/instance={RELEASE}", "-o", "json",
    )  # fmt: skip
    items: list[Obj] = json.loads(answer.stdout)["items"]
    return items


def leader_election_id(plane: ControlPlane) -> str:
    """The controller's Lease name, from its command line (it follows the chart's fullname)."""
    args = component(plane, "controller")["spec"]["template"]["spec"]["containers"][0]["args"]
    return next(str(a).split("=", 1)[1] for a in args if a.startswith("--leader-election-id="))


def dry_run(plane: ControlPlane, manifest: Path, namespace: str) -> tuple[int, str]:
    answer = plane.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", str(manifest), check=False
    )
    return answer.returncode, answer.stdout + answer.stderr


def test_the_chart_runs_its_pods_on_the_node_with_the_built_image(
    plane: ControlPlane, release: str
) -> None:
    for deployment in deployments(plane):
        status = deployment["status"]
        assert status.get("readyReplicas") == deployment["spec"]["replicas"]
    webhook = component(plane, "webhook")
    assert webhook["spec"]["replicas"] == 2
    pdbs = json.loads(plane.kubectl("get", "pdb", "-n", NAMESPACE, "-o", "json").stdout)["items"]
    assert any(p["spec"].get("minAvailable") or p["spec"].get("maxUnavailable") for p in pdbs)


def test_admission_goes_through_the_webhook_service_to_its_pods(
    plane: ControlPlane, release: str, namespace: str
) -> None:
    code, output = dry_run(plane, EXAMPLES / "runtime.yaml", namespace)
    assert code == 0, output
    code, output = dry_run(plane, EXAMPLES / "invalid-runtime.yaml", namespace)
    assert code != 0
    assert 'The TrussiumRuntime "broken" is invalid' in output
    for field in ("spec.provider.baseURL", "spec.autoscaling", "spec.scheduling.tolerations[0]"):
        assert field in output
    assert "password" not in output  # the credentials in the URL are never echoed
    # The API server found the webhook through its Service, not through a URL.
    configs = webhook_configurations(plane)
    assert len(configs) == 2
    for config in configs:
        for hook in config["webhooks"]:
            assert hook["clientConfig"]["service"]["namespace"] == NAMESPACE
            assert "url" not in hook["clientConfig"]


def test_the_webhook_pods_serve_the_certificate_the_controller_keeps(
    plane: ControlPlane, release: str
) -> None:
    """ADR 0029: the controller wrote both Secrets and the caBundles; the webhook pods,
    which started once the kubelet could mount their Secret, hold a token only for the
    metrics' access reviews (ADR 0026), none with metrics.secure=false."""
    answer = plane.kubectl(
        "get", "secrets", "-n", NAMESPACE,
        "-l", "app.kubernetes.io/component=webhook-certificates", "-o", "json",
    )  # fmt: skip
    data = {s["metadata"]["name"]: s["data"] for s in json.loads(answer.stdout)["items"]}
    (ca,) = [d for name, d in data.items() if name.endswith("-webhook-ca")]
    (serving,) = [d for name, d in data.items() if name.endswith("-webhook-tls")]
    assert "ca.key" not in serving
    assert ca["tls.key"] not in serving.values()
    for config in webhook_configurations(plane):
        assert {hook["clientConfig"]["caBundle"] for hook in config["webhooks"]} == {ca["ca.crt"]}
    pods = json.loads(
        plane.kubectl(
            "get", "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=webhook",
            "-o", "json",
        ).stdout
    )["items"]  # fmt: skip
    assert pods
    for pod in pods:
        assert pod["spec"]["automountServiceAccountToken"] is True  # secure metrics' reviews
        mounts = pod["spec"]["containers"][0]["volumeMounts"]
        assert [m["mountPath"] for m in mounts if m["name"] == "certs"] == ["/run/trussium/certs"]


def test_the_controller_serves_the_webhooks_certificate_on_metrics(
    plane: ControlPlane, release: str
) -> None:
    """ADR 0039: the controller pod starts before the Secret it writes exists; the
    kubelet fills its optional volume later, and from then on /metrics presents the
    webhook's serving certificate (which the ServiceMonitor verifies against the CA),
    not the self-signed stand-in it served meanwhile."""
    answer = plane.kubectl(
        "get", "secrets", "-n", NAMESPACE,
        "-l", "app.kubernetes.io/component=webhook-certificates", "-o", "json",
    )  # fmt: skip
    (serving,) = [
        s["data"]
        for s in json.loads(answer.stdout)["items"]
        if s["metadata"]["name"].endswith("-webhook-tls")
    ]
    certificate = x509.load_pem_x509_certificate(base64.b64decode(serving["tls.crt"]))
    loaded = f"serving certificate loaded: serial {certificate.serial_number:x}"

    def controller_logs() -> str:
        return plane.kubectl(
            "logs", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=controller",
            "--tail=-1",
        ).stdout  # fmt: skip

    wait_for(
        lambda: loaded in controller_logs(), "the controller serving the webhook's certificate", 180
    )


def test_the_controller_pod_leads_and_runs_a_runtime_on_the_node(
    plane: ControlPlane, release: str, namespace: str
) -> None:
    lease_name = leader_election_id(plane)
    lease = wait_for(
        lambda: (
            (get(plane, "lease", lease_name, NAMESPACE) or {}).get("spec", {}).get("holderIdentity")
        ),
        "the controller's leader Lease",
    )
    controller_pods = json.loads(
        plane.kubectl(
            "get", "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=controller",
            "-o", "json",
        ).stdout
    )["items"]  # fmt: skip
    assert lease in {p["metadata"]["name"] for p in controller_pods}

    runtime = runtime_manifest(
        "charted",
        namespace,
        image={"repository": STANDIN_REPOSITORY, "tag": STANDIN_TAG},
        runtime={"shutdownDrainTimeoutSeconds": 1},
    )
    apply(plane, runtime)
    ready = wait_condition(
        plane, "charted", namespace, "Ready", "True", "RuntimeReady", ROLLOUT_SECONDS
    )
    assert ready["status"]["currentImage"] == f"{STANDIN_REPOSITORY}:{STANDIN_TAG}"
    assert condition(ready, "ConfigurationValid")[0] == "True"


def test_helm_test_admits_through_the_webhook_with_the_ca_the_api_server_holds(
    plane: ControlPlane, release: str
) -> None:
    """The chart's `helm test` hook (ADR 0042): its Pod, of the operator's image,
    succeeds only if a valid runtime is admitted and an invalid one refused by the
    webhook (dry runs, in `default`); it is deleted because it passed."""
    answer = plane.helm(
        "test", release, "--namespace", NAMESPACE, f"--timeout={INSTALL_TIMEOUT}",
        timeout=float(INSTALL_TIMEOUT.removesuffix("s")) + 30,
    )  # fmt: skip
    assert f"TEST SUITE:     {release}-trussium-operator-test" in answer.stdout, answer.stdout
    assert "Phase:          Succeeded" in answer.stdout, answer.stdout
    left = plane.kubectl(
        "get", "pods,serviceaccounts", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=test",
        "-o", "name",
    ).stdout  # fmt: skip
    assert left == ""
    assert get(plane, "trussiumruntime", "helm-test", "default") is None, "a dry run only"


def test_a_webhook_rollout_restart_fails_no_admission(
    plane: ControlPlane, release: str, namespace: str
) -> None:
    results: list[tuple[int, str]] = []
    stop = threading.Event()

    def stream() -> None:
        while not stop.is_set():
            results.append(dry_run(plane, EXAMPLES / "runtime.yaml", namespace))

    worker = threading.Thread(target=stream, daemon=True)
    worker.start()
    try:
        wait_for(lambda: len(results) >= 3, "admissions before the restart")
        webhook = component(plane, "webhook")["metadata"]["name"]
        before = {
            p["metadata"]["name"]
            for p in json.loads(
                plane.kubectl(
                    "get", "pods", "-n", NAMESPACE,
                    "-l", "app.kubernetes.io/component=webhook", "-o", "json",
                ).stdout
            )["items"]
        }  # fmt: skip
        plane.kubectl("rollout", "restart", f"deployment/{webhook}", "-n", NAMESPACE)
        plane.kubectl(
            "rollout", "status", f"deployment/{webhook}", "-n", NAMESPACE,
            f"--timeout={ROLLOUT_SECONDS:.0f}s", timeout=ROLLOUT_SECONDS + 30,
        )  # fmt: skip
        # Keep the stream going while the old pods finish terminating.
        settled = time.monotonic() + 10
        wait_for(lambda: time.monotonic() > settled, "the old pods to finish terminating")
    finally:
        stop.set()
        worker.join(timeout=60)
    after = {
        p["metadata"]["name"]
        for p in json.loads(
            plane.kubectl(
                "get", "pods", "-n", NAMESPACE,
                "-l", "app.kubernetes.io/component=webhook", "-o", "json",
            ).stdout
        )["items"]
    }  # fmt: skip
    assert not before & after, "every webhook pod was replaced"
    failures = [output for code, output in results if code != 0]
    print(f"admissions during the webhook restart: {len(results)}, failed: {len(failures)}")
    assert failures == []
    assert len(results) >= 10


def test_helm_upgrade_then_uninstall(plane: ControlPlane, release: str, namespace: str) -> None:
    plane.helm(
        "upgrade", release, str(CHART), "--namespace", NAMESPACE, "--reset-then-reuse-values",
        "--set", "logLevel=debug", "--wait", f"--timeout={INSTALL_TIMEOUT}",
        timeout=float(INSTALL_TIMEOUT.removesuffix("s")) + 60,
    )  # fmt: skip
    history = json.loads(plane.helm("history", release, "-n", NAMESPACE, "-o", "json").stdout)
    assert history[-1]["status"] == "deployed"
    assert history[-1]["revision"] == 2
    code, output = dry_run(plane, EXAMPLES / "runtime.yaml", namespace)
    assert code == 0, output

    plane.helm("uninstall", release, "--namespace", NAMESPACE, "--wait")
    assert deployments(plane) == []
    assert webhook_configurations(plane) == []
    # The CRD stays (crds.keep), and with no webhook left, so do admissions.
    plane.kubectl("get", "crd", "trussiumruntimes.runtime.trussium.io")
