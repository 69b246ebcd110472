"""The webhook on a real API server: registration, verdicts, warnings, dry-run, guard, TLS.

`trussium-webhook serve` runs as a subprocess on 127.0.0.1 with a certificate
from `trussium-webhook certs generate`; the API server reaches it through
URL-based webhook configurations carrying the CA bundle. The configurations
only select namespaces carrying this module's label, so other tests sharing
the control plane never depend on this webhook process.
"""

import asyncio
import base64
import contextlib
import hashlib
import http.client
import json
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster import ControlPlane
from devcluster.barriers import until
from devcluster.controller_harness import running_controller, scoped
from devcluster.hostoperator import install_crds
from devcluster.layout import free_port
from devcluster.polling import wait_for
from devcluster.secretmount import SecretMount
from tests.conftest import Kubectl
from trussium_operator.common.constants import GROUP, PLURAL, VERSION
from trussium_operator.common.parsing import schema_errors
from trussium_operator.offline.checks import check_documents
from trussium_operator.offline.inputs import read_manifests
from trussium_operator.offline.manifests import parse_manifests
from trussium_operator.webhook.certs_cli import main_certs

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "tests" / "samples"
OPERATOR_ACCOUNT = "trussium-system:trussium-operator"
OPERATOR = f"system:serviceaccount:{OPERATOR_ACCOUNT}"
SELECTOR_LABEL = "trussium.test/webhook"
READY_TIMEOUT = 60.0
# Admissions that must succeed on each side of a certificate rotation.
ROTATION_ADMISSIONS = 40
# How long a configuration change may take to reach the API server's admission chain.
EVENTUALLY_SECONDS = 20.0

pytestmark = pytest.mark.api


@dataclass(frozen=True)
class RunningWebhook:
    port: int
    cert_dir: Path
    ca_dir: Path
    selector_value: str
    log: Path

    def serve_new_certificate(self) -> None:
        """Issue a new serving certificate from the same CA into the served folder."""
        assert _generate(self.cert_dir, self.ca_dir) == 0


def _generate(out: Path, ca_dir: Path) -> int:
    return main_certs(
        ["generate", "--out", str(out), "--ca-dir", str(ca_dir), "--ip-address", "127.0.0.1"]
    )


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"webhook exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"webhook not ready after {READY_TIMEOUT}s:\n{log.read_text()}")


def _configurations(name: str, port: int, ca_bundle: str, selector_value: str) -> list[Any]:
    def hook(hook_name: str, path: str, rule: dict[str, Any], policy: str) -> dict[str, Any]:
        return {
            "name": hook_name,
            "clientConfig": {"url": f"https://127.0.0.1:{port}{path}"}
            | ({"caBundle": ca_bundle} if ca_bundle else {}),
            "rules": [rule | {"scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {SELECTOR_LABEL: selector_value}},
            "failurePolicy": policy,
            "sideEffects": "None",
            "timeoutSeconds": 5,
            "admissionReviewVersions": ["v1"],
        }

    runtimes = {
        "apiGroups": [GROUP],
        "apiVersions": [VERSION],
        "resources": [PLURAL],
        "operations": ["CREATE", "UPDATE"],
    }
    deployments = {
        "apiGroups": ["apps"],
        "apiVersions": ["v1"],
        "resources": ["deployments"],
        "operations": ["UPDATE"],
    }
    guard = hook(
        "guard.deployments.runtime.trussium.io",
        "/validate-managed-deployment",
        deployments,
        "Ignore",
    )
    guard["objectSelector"] = {"matchLabels": {"app.kubernetes.io/managed-by": "trussium-operator"}}
    api_version = "admissionregistration.k8s.io/v1"
    return [
        {
            "apiVersion": api_version,
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                hook(
                    "default.trussiumruntimes.runtime.trussium.io",
                    "/mutate-trussiumruntime",
                    runtimes,
                    "Fail",
                )
            ],
        },
        {
            "apiVersion": api_version,
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                hook(
                    "validate.trussiumruntimes.runtime.trussium.io",
                    "/validate-trussiumruntime",
                    runtimes,
                    "Fail",
                ),
                guard,
            ],
        },
    ]


@contextlib.contextmanager
def _serving(plane: ControlPlane, log: Path, port: int, *flags: str) -> Iterator[None]:
    """`trussium-webhook serve` on `port` until the block ends; entered once /readyz is ok."""
    health_port = free_port()
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trussium_operator.webhook.cli",
                "serve",
                f"--bind-address=127.0.0.1:{port}",
                f"--health-bind-address=127.0.0.1:{health_port}",
                "--metrics-bind-address=0",
                f"--operator-username={OPERATOR}",
                "--shutdown-delay=0",
                f"--kubeconfig={plane.kubeconfig}",
                *flags,
            ],
            cwd=REPO,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(f"http://127.0.0.1:{health_port}/readyz", process, log)
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
    assert code == 0, f"webhook did not stop cleanly ({code}):\n{log.read_text()}"


@contextlib.contextmanager
def _registered(
    plane: ControlPlane, port: int, ca_bundle: str, selector_value: str
) -> Iterator[str]:
    """Both webhook configurations (one name) while the block runs; yields the name."""
    name = f"trussium-webhook-test-{secrets.token_hex(3)}"
    configurations = _configurations(name, port, ca_bundle, selector_value)
    items = json.dumps({"kind": "List", "apiVersion": "v1", "items": configurations})
    plane.kubectl("apply", "-f", "-", input=items)
    try:
        yield name
    finally:
        plane.kubectl(
            "delete",
            "mutatingwebhookconfiguration,validatingwebhookconfiguration",
            name,
            "--ignore-not-found",
        )


@pytest.fixture(scope="module")
def crd(api_plane: ControlPlane) -> None:
    install_crds(api_plane)


@pytest.fixture(scope="module")
def webhook(
    api_plane: ControlPlane, crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningWebhook]:
    """The webhook in files mode, registered for namespaces labelled with its selector."""
    work = tmp_path_factory.mktemp("webhook")
    cert_dir, ca_dir, log = work / "serving", work / "ca", work / "webhook.log"
    assert _generate(cert_dir, ca_dir) == 0
    ca_bundle = base64.b64encode((cert_dir / "ca.crt").read_bytes()).decode()
    port, selector_value = free_port(), secrets.token_hex(4)
    with (
        _serving(
            api_plane,
            log,
            port,
            f"--cert-dir={cert_dir}",
            "--secret-lookup",
        ),
        _registered(api_plane, port, ca_bundle, selector_value),
    ):
        yield RunningWebhook(port, cert_dir, ca_dir, selector_value, log)


def _select(kubectl: Kubectl, namespace: str, webhook: RunningWebhook) -> None:
    kubectl("label", "namespace", namespace, f"{SELECTOR_LABEL}={webhook.selector_value}")


@pytest.fixture
def reviewed_namespace(namespace: str, kubectl: Kubectl, webhook: RunningWebhook) -> str:
    """A fresh namespace whose requests go through the webhook."""
    _select(kubectl, namespace, webhook)
    # The API server sees namespace labels through an informer: wait until a
    # value only the webhook forbids is refused here.
    probe = _runtime("probe", podMetadata={"labels": {"app.kubernetes.io/name": "x"}})
    wait_for(
        lambda: (
            kubectl(
                "apply", "--dry-run=server", "-n", namespace, "-f", "-", input=probe, check=False
            ).returncode
            != 0
        ),
        "the webhook to review requests in the labelled namespace",
        EVENTUALLY_SECONDS,
    )
    return namespace


def _runtime(name: str, **spec: Any) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "TrussiumRuntime",
            "metadata": {"name": name},
            "spec": {
                "image": {"repository": "ghcr.io/trussiumhq/trussium", "tag": "1.4.2"},
                "provider": {"type": "openai", "model": "gpt-4o-mini"},
            }
            | spec,
        }
    )


def _runtime_names(path: Path) -> list[str]:
    return [
        obj["metadata"]["name"]
        for obj in parse_manifests(path.read_text(), str(path))
        if obj.get("kind") == "TrussiumRuntime"
    ]


@pytest.mark.parametrize(
    "path", sorted(SAMPLES.rglob("*.yaml")), ids=lambda p: str(p.relative_to(SAMPLES))
)
def test_cluster_and_offline_validator_agree(
    path: Path, kubectl: Kubectl, reviewed_namespace: str
) -> None:
    """Same verdict offline, with server-side dry-run and for real; defaults and errors shown."""
    namespace = reviewed_namespace
    report = check_documents(read_manifests([str(path)], sys.stdin).documents)
    offline_valid = not report.failing(strict=False)

    dry_run = kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(path), check=False)
    assert (dry_run.returncode == 0) == offline_valid, dry_run.stderr
    stored = kubectl("get", PLURAL, "-n", namespace, "-o", "name").stdout
    assert stored == "", "a server-side dry-run stored an object"

    applied = kubectl("apply", "-n", namespace, "-f", str(path), check=False)
    assert applied.returncode == dry_run.returncode, applied.stderr
    if offline_valid:
        for finding in report.findings:
            assert f"Warning: {finding.field}: {finding.message}" in applied.stderr
        for runtime in report.runtimes:
            expected = runtime.defaulted or {}
            name = expected["metadata"]["name"]
            live = json.loads(kubectl("get", PLURAL, name, "-n", namespace, "-o", "json").stdout)
            assert live["spec"] == expected["spec"], "stored defaults differ from offline ones"
    else:
        document = yaml.safe_load_all(path.read_text())
        runtime = next(d for d in document if d.get("kind") == "TrussiumRuntime")
        # A schema violation stops the API server before the validating webhook.
        schema = schema_errors(runtime)
        expected_fields = {e.path for e in schema} or {f.field for f in report.findings}
        for field in expected_fields:
            assert field in applied.stderr, (field, applied.stderr)
        if not schema:
            assert (
                f'The TrussiumRuntime "{runtime["metadata"]["name"]}" is invalid' in applied.stderr
            )
        assert kubectl("get", PLURAL, "-n", namespace, "-o", "name").stdout == ""


def test_missing_secret_warning_reaches_kubectl(kubectl: Kubectl, reviewed_namespace: str) -> None:
    production = (SAMPLES / "valid" / "production.yaml").read_text()
    applied = kubectl("apply", "-n", reviewed_namespace, "-f", "-", input=production)
    assert (
        "Warning: spec.provider.credentialsSecretRef.name: Secret 'openai-credentials' does not "
        "exist in this namespace yet"
    ) in applied.stderr
    assert "Warning: spec.imagePullSecrets[0].name: Secret 'ghcr-pull' does not exist" in (
        applied.stderr
    )
    kubectl(
        "create", "secret", "generic", "ghcr-pull", "-n", reviewed_namespace, "--from-literal=a=b"
    )
    another = production.replace("name: production", "name: production-2")
    again = kubectl("apply", "-n", reviewed_namespace, "-f", "-", input=another)
    assert "'ghcr-pull'" not in again.stderr
    assert "'openai-credentials'" in again.stderr


@pytest.mark.parametrize(
    ("provider", "warning"),
    [
        (
            {"type": "ollama", "model": "llama3.2", "baseURL": "http://ollama.models:11434"},
            "Warning: spec.provider.baseURL: the runtime calls <baseURL>/responses and "
            "<baseURL>/models, and Ollama serves them under /v1: end the URL in /v1",
        ),
        (
            {"type": "ollama", "model": "llama3.2"},
            "Warning: spec.provider.baseURL: unset, so the runtime calls "
            "http://127.0.0.1:11434/v1, inside its own Pod, where no Ollama runs",
        ),
        (
            {"type": "openai", "model": "gpt-4o-mini", "baseURL": "https://api.openai.com/v1"},
            "Warning: spec.provider.credentialsSecretRef: unset, so the runtime has no API key "
            "and serves no chat",
        ),
    ],
    ids=["ollama-without-v1", "ollama-without-base-url", "openai-without-credentials"],
)
def test_provider_settings_the_runtime_cannot_serve_with_are_warned_about(
    provider: dict[str, Any], warning: str, kubectl: Kubectl, reviewed_namespace: str
) -> None:
    """A warning, not a denial: kubectl prints it and the runtime is stored."""
    applied = kubectl(
        "apply", "-n", reviewed_namespace, "-f", "-", input=_runtime("warned", provider=provider)
    )
    assert warning in applied.stderr
    assert applied.stderr.count("Warning:") == 1, applied.stderr
    assert kubectl("get", PLURAL, "warned", "-n", reviewed_namespace, "-o", "name").stdout


def test_the_api_server_defaults_before_the_mutating_hook(
    kubectl: Kubectl, reviewed_namespace: str, webhook: RunningWebhook
) -> None:
    """The CRD schema's defaults are applied when the API server decodes the request, so
    the mutating hook sees a defaulted object and has nothing to patch (docs/architecture.md)."""
    kubectl("apply", "-n", reviewed_namespace, "-f", "-", input=_runtime("defaulted"))
    stored = json.loads(
        kubectl("get", PLURAL, "defaulted", "-n", reviewed_namespace, "-o", "json").stdout
    )
    assert stored["spec"]["service"] == {"type": "ClusterIP", "port": 9000}
    reviews = [
        entry
        for entry in map(json.loads, webhook.log.read_text().splitlines())
        if entry.get("msg") == "admission reviewed"
        and entry.get("object") == f"{reviewed_namespace}/defaulted"
        and not entry.get("dry_run")
    ]
    hooks = {(entry["hook"], entry["operation"], entry["patched"]) for entry in reviews}
    assert ("mutate-trussiumruntime", "CREATE", False) in hooks, reviews
    assert not any(patched for hook, _, patched in hooks if hook == "mutate-trussiumruntime")


def test_update_of_an_old_violation_is_allowed_with_a_warning(
    kubectl: Kubectl, namespace: str, webhook: RunningWebhook
) -> None:
    legacy = {"podMetadata": {"labels": {"app.kubernetes.io/name": "legacy"}}}
    # Stored while the webhook does not review this namespace, as by an older release.
    kubectl("apply", "-n", namespace, "-f", "-", input=_runtime("legacy", **legacy))
    _select(kubectl, namespace, webhook)
    replicas = iter(range(2, 1000))

    def edit_warns() -> bool:
        patch = json.dumps({"spec": {"replicas": next(replicas)}})
        edited = kubectl("patch", PLURAL, "legacy", "-n", namespace, "--type=merge", "-p", patch)
        return "already present before this update" in edited.stderr

    wait_for(edit_warns, "the ratcheting warning", EVENTUALLY_SECONDS)
    new_violation = json.dumps(
        {"spec": {"podMetadata": {"annotations": {"runtime.trussium.io/x": "y"}}}}
    )
    refused = kubectl(
        "patch", PLURAL, "legacy", "-n", namespace, "--type=merge", "-p", new_violation, check=False
    )
    assert refused.returncode != 0
    assert "spec.podMetadata.annotations[runtime.trussium.io/x]" in refused.stderr


def test_a_spec_change_to_a_frozen_runtime_must_fix_what_freezes_it(
    kubectl: Kubectl, namespace: str, webhook: RunningWebhook
) -> None:
    """The operator does not act on a frozen runtime, so the webhook admits no spec change
    it would ignore; an edit the operator has nothing to act on (a label) passes with a warning."""
    frozen = {"scheduling": {"tolerations": [{"key": "gpu", "operator": "Exist"}]}}
    kubectl("apply", "-n", namespace, "-f", "-", input=_runtime("frozen", **frozen))
    _select(kubectl, namespace, webhook)
    teams = iter(range(1000))

    def relabel_warns() -> bool:
        edited = kubectl(
            "label", PLURAL, "frozen", "-n", namespace, f"team=t{next(teams)}", "--overwrite"
        )
        return "does not reconcile this runtime until it is fixed" in edited.stderr

    wait_for(relabel_warns, "the frozen runtime's warning", EVENTUALLY_SECONDS)
    bump = json.dumps({"spec": {"replicas": 2}})
    refused = kubectl(
        "patch", PLURAL, "frozen", "-n", namespace, "--type=merge", "-p", bump, check=False
    )
    assert refused.returncode != 0
    assert "spec.scheduling.tolerations[0].operator" in refused.stderr
    assert "a change to its spec must fix this too" in refused.stderr
    fixed = json.dumps(
        {
            "spec": {
                "replicas": 2,
                "scheduling": {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
            }
        }
    )
    kubectl("patch", PLURAL, "frozen", "-n", namespace, "--type=merge", "-p", fixed)
    stored = json.loads(kubectl("get", PLURAL, "frozen", "-n", namespace, "-o", "json").stdout)
    assert stored["spec"]["replicas"] == 2


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("1abc", "starting with a letter"),
        ("a.b", "DNS-1035 label"),
        ("a" * 64, "no more than 63 characters"),
    ],
)
def test_a_name_the_operator_cannot_use_is_rejected_with_the_reason(
    kubectl: Kubectl, reviewed_namespace: str, name: str, reason: str
) -> None:
    """The API server alone admits these (CR names are DNS subdomains), but the runtime's
    Service needs a DNS-1035 label and its instance label a value of at most 63 characters."""
    manifest = _runtime(name)
    applied = kubectl("apply", "-n", reviewed_namespace, "-f", "-", input=manifest, check=False)
    assert applied.returncode != 0
    assert "metadata.name" in applied.stderr
    assert reason in applied.stderr
    assert "Service" in applied.stderr
    longest = _runtime("a" * 63)
    kubectl("apply", "--dry-run=server", "-n", reviewed_namespace, "-f", "-", input=longest)


HUGE_PAGES = {
    "limits": {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "1e1000000"},
    "requests": {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "1e1000000"},
}


def test_a_quantity_kubernetes_cannot_count_is_rejected_at_its_field(
    kubectl: Kubectl, reviewed_namespace: str
) -> None:
    """The API server keeps such a quantity only rewritten (1e1000000 becomes 10e999999), so
    the Deployment the operator renders never matches the live one, and no node can offer
    that count: the runtime is refused before anything is rendered from it."""
    deployment = yaml.safe_load(_managed_deployment("huge"))
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"] = HUGE_PAGES
    stored = json.loads(
        kubectl(
            "apply",
            "--dry-run=server",
            "-n",
            reviewed_namespace,
            "-f",
            "-",
            "-o",
            "json",
            input=json.dumps(deployment),
        ).stdout
    )
    limits = stored["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["hugepages-2Mi"] != HUGE_PAGES["limits"]["hugepages-2Mi"]
    applied = kubectl(
        "apply",
        "-n",
        reviewed_namespace,
        "-f",
        "-",
        input=_runtime("huge", resources=HUGE_PAGES),
        check=False,
    )
    assert applied.returncode != 0
    assert "spec.resources.limits[hugepages-2Mi]" in applied.stderr
    assert "out of range" in applied.stderr


def _managed_deployment(name: str) -> str:
    labels = {
        "app.kubernetes.io/name": "trussium",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/component": "runtime",
        "app.kubernetes.io/managed-by": "trussium-operator",
    }
    selector = {
        key: labels[key] for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance")
    }
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [{"name": "trussium", "image": "ghcr.io/t/trussium:1.4.2"}]
                    },
                },
            },
        }
    )


def test_managed_deployment_guard(kubectl: Kubectl, reviewed_namespace: str) -> None:
    namespace = reviewed_namespace
    kubectl("apply", "-n", namespace, "-f", "-", input=_managed_deployment("chat"))
    sidecar = json.dumps(
        [
            {
                "op": "add",
                "path": "/spec/template/spec/containers/-",
                "value": {
                    "name": "debug",
                    "image": "busybox",
                    "securityContext": {"privileged": True},
                },
            }
        ]
    )
    edit = ("patch", "deployment", "chat", "-n", namespace, "--type=json", "-p", sidecar)
    refused = kubectl(*edit, check=False)
    assert refused.returncode != 0
    assert "denied the request" in refused.stderr
    assert f"managed by TrussiumRuntime {namespace}/chat" in refused.stderr
    assert "spec.template.spec.containers" in refused.stderr

    kubectl("rollout", "restart", "deployment/chat", "-n", namespace)
    kubectl("rollout", "pause", "deployment/chat", "-n", namespace)
    kubectl("scale", "deployment/chat", "--replicas=3", "-n", namespace)
    kubectl("annotate", "deployment/chat", "team=assistants", "-n", namespace)
    editor = ("-n", namespace, "--verb=get,patch", "--resource=deployments.apps")
    kubectl("create", "role", "deployment-editor", *editor)
    operator = ("-n", namespace, "--role=deployment-editor", f"--serviceaccount={OPERATOR_ACCOUNT}")
    kubectl("create", "rolebinding", "operator", *operator)
    kubectl(*edit, f"--as={OPERATOR}")
    containers = kubectl(
        "get",
        "deployment",
        "chat",
        "-n",
        namespace,
        "-o",
        "jsonpath={.spec.template.spec.containers[*].name}",
    ).stdout
    assert containers == "trussium debug"


async def test_certificate_rotation_fails_no_admission(
    webhook: RunningWebhook, api_client: client.ApiClient, reviewed_namespace: str
) -> None:
    api = client.CustomObjectsApi(api_client)
    loop = asyncio.get_running_loop()
    failures: list[str] = []
    answered = 0
    stop = asyncio.Event()

    async def admit_continuously(worker: int) -> None:
        nonlocal answered
        while not stop.is_set():
            body = yaml.safe_load(_runtime(f"rotation-{worker}-{answered}"))
            try:
                await api.create_namespaced_custom_object(
                    GROUP, VERSION, reviewed_namespace, PLURAL, body, dry_run="All"
                )
                answered += 1
            except ApiException as error:
                failures.append(f"{error.status}: {error.body!r}")

    before = await loop.run_in_executor(None, _served_fingerprint, webhook.port)
    workers = [asyncio.create_task(admit_continuously(i)) for i in range(4)]
    await until(lambda: failures or answered >= ROTATION_ADMISSIONS, "admissions before", 30)
    await loop.run_in_executor(None, webhook.serve_new_certificate)
    deadline = loop.time() + 30
    while await loop.run_in_executor(None, _served_fingerprint, webhook.port) == before:
        assert loop.time() < deadline, "the webhook never served the new certificate"
        await asyncio.sleep(0.5)
    answered_at_rotation = answered
    wanted = answered_at_rotation + ROTATION_ADMISSIONS
    await until(lambda: failures or answered >= wanted, "admissions after the rotation", 30)
    stop.set()
    await asyncio.gather(*workers)
    assert failures == []
    assert answered > answered_at_rotation > 0


def _served_fingerprint(port: int) -> str:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw) as tls,
    ):
        certificate = tls.getpeercert(binary_form=True)
    assert certificate is not None
    return hashlib.sha256(certificate).hexdigest()


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated")
def test_only_tls_12_or_newer_is_accepted(webhook: RunningWebhook) -> None:
    def handshake(version: ssl.TLSVersion) -> str:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_verify_locations(webhook.cert_dir / "ca.crt")
        context.check_hostname = False
        context.set_ciphers("ALL:@SECLEVEL=0")  # let this client offer TLS 1.1 at all
        context.minimum_version = context.maximum_version = version
        with (
            socket.create_connection(("127.0.0.1", webhook.port), timeout=5) as raw,
            context.wrap_socket(raw) as tls,
        ):
            return str(tls.version())

    assert handshake(ssl.TLSVersion.TLSv1_2) == "TLSv1.2"
    with pytest.raises(ssl.SSLError) as refused:
        handshake(ssl.TLSVersion.TLSv1_1)
    # The server refused it, not this client (which would say NO_PROTOCOLS_AVAILABLE).
    assert "NO_PROTOCOLS_AVAILABLE" not in str(refused.value)


def test_plain_http_is_refused(webhook: RunningWebhook) -> None:
    def plain_post() -> int:
        connection = http.client.HTTPConnection("127.0.0.1", webhook.port, timeout=5)
        try:
            connection.request("POST", "/validate-trussiumruntime", body=b"{}")
            return connection.getresponse().status
        finally:
            connection.close()

    with pytest.raises((http.client.HTTPException, ConnectionError)):
        plain_post()


def test_self_managed_certificates_come_from_the_controller_and_no_key_is_logged(
    plane: ControlPlane, crd: None, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    """The controller creates both Secrets and injects the CA; the webhook serves the
    mounted serving Secret. At debug level neither log holds a byte of a key."""
    port, selector_value = free_port(), secrets.token_hex(4)
    log = tmp_path / "webhook.log"
    with (
        _registered(plane, port, "", selector_value) as name,
        running_controller(
            plane,
            tmp_path / "controller.log",
            *scoped(namespace),
            "--webhook-certificates",
            f"--webhook-namespace={namespace}",
            "--webhook-secret-name=webhook-tls",
            "--webhook-ca-secret-name=webhook-ca",
            "--webhook-ip-address=127.0.0.1",
            f"--webhook-config-name={name}",
            "--log-level=debug",
        ) as controller,
        SecretMount(plane, namespace, "webhook-tls", tmp_path / "certs", interval=0.5),
        _serving(plane, log, port, f"--cert-dir={tmp_path / 'certs'}", "--log-level=debug"),
    ):
        secret = json.loads(
            kubectl("get", "secret", "webhook-tls", "-n", namespace, "-o", "json").stdout
        )
        authority = json.loads(
            kubectl("get", "secret", "webhook-ca", "-n", namespace, "-o", "json").stdout
        )
        assert secret["type"] == "kubernetes.io/tls"
        assert "ca.key" not in secret["data"]
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            jsonpath = "jsonpath={.webhooks[*].clientConfig.caBundle}"
            bundles = kubectl("get", kind, name, "-o", jsonpath).stdout.split()
            assert bundles
            assert set(bundles) == {secret["data"]["ca.crt"]} == {authority["data"]["ca.crt"]}
        kubectl("label", "namespace", namespace, f"{SELECTOR_LABEL}={selector_value}")
        invalid = str(SAMPLES / "invalid" / "operator-owned-metadata.yaml")
        wait_for(
            lambda: (
                "spec.podMetadata.labels[app.kubernetes.io/managed-by]"
                in kubectl(
                    "apply", "--dry-run=server", "-n", namespace, "-f", invalid, check=False
                ).stderr
            ),
            "the webhook to review requests through the injected CA",
            EVENTUALLY_SECONDS,
        )
        valid = str(SAMPLES / "valid" / "minimal.yaml")
        kubectl("apply", "--dry-run=server", "-n", namespace, "-f", valid)
        # A malformed review is logged at debug: proof that debug lines are written.
        ca = ssl.create_default_context(cadata=base64.b64decode(secret["data"]["ca.crt"]).decode())
        connection = http.client.HTTPSConnection("127.0.0.1", port, context=ca, timeout=10)
        connection.request("POST", "/validate-trussiumruntime", body=b"{not json")
        assert connection.getresponse().status == 400
        connection.close()
        wait_for(lambda: "admission request refused" in log.read_text(), "the debug line", 20.0)
    written = log.read_text() + controller.log_path.read_text()
    assert '"level": "debug"' in written
    assert "Secret " in controller.log_path.read_text(), "the controller logged its writes"
    for key in (secret["data"]["tls.key"], authority["data"]["tls.key"]):
        pem_body = "".join(base64.b64decode(key).decode().splitlines()[1:-1])
        for form in (key, pem_body, pem_body[:64]):
            assert form not in written, "a private key in a debug log"


def test_the_3_mb_affinity_attack_is_refused_before_it_is_decoded(
    kubectl: Kubectl, reviewed_namespace: str, webhook: RunningWebhook
) -> None:
    """A runtime of 1,000 nodeSelectorTerms x 60 expressions (about 3 MB, valid
    under the Go CRD) cost 2.3 s of blocked event loop in a dry run. Its 300,000 JSON
    values are estimated at 58 MiB decoded, more than the webhook's memory budget, so
    the mutating hook answers 413 before decoding it (ADR 0037) and the API server
    refuses the change (failurePolicy: Fail). Printed: the API server's message."""
    term = {
        "matchExpressions": [{"key": f"k{j}", "operator": "In", "values": ["a"]} for j in range(60)]
    }
    required = {"nodeSelectorTerms": [term] * 1000}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    manifest = json.dumps(yaml.safe_load(_runtime("attack", scheduling={"affinity": affinity})))
    assert len(manifest) > 2_500_000
    refused = kubectl(
        "create",
        "--dry-run=server",
        "-n",
        reviewed_namespace,
        "-f",
        "-",
        input=manifest,
        check=False,
    )
    assert refused.returncode != 0
    assert "failed calling webhook" in refused.stderr
    reviews = [
        entry
        for entry in map(json.loads, webhook.log.read_text().splitlines())
        if entry.get("msg") == "admission reviewed"
        and entry.get("object") == f"{reviewed_namespace}/attack"
    ]
    assert reviews == [], "refused before it is decoded"
    print(f"\n3 MB affinity attack: {refused.stderr.strip()}")
