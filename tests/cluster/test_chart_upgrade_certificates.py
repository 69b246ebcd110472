"""Upgrading a selfManaged release from the layout before ADR 0029, where the webhook
kept the CA key in its serving Secret and injected the CA itself, fails no admission:
the controller replaces that CA, whose key the webhook pods could read, by a new one
in its own Secret, and keeps the old one trusted while its certificate is served.

The previous chart and the previous webhook program come from git (commit
PREVIOUS_LAYOUT); the programs run on the host with their chart's own tokens, as in
test_chart_rbac.py, behind a relay on the configurations' URL that plays the
Service: it moves new connections to the new webhook once that is ready, as the
endpoints would, before the previous one gets SIGTERM; open connections stay where
they are, as kube-proxy keeps them. Admissions stream through the fail-closed hooks
the whole time, except while the previous webhook stops.

That pause is for the previous release, which users cannot change (ADR 0032): when
its listener closes it also closes the API server's kept-alive connection, and drops
a review the API server is writing into it at that moment (`EOF`, or the hook's
timeout when the head came in first). A real upgrade from it can fail such a review
too. Here the stream is back to back and the relay adds latency, so it did in about
one run in ten. This release answers such a review and closes kept-alive
connections only between requests. The test is about the CA changing with no gap
in trust, and the stream covers that before and after the stop.

The relay forwards each write at once (TCP_NODELAY), as kube-proxy's NAT does. With
Nagle's algorithm it held each review's body about 40 ms behind its head, which
made the previous webhook's close drop a body in about half the runs.
"""

import base64
import json
import os
import subprocess
import sys
import tarfile
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import running_controller, runtime_manifest, wait_for
from devcluster.hostoperator import install_crds
from devcluster.layout import free_port
from devcluster.process import Process
from devcluster.secretmount import SecretMount
from tests.faults.proxy import Relay
from tests.support.chart import CHART, find, fullname, release_name, render
from tests.support.host_programs import ca_injected, chart_args, token_kubeconfig
from trussium_operator.certs.authority import decode_certificates

OWN_PLANE = pytest.mark.own_plane(
    "the operator as host processes that the API server calls on 127.0.0.1"
)
pytestmark = [pytest.mark.cluster, OWN_PLANE]

REPO = Path(__file__).resolve().parents[2]
# The last commit whose webhook kept its own CA (the chart and programs before ADR 0029).
PREVIOUS_LAYOUT = "3b5806a40695046899aa1825a9b9d35c0fe69856"


@pytest.fixture
def previous(tmp_path: Path) -> Path:
    """The repository as of PREVIOUS_LAYOUT: its chart and its programs."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", PREVIOUS_LAYOUT], capture_output=True, check=False
    )
    if archive.returncode != 0:
        pytest.skip(f"commit {PREVIOUS_LAYOUT[:12]} (before ADR 0029) is not in this checkout")
    target = tmp_path / "previous"
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="tar")
    return target


@contextmanager
def webhook(argv: list[str], port: int, log: Path, code: Path | None = None) -> Iterator[Process]:
    """A webhook process on the host, of this checkout or of the tree at `code`."""
    health = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRUSSIUM_")}
    if code is not None:
        env["PYTHONPATH"] = str(code)  # ahead of this checkout's editable install
    else:  # this checkout's serves /metrics on an address of its own
        argv = [*argv, f"--metrics-bind-address=127.0.0.1:{free_port()}"]
    process = Process(
        log.stem,
        [
            str(Path(sys.executable).parent / "trussium-webhook"), *argv,
            f"--bind-address=127.0.0.1:{port}",
            f"--health-bind-address=127.0.0.1:{health}",
            "--shutdown-delay=2",
        ],
        log,
        env,
    )  # fmt: skip
    process.start()

    def ready() -> bool:
        if process.exit_code() is not None:
            raise AssertionError(process.describe_exit(40))
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    try:
        wait_for(ready, f"{log.stem} to be ready", timeout=60)
        yield process
    finally:
        process.terminate()
        process.kill(30.0)


class Admissions:
    """Server-side dry runs of a valid runtime, one after another, through the hooks."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        self.plane = plane
        self.manifest = json.dumps(runtime_manifest("upgrade-probe", namespace))
        self.failures: list[str] = []
        self.phase = "previous layout"
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._turn = threading.Condition()
        self._held = self._busy = False

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._turn:
                self._turn.wait_for(lambda: not self._held)
                self._busy = True
            answer = self.plane.kubectl(
                "create", "--dry-run=server", "-f", "-", input=self.manifest, check=False
            )
            self.count += 1
            if answer.returncode != 0:
                self.failures.append(f"[{self.phase}] {answer.stderr}")
            with self._turn:
                self._busy = False
                self._turn.notify_all()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No admission runs inside; the one under way finishes first."""
        with self._turn:
            self._held = True
            if not self._turn.wait_for(lambda: not self._busy, timeout=60):
                raise AssertionError("an admission took more than 60 s")
        try:
            yield
        finally:
            with self._turn:
                self._held = False
                self._turn.notify_all()

    def __enter__(self) -> "Admissions":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def past(self, more: int) -> None:
        target = self.count + more
        wait_for(lambda: self.count >= target, f"{more} more admissions", timeout=120)


def secret(plane: ControlPlane, name: str, namespace: str) -> dict[str, str]:
    answer = plane.kubectl("get", "secret", name, "-n", namespace, "-o", "json", check=False)
    data: dict[str, str] = json.loads(answer.stdout)["data"] if answer.returncode == 0 else {}
    return data


def bundles(plane: ControlPlane, name: str) -> set[str]:
    return {
        bundle
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
        for bundle in plane.kubectl(
            "get", kind, name, "-o", "jsonpath={.webhooks[*].clientConfig.caBundle}"
        ).stdout.split()
    }


def test_upgrade_from_the_webhook_kept_ca_fails_no_admission(
    plane: ControlPlane, namespace: str, tmp_path: Path, previous: Path
) -> None:
    install_crds(plane)
    apps = f"{namespace}-apps"
    plane.create_namespace(apps)
    release, old_port, new_port = release_name(), free_port(), free_port()
    name = fullname(release)
    relay = Relay(old_port).start()
    old_chart = previous / "charts" / "trussium-operator"
    values = [
        "--set", "controller.replicas=0",
        "--set", "crds.enabled=false",
        "--set", f"webhook.urlOverride=https://127.0.0.1:{relay.port}",
    ]  # fmt: skip
    helm = ("--namespace", namespace, "--wait", "--timeout", "120s")
    old_objects = render(plane, release, namespace, chart=old_chart)
    old_args = chart_args(find(old_objects, "Deployment", f"{name}-webhook"))
    new_objects = render(plane, release, namespace)
    new_webhook_args = chart_args(find(new_objects, "Deployment", f"{name}-webhook"))
    controller_args = chart_args(find(new_objects, "Deployment", f"{name}-controller"))
    try:
        plane.helm("install", release, str(old_chart), *values, *helm)
        old_token = token_kubeconfig(plane, namespace, f"{name}-webhook")
        with webhook(
            [*old_args, f"--kubeconfig={old_token}", f"--cert-dir={tmp_path / 'old-certs'}",
             "--ip-address=127.0.0.1"],
            old_port, tmp_path / "previous-webhook.log", code=previous,
        ) as old:  # fmt: skip
            wait_for(lambda: ca_injected(plane, name), "the previous webhook to inject its CA")
            legacy = secret(plane, f"{name}-webhook-tls", namespace)
            assert "ca.key" in legacy, "the previous layout keeps the CA key beside tls.key"
            trusted = bundles(plane, name)
            with Admissions(plane, apps) as admissions:
                admissions.past(3)
                admissions.phase = "helm upgrade"
                plane.helm("upgrade", release, str(CHART), *values, *helm)
                admissions.phase = "upgraded, previous webhook"
                admissions.past(3)
                controller_token = token_kubeconfig(plane, namespace, f"{name}-controller")
                with (
                    running_controller(
                        plane,
                        tmp_path / "controller.log",
                        *controller_args[1:],
                        "--webhook-ip-address=127.0.0.1",
                        f"--kubeconfig={controller_token}",
                        identity=name,
                    ),
                    SecretMount(plane, namespace, f"{name}-webhook-tls", tmp_path / "new-certs"),
                ):
                    wait_for(
                        lambda: "ca.key" not in secret(plane, f"{name}-webhook-tls", namespace),
                        "the controller to move the CA key out of the serving Secret",
                    )
                    admissions.phase = "CA renewed"
                    with webhook(
                        [
                            *new_webhook_args,
                            f"--cert-dir={tmp_path / 'new-certs'}",
                            # its token, for the access reviews of its secure metrics
                            f"--kubeconfig={token_kubeconfig(plane, namespace, f'{name}-webhook')}",
                        ],
                        new_port,
                        tmp_path / "new-webhook.log",
                    ):
                        relay.retarget(new_port)  # the endpoints now list the new pod
                        admissions.phase = "retargeted"
                        admissions.past(3)  # over the connection kept to the old pod
                        with admissions.paused():  # the previous release's close (above)
                            old.terminate()  # the old pod terminates
                            old.kill(30.0)
                        admissions.phase = "new webhook only"
                        admissions.past(10)
                        admissions.stop()  # before anything is torn down
        after = bundles(plane, name)
    finally:
        relay.close()
        plane.helm("uninstall", release, "--namespace", namespace, "--wait", check=False)
        plane.delete_namespace(apps)

    print(f"admissions during the upgrade: {admissions.count}, failed: {len(admissions.failures)}")
    assert admissions.failures == [], admissions.failures[:3]
    assert admissions.count >= 16
    authority = secret(plane, f"{name}-webhook-ca", namespace)
    serving = secret(plane, f"{name}-webhook-tls", namespace)
    kept_key = authority["tls.key"] == legacy["ca.key"]  # compared so, no key in a failure
    assert not kept_key, "a new CA: the webhook pods could read the old one's key"
    assert serving["tls.crt"] == legacy["tls.crt"], "the same serving certificate"
    assert sorted(serving) == ["ca.crt", "tls.crt", "tls.key"]
    assert trusted == {legacy["ca.crt"]}
    assert after == {authority["ca.crt"]}
    bundle = decode_certificates(base64.b64decode(authority["ca.crt"]))
    assert bundle[1:] == decode_certificates(base64.b64decode(legacy["ca.crt"])), (
        "the old CA stays trusted, after the new one, while its certificate is served"
    )
