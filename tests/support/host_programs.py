"""The chart's two programs run on the host as the chart runs them in Pods: the chart's
own flags (minus the in-Pod addresses), a ServiceAccount token of the chart's, and the
installed webhook configurations pointing at the host webhook (webhook.urlOverride)."""

import base64
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from devcluster import ControlPlane
from devcluster.controller_harness import Controller, running_controller, wait_for
from devcluster.layout import free_port
from devcluster.secretmount import SecretMount
from tests.support.chart import container

CERT_DIR = "webhook-certs"  # under tmp_path: the host's stand-in for the mounted Secret
# Each program binds these itself on the host; the chart's in-Pod values would collide.
HOST_FLAGS = (
    "--bind-address",
    "--health-bind-address",
    "--metrics-bind-address",
    "--health-probe-bind-address",
    "--cert-dir",
    "--metrics-cert-path",
)


def chart_args(deployment: dict[str, Any]) -> list[str]:
    """The program arguments the chart gives this Deployment, minus the in-Pod addresses."""
    main = container(deployment)
    args: list[str] = [*main["command"][1:], *main["args"]]
    return [a for a in args if a.split("=", 1)[0] not in HOST_FLAGS]


def _has_flag(deployment: dict[str, Any], flag: str) -> bool:
    main = container(deployment)
    return any(a.split("=", 1)[0] == flag for a in [*main["command"], *main["args"]])


def provided_certificate(work: Path, secret: str) -> list[str]:
    """A CA and serving certificate from `trussium-webhook certs generate`, for `provided` mode:
    the served folder (the host's stand-in for the mounted Secret) and the chart values."""
    generate = [str(Path(sys.executable).parent / "trussium-webhook"), "certs", "generate"]
    out, ca = work / CERT_DIR, work / "ca"
    subprocess.run(
        [*generate, f"--out={out}", f"--ca-dir={ca}", "--ip-address=127.0.0.1"], check=True
    )
    bundle = base64.b64encode((out / "ca.crt").read_bytes()).decode()
    return [
        "--set", "certificates.mode=provided",
        "--set", f"certificates.provided.existingSecret={secret}",
        "--set", f"certificates.provided.caBundle={bundle}",
    ]  # fmt: skip


def token_kubeconfig(plane: ControlPlane, namespace: str, account: str) -> Path:
    token = plane.kubectl("create", "token", account, "-n", namespace, "--duration=1h").stdout
    return plane.token_kubeconfig(token.strip(), account)


@contextmanager
def running_webhook(
    argv: list[str],
    port: int,
    log_path: Path,
    plane: ControlPlane,
    metrics_port: int | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    health, metrics = free_port(), metrics_port or free_port()
    command = [
        str(Path(sys.executable).parent / "trussium-webhook"),
        *argv,
        f"--bind-address=127.0.0.1:{port}",
        f"--health-bind-address=127.0.0.1:{health}",
        f"--metrics-bind-address=127.0.0.1:{metrics}",
        f"--cert-dir={log_path.parent / CERT_DIR}",
    ]
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"webhook exited: {log_path.read_text()[-4000:]}")
        probe = plane.kubectl("get", "--raw", "/readyz", check=False)  # keep the API warm
        return probe.returncode == 0 and _http_ok(f"http://127.0.0.1:{health}/readyz")

    try:
        wait_for(ready, "the host webhook to be ready", timeout=60)
        yield process
    except BaseException:
        sys.stderr.write(f"--- webhook log ---\n{log_path.read_text()[-6000:]}\n")
        raise
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def ca_injected(plane: ControlPlane, name: str) -> bool:
    """Every hook of both configurations carries a caBundle."""
    bundles = [
        plane.kubectl(
            "get", kind, name, "-o", "jsonpath={.webhooks[*].clientConfig.caBundle}"
        ).stdout.split()
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
    ]
    return [len(b) for b in bundles] == [1, 2]


@contextmanager
def running_chart_programs(
    plane: ControlPlane,
    rendered: list[dict[str, Any]],
    namespace: str,
    port: int,
    work: Path,
    webhook_metrics_port: int | None = None,
) -> Iterator[tuple[Controller, dict[str, Path]]]:
    """Both programs as the rendered chart runs them, each with a token of its chart
    ServiceAccount, the webhook on `port` (its /metrics on `webhook_metrics_port`);
    yields the controller and each component's kubeconfig (logs in `work`)."""
    deployments = {
        d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]: d
        for d in rendered
        if d["kind"] == "Deployment"
    }
    configs = {
        component: token_kubeconfig(
            plane, namespace, deployment["spec"]["template"]["spec"]["serviceAccountName"]
        )
        for component, deployment in deployments.items()
    }
    webhook_argv = chart_args(deployments["webhook"])
    controller_argv = chart_args(deployments["controller"])
    # Both programs serve the webhook's certificate on /metrics (ADR 0039), from the
    # kubelet's optional volume: the folder exists, empty until the certificates do.
    certs = work / CERT_DIR
    certs.mkdir(parents=True, exist_ok=True)
    for deployment, argv in (
        (deployments["webhook"], webhook_argv),
        (deployments["controller"], controller_argv),
    ):
        if _has_flag(deployment, "--metrics-cert-path"):
            argv.append(f"--metrics-cert-path={certs}")
    # selfManaged (ADR 0029): the controller keeps the webhook's certificates, for the
    # host webhook at 127.0.0.1, and the kubelet's part is SecretMount's.
    self_managed = "--webhook-certificates" in controller_argv
    if self_managed:
        controller_argv.append("--webhook-ip-address=127.0.0.1")
    with (
        running_controller(
            plane,
            work / "controller.log",
            *controller_argv[1:],
            f"--kubeconfig={configs['controller']}",
            identity=deployments["controller"]["metadata"]["name"],
        ) as controller,
        SecretMount(plane, namespace, _secret_name(deployments["webhook"]), work / CERT_DIR)
        if self_managed
        else nullcontext(),
        running_webhook(
            [*webhook_argv, f"--kubeconfig={configs['webhook']}"],
            port,
            work / "webhook.log",
            plane,
            webhook_metrics_port,
        ),
    ):
        yield controller, configs


def _secret_name(webhook: dict[str, Any]) -> str:
    volumes = {v["name"]: v for v in webhook["spec"]["template"]["spec"]["volumes"]}
    name: str = volumes["certs"]["secret"]["secretName"]
    return name
