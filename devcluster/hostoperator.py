"""The operator's two programs as host processes, wired into a local control
plane exactly as the Helm chart wires them into a cluster.

The chart renders the ServiceAccounts, the RBAC and the webhook
configurations (with `webhook.urlOverride` pointing at 127.0.0.1); each
program then authenticates with a token of its own ServiceAccount, so what
works here works with the chart's least-privilege permissions, not as admin.
Both serve /metrics as the chart has them do, over HTTPS behind the API
server's reviews; `scrape` reads it with the token of `metrics_reader`, a
ServiceAccount the chart binds to its metrics-viewer ClusterRole.
The controller keeps the webhook's certificates; the kubelet's part, mounting
the serving Secret into the webhook, is `devcluster.secretmount`'s.
Used by the demo and by the tests that prove the chart's RBAC.
"""

import base64
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import yaml

from devcluster.controlplane import ControlPlane
from devcluster.layout import free_port
from devcluster.process import Process
from devcluster.secretmount import SecretMount

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "trussium-operator"
CRDS = CHART / "files" / "crds"
CRD_NAME = "trussiumruntimes.runtime.trussium.io"
HOST = "127.0.0.1"
READY_TIMEOUT_SECONDS = 90.0
TOKEN_DURATION = "24h"
SERVICE_MONITOR = ("metrics.serviceMonitor.enabled=true",)
# What the programs need from the chart when they run on the host: their identities,
# their RBAC and the webhook configurations (a template may render nothing).
WIRING_KINDS = frozenset(
    {
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    }
)


def _script(name: str) -> str:
    """A console script of this project, from the interpreter's environment."""
    return str(Path(sys.executable).parent / name)


def _http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            status: int = answer.status
            return status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def get_metrics(url: str, token: str | None) -> tuple[int, str]:
    """(status, body) of a GET of a metrics endpoint, with `token` as the bearer token;
    the served certificate is self-signed, so it is not verified."""
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def install_crds(plane: ControlPlane) -> None:
    """Server-side apply the chart's CRD and wait until it is served.

    Polls instead of `kubectl wait --for=condition=Established`, which errors
    out on a CRD whose status has no conditions yet.
    """
    plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    query = '{.status.conditions[?(@.type=="Established")].status}'
    while time.monotonic() < deadline:
        answer = plane.kubectl("get", "crd", CRD_NAME, "-o", f"jsonpath={query}", check=False)
        if answer.stdout.strip() == "True":
            return
        time.sleep(0.2)
    raise RuntimeError(f"CRD {CRD_NAME} not Established in {READY_TIMEOUT_SECONDS:.0f}s")


class HostOperator:
    """Start with `start()` or `with HostOperator(plane) as operator:`; `stop()` is idempotent."""

    def __init__(
        self,
        plane: ControlPlane,
        *,
        namespace: str = "trussium-system",
        release: str = "trussium-operator",
        watch_namespace: str = "",
        helm_values: Sequence[str] = (),
        metrics_secure: bool = True,
    ) -> None:
        self.plane = plane
        self.namespace = namespace
        self.release = release
        self.watch_namespace = watch_namespace
        self._helm_values = list(helm_values)
        self.metrics_secure = metrics_secure
        self.webhook_port = free_port()
        self.webhook_health_port = free_port()
        self.webhook_metrics_port = free_port()
        self.controller_metrics_port = free_port()
        self.controller_health_port = free_port()
        self._dir = plane.directory / f"host-operator-{release}"
        self._processes: list[Process] = []
        self._reader_token: str | None = None
        self._mount: SecretMount | None = None

    @property
    def controller_account(self) -> str:
        return f"{self.release}-controller"

    @property
    def webhook_account(self) -> str:
        return f"{self.release}-webhook"

    @property
    def controller_username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.controller_account}"

    @property
    def metrics_reader(self) -> str:
        """The ServiceAccount (in `namespace`) the chart binds to metrics-viewer."""
        return f"{self.release}-metrics-scraper"

    @property
    def webhook_url(self) -> str:
        return f"https://{HOST}:{self.webhook_port}"

    @property
    def logs(self) -> dict[str, Path]:
        return {p.name: p.log for p in self._processes}

    def render_wiring(self) -> str:
        """The chart's ServiceAccounts, RBAC and webhook configurations for this setup."""
        items = [o for o in self._render() if o.get("kind") in WIRING_KINDS]
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})

    def scrape_tls(self, directory: Path) -> dict[str, Any]:
        """The chart's ServiceMonitor `tlsConfig` for this setup, as a Prometheus
        `tls_config`: a CA read from its Secret into `directory` (as the Prometheus
        Operator copies it), the server name, or no verification when it says so."""
        (monitor,) = [o for o in self._render(SERVICE_MONITOR) if o["kind"] == "ServiceMonitor"]
        tls: dict[str, Any] = monitor["spec"]["endpoints"][0]["tlsConfig"]
        if tls.get("insecureSkipVerify"):
            return {"insecure_skip_verify": True}
        reference = tls["ca"]["secret"]
        jsonpath = "{.data." + reference["key"].replace(".", "\\.") + "}"
        encoded = self.plane.kubectl(
            "get", "secret", reference["name"], "-n", self.namespace, "-o", f"jsonpath={jsonpath}"
        ).stdout
        ca_file = directory / "metrics-ca.crt"
        ca_file.write_bytes(base64.b64decode(encoded))
        return {"ca_file": str(ca_file), "server_name": tls["serverName"]}

    def _render(self, extra: Sequence[str] = ()) -> list[dict[str, Any]]:
        reader = "metrics.readerSubjects[0]"
        values = [
            f"webhook.urlOverride={self.webhook_url}",
            f"{reader}.kind=ServiceAccount",
            f"{reader}.name={self.metrics_reader}",
            f"{reader}.namespace={self.namespace}",
            f"metrics.secure={str(self.metrics_secure).lower()}",
            *self._helm_values,
            *extra,
        ]
        if self.watch_namespace:
            values.append(f"watchNamespace={self.watch_namespace}")
        args = ["template", self.release, str(CHART), "--namespace", self.namespace, "--skip-tests"]
        for value in values:
            args += ["--set", value]
        return [o for o in yaml.safe_load_all(self.plane.helm(*args).stdout) if o]

    def token(self, account: str) -> str:
        """A token of the ServiceAccount `account` in `namespace`."""
        return self.plane.kubectl(
            "create", "token", account, "-n", self.namespace, f"--duration={TOKEN_DURATION}"
        ).stdout.strip()

    def token_kubeconfig(self, account: str) -> Path:
        return self.plane.token_kubeconfig(self.token(account), f"{self.release}-{account}")

    def scrape(self, port: int) -> str:
        """The /metrics text on `port`, read as the metrics reader; any other answer fails."""
        if self._reader_token is None:
            self._reader_token = self.token(self.metrics_reader)
        scheme = "https" if self.metrics_secure else "http"
        status, text = get_metrics(f"{scheme}://{HOST}:{port}/metrics", self._reader_token)
        if status != 200:
            raise AssertionError(f"/metrics on port {port}: {status} {text[:200]}")
        return text

    def start(self) -> Self:
        self._dir.mkdir(parents=True, exist_ok=True)
        if self.plane.kubectl("get", "namespace", self.namespace, check=False).returncode:
            self.plane.create_namespace(self.namespace)
        self.plane.kubectl("apply", "--server-side", "-f", "-", input=self.render_wiring())
        reader = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": self.metrics_reader, "namespace": self.namespace},
        }
        self.plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(reader))
        # The kubelet's optional volume of the webhook's Secret: empty until the
        # controller creates the webhook's certificates (docs/adr/0029, 0039).
        self._cert_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_controller()
            self._mount = SecretMount(
                self.plane, self.namespace, f"{self.release}-webhook-tls", self._cert_dir
            ).start()
            self._start_webhook()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def _cert_dir(self) -> Path:
        return self._dir / "webhook-certs"

    @property
    def _metrics_cert_path(self) -> list[str]:
        """Both programs serve the webhook's serving certificate on /metrics, as the
        chart has them do (docs/adr/0039)."""
        return ["--metrics-cert-path", str(self._cert_dir)] if self.metrics_secure else []

    def stop(self) -> None:
        if self._mount is not None:
            self._mount.stop()
            self._mount = None
        for process in reversed(self._processes):
            process.terminate()
        for process in reversed(self._processes):
            process.kill(15.0)
        self._processes.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _spawn(self, name: str, argv: list[str]) -> Process:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        process = Process(name, argv, self._dir / f"{name}.log", env)
        process.start()
        self._processes.append(process)
        return process

    def _start_webhook(self) -> None:
        process = self._spawn(
            "webhook",
            [
                _script("trussium-webhook"), "serve",
                "--cert-dir", str(self._cert_dir),
                "--operator-username", self.controller_username,
                "--kubeconfig", str(self.token_kubeconfig(self.webhook_account)),
                "--bind-address", f"{HOST}:{self.webhook_port}",
                "--health-bind-address", f"{HOST}:{self.webhook_health_port}",
                "--metrics-bind-address", f"{HOST}:{self.webhook_metrics_port}",
                f"--metrics-secure={self.metrics_secure}",
                *self._metrics_cert_path,
            ],
        )  # fmt: skip
        self._wait(process, f"http://{HOST}:{self.webhook_health_port}/readyz")
        self._wait_for_ca_bundle(process)

    def _start_controller(self) -> None:
        argv = [
            _script("trussium-controller"), "run",
            "--kubeconfig", str(self.token_kubeconfig(self.controller_account)),
            "--leader-election-id", self.release,
            "--leader-election-namespace", self.namespace,
            "--metrics-bind-address", f"{HOST}:{self.controller_metrics_port}",
            f"--metrics-secure={self.metrics_secure}",
            "--health-probe-bind-address", f"{HOST}:{self.controller_health_port}",
            "--webhook-certificates",
            "--webhook-namespace", self.namespace,
            "--webhook-secret-name", f"{self.release}-webhook-tls",
            "--webhook-ca-secret-name", f"{self.release}-webhook-ca",
            "--webhook-service-name", f"{self.release}-webhook",
            "--webhook-config-name", self.release,
            "--webhook-ip-address", HOST,
            *self._metrics_cert_path,
        ]  # fmt: skip
        if self.watch_namespace:
            argv += ["--watch-namespace", self.watch_namespace]
        process = self._spawn("controller", argv)
        self._wait(process, f"http://{HOST}:{self.controller_health_port}/readyz")

    def _wait(self, process: Process, url: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if process.exit_code() is not None:
                raise RuntimeError(process.describe_exit(30))
            if _http_status(url) == 200:
                return
            time.sleep(0.2)
        raise RuntimeError(f"{process.name} not ready at {url} in {READY_TIMEOUT_SECONDS:.0f}s")

    def _wait_for_ca_bundle(self, process: Process) -> None:
        """The TrussiumRuntime hooks fail closed: wait until the controller injected the CA."""
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if process.exit_code() is not None:
                raise RuntimeError(process.describe_exit(30))
            answer = self.plane.kubectl(
                "get", "mutatingwebhookconfiguration", self.release, "-o", "json"
            )
            hooks = json.loads(answer.stdout).get("webhooks", [])
            if hooks and all(h.get("clientConfig", {}).get("caBundle") for h in hooks):
                return
            time.sleep(0.3)
        raise RuntimeError("the controller did not inject the CA bundle in time")
