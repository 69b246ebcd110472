"""certManager mode with the real cert-manager (controller and cainjector, built
from the pinned module): a renewal of the webhook's serving certificate,
forced while admissions stream through the webhook, fails none of them.

The webhook runs on the host in files mode, serving the cert-manager-issued
Secret from a folder. A stand-in for the kubelet copies the Secret into that
folder ten seconds after it changes (the kubelet takes up to about a
minute), so the renewal opens the window the chart must survive: the API
server already holds whatever cainjector injected, the webhook still serves
the previous certificate. With the chart's CA chain the injected CA does not
change, so nothing fails, whether cainjector merges a new CA into caBundle
(cert-manager 1.19 and later) or replaces it (earlier releases). The previous
layout, a self-signed serving certificate injected as its own CA, is run the
same way with a replacing cainjector as a control, and does fail admissions
in that window: the measurement can tell the two apart.
"""

import asyncio
import base64
import inspect
import json
import os
import socket
import ssl
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster import ControlPlane
from devcluster.certmanager import CertManager
from devcluster.certmanager import install_crds as install_cert_manager_crds
from devcluster.controller_harness import runtime_manifest
from devcluster.hostoperator import install_crds
from devcluster.layout import free_port
from devcluster.process import Process, tail
from tests.support.chart import as_list, find, fullname, release_name, render
from trussium_operator.certs.files import BundleFiles, write_bundle

pytestmark = pytest.mark.api

HOST = "127.0.0.1"
# The kubelet syncs a mounted Secret within about a minute; ten seconds is
# already longer than cainjector and the API server take to act on a new CA.
KUBELET_SYNC_DELAY_SECONDS = 10.0
ISSUE_TIMEOUT_SECONDS = 120.0
SERVE_TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 0.2
# The webhook's ServiceAccount (files mode, no Secret lookup: it needs no RBAC).
WIRING = (
    "templates/serviceaccounts.yaml",
    "templates/certificate.yaml",
    "templates/webhook-configurations.yaml",
)
CONFIG_KINDS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")


@pytest.fixture(scope="module")
def cert_manager(api_plane: ControlPlane) -> Iterator[CertManager]:
    """cert-manager's CRDs and controller; each test runs its own cainjector."""
    install_cert_manager_crds(api_plane)
    with CertManager(api_plane, ("controller",)) as running:
        yield running


@dataclass
class Stream:
    """Rounds of dry-run TrussiumRuntime creates through the webhook (see webhook_answers)."""

    ok: list[float] = field(default_factory=list)
    failed: list[tuple[float, str]] = field(default_factory=list)

    def during(self, start: float, end: float) -> int:
        return sum(start <= t <= end for t in self.ok) + sum(
            start <= t <= end for t, _ in self.failed
        )


# Only the webhook knows this rule (the schema accepts it): its denial proves the call.
RESERVED_ANNOTATION = {"podMetadata": {"annotations": {"runtime.trussium.io/config-checksum": "0"}}}
WEBHOOK_DENIAL = "reserved for the operator"


async def admit(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> None:
    await client.CustomObjectsApi(api).create_namespaced_custom_object(
        "runtime.trussium.io",
        "v1alpha1",
        namespace,
        "trussiumruntimes",
        body,
        dry_run="All",
        _request_timeout=15,
    )


async def webhook_answers(api: client.ApiClient, namespace: str) -> bool:
    """One valid runtime admitted and one invalid runtime denied by the webhook itself."""
    await admit(api, namespace, runtime_manifest("renewal-probe", namespace))
    try:
        await admit(
            api, namespace, runtime_manifest("renewal-probe", namespace, **RESERVED_ANNOTATION)
        )
    except ApiException as error:
        if error.status == 422 and WEBHOOK_DENIAL in str(error.body):
            return True
        raise
    raise AssertionError("the webhook admitted a runtime with a reserved annotation")


async def stream_admissions(
    api: client.ApiClient, namespace: str, stream: Stream, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        try:
            await webhook_answers(api, namespace)
            stream.ok.append(time.monotonic())
        except ApiException as error:
            stream.failed.append((time.monotonic(), f"{error.status}: {error.body!r}"))


async def secret_data(api: client.ApiClient, namespace: str, name: str) -> dict[str, str]:
    try:
        secret = await client.CoreV1Api(api).read_namespaced_secret(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return {}
        raise
    return dict(secret.data or {})


def bundle(data: dict[str, str]) -> BundleFiles:
    return BundleFiles(
        certificate_pem=base64.b64decode(data["tls.crt"]),
        private_key_pem=base64.b64decode(data["tls.key"]),
        ca_pem=base64.b64decode(data.get("ca.crt", "")),
    )


async def kubelet(api: client.ApiClient, namespace: str, secret: str, folder: Path) -> None:
    """Copy the Secret into the folder a fixed delay after each change, like a kubelet sync."""
    seen = await secret_data(api, namespace, secret)
    while True:
        await asyncio.sleep(POLL_SECONDS)
        data = await secret_data(api, namespace, secret)
        if data and data != seen:
            await asyncio.sleep(KUBELET_SYNC_DELAY_SECONDS)
            write_bundle(folder, bundle(data))
            seen = data


def served_certificate(port: int) -> bytes:
    """The DER certificate the webhook presents to a new connection."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((HOST, port), timeout=5) as raw,
        context.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


async def ca_bundles(api: client.ApiClient, name: str) -> set[str]:
    """The caBundle values of both webhook configurations' hooks."""
    admission = client.AdmissionregistrationV1Api(api)
    mutating = await admission.read_mutating_webhook_configuration(name)
    validating = await admission.read_validating_webhook_configuration(name)
    hooks: list[Any] = [*mutating.webhooks, *validating.webhooks]
    return {hook.client_config.ca_bundle or "" for hook in hooks}


async def record_bundle_change(
    api: client.ApiClient, name: str, before: set[str], changed: list[float]
) -> None:
    """Note when cainjector first changes what the API server trusts."""
    while not changed:
        if await ca_bundles(api, name) != before:
            changed.append(time.monotonic())
        await asyncio.sleep(POLL_SECONDS)


async def until(what: str, seconds: float, check: Any) -> Any:
    """Poll `check` (plain or async) until it returns something truthy."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        await asyncio.sleep(POLL_SECONDS)
    pytest.fail(f"timed out after {seconds:.0f}s waiting for {what}")


def previous_layout(objects: list[dict[str, Any]], name: str, namespace: str) -> None:
    """The chart before the CA chain: a self-signed leaf, injected as its own CA."""
    objects[:] = [
        o
        for o in objects
        if not (
            o["kind"] in ("Certificate", "Issuer") and o["metadata"]["name"] == f"{name}-webhook-ca"
        )
    ]
    find(objects, "Certificate", f"{name}-webhook")["spec"]["issuerRef"]["name"] = (
        f"{name}-webhook-selfsigned"
    )
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        find(objects, kind, name)["metadata"]["annotations"] = {
            "cert-manager.io/inject-ca-from": f"{namespace}/{name}-webhook"
        }


@pytest.fixture
def apps_namespace(plane: ControlPlane, namespace: str) -> Iterator[str]:
    # The test's namespace ends in a random part (at most 55 characters in all): keep
    # it whole, or two parametrized runs collide while the first one's is terminating.
    apps = f"{namespace}-apps"
    plane.create_namespace(apps)
    yield apps
    plane.delete_namespace(apps)


@pytest.fixture
async def background() -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@pytest.mark.parametrize(
    ("layout", "merging"),
    [
        # cert-manager 1.19 and later merge a new CA into caBundle; earlier releases replace it.
        ("ca-chain", True),
        ("ca-chain", False),
        # The control: the previous layout with a replacing cainjector fails admissions.
        ("previous-self-signed-leaf", False),
    ],
    ids=["ca-chain-merging", "ca-chain-replacing", "previous-layout-replacing"],
)
async def test_forced_renewal_while_admissions_stream(
    plane: ControlPlane,
    namespace: str,
    apps_namespace: str,
    api_client: client.ApiClient,
    cert_manager: CertManager,
    background: list[asyncio.Task[None]],
    tmp_path: Path,
    layout: str,
    merging: bool,
) -> None:
    install_crds(plane)
    release = release_name()
    name = fullname(release)
    secret = f"{name}-webhook-tls"
    port, health_port = free_port(), free_port()
    show = [arg for template in WIRING for arg in ("--show-only", template)]
    objects = render(
        plane,
        release,
        namespace,
        *show,
        "--set",
        "certificates.mode=certManager",
        "--set",
        f"webhook.urlOverride=https://{HOST}:{port}",
        "--set",
        f"watchNamespace={apps_namespace}",
    )
    # The API server reaches this host-run webhook at 127.0.0.1, not at the Service name.
    find(objects, "Certificate", f"{name}-webhook")["spec"]["ipAddresses"] = [HOST]
    if layout == "previous-self-signed-leaf":
        previous_layout(objects, name, namespace)
    webhook: Process | None = None
    injector = CertManager(
        plane, ("cainjector",), feature_gates=f"CAInjectorMerging={str(merging).lower()}"
    ).start()
    try:
        plane.kubectl("apply", "--server-side", "-f", "-", input=as_list(objects))
        first = await until(
            "cert-manager to issue the serving certificate",
            ISSUE_TIMEOUT_SECONDS,
            lambda: secret_data(api_client, namespace, secret),
        )

        async def injected() -> set[str] | None:
            cert_manager.check_running()
            injector.check_running()
            bundles = await ca_bundles(api_client, name)
            return bundles if "" not in bundles else None

        bundles_before = await until("cainjector to fill caBundle", ISSUE_TIMEOUT_SECONDS, injected)
        folder = tmp_path / "certs"
        write_bundle(folder, bundle(first))
        token = plane.kubectl(
            "create", "token", f"{name}-webhook", "-n", namespace, "--duration=1h"
        ).stdout.strip()
        webhook = Process(
            "webhook",
            [
                str(Path(sys.executable).parent / "trussium-webhook"), "serve",
                "--cert-dir", str(folder),
                "--operator-username", f"system:serviceaccount:{namespace}:{name}-controller",
                "--kubeconfig", str(plane.token_kubeconfig(token, f"{release}-webhook")),
                "--bind-address", f"{HOST}:{port}",
                "--health-bind-address", f"{HOST}:{health_port}",
                "--metrics-bind-address", "0",
            ],
            tmp_path / "webhook.log",
            {**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        webhook.start()

        async def admitted() -> bool:
            if webhook is not None and webhook.exit_code() is not None:
                raise RuntimeError(webhook.describe_exit(30))
            try:
                return await webhook_answers(api_client, apps_namespace)
            except ApiException:
                return False

        await until("the first admission through the webhook", SERVE_TIMEOUT_SECONDS, admitted)

        stream, stop = Stream(), asyncio.Event()
        background.append(
            asyncio.create_task(stream_admissions(api_client, apps_namespace, stream, stop))
        )
        bundle_changed: list[float] = []
        background.append(asyncio.create_task(kubelet(api_client, namespace, secret, folder)))
        background.append(
            asyncio.create_task(
                record_bundle_change(api_client, name, bundles_before, bundle_changed)
            )
        )
        await until("admissions to flow", SERVE_TIMEOUT_SECONDS, lambda: len(stream.ok) >= 5)

        # What `cmctl renew` does: mark the Certificate Issuing (cert-manager's documented trigger).
        renewed_at = time.monotonic()
        plane.kubectl(
            "patch", "certificate", f"{name}-webhook", "-n", namespace,
            "--subresource=status", "--type=json", "-p", json.dumps([{
                "op": "add",
                "path": "/status/conditions/-",
                "value": {
                    "type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
                    "message": "Certificate re-issuance manually triggered",
                    "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                },
            }]),
        )  # fmt: skip

        async def reissued() -> dict[str, str] | None:
            data = await secret_data(api_client, namespace, secret)
            return data if data.get("tls.crt") != first["tls.crt"] else None

        second = await until("cert-manager to renew", ISSUE_TIMEOUT_SECONDS, reissued)
        changed_at = time.monotonic()
        new_der = x509.load_pem_x509_certificate(base64.b64decode(second["tls.crt"])).public_bytes(
            Encoding.DER
        )

        async def serving_renewed() -> bool:
            return await asyncio.to_thread(served_certificate, port) == new_der

        await until(
            "the webhook to serve the renewed certificate", SERVE_TIMEOUT_SECONDS, serving_renewed
        )
        serving_at = time.monotonic()
        settled = len(stream.ok) + len(stream.failed)
        await until(
            "admissions after the switch",
            SERVE_TIMEOUT_SECONDS,
            lambda: len(stream.ok) + len(stream.failed) >= settled + 5,
        )
        stop.set()
        bundles_after = await ca_bundles(api_client, name)
    finally:
        if webhook is not None:
            webhook.terminate()
            webhook.kill(10.0)
        injector.stop()
        # Shown by pytest only when the test fails.
        for log in (*cert_manager.logs.values(), *injector.logs.values()):
            print(f"==> {log.name} <==\n{tail(log, 40)}")
        for kind in CONFIG_KINDS:
            plane.kubectl("delete", kind, name, "--ignore-not-found")

    in_window = stream.during(changed_at, serving_at)
    injection = (
        f"caBundle changed {bundle_changed[0] - changed_at:+.1f}s after the Secret"
        if bundle_changed
        else "caBundle unchanged"
    )
    report = (
        f"{layout}, cainjector {'merging' if merging else 'replacing'}: "
        f"{len(stream.ok)} rounds answered, {len(stream.failed)} failed; "
        f"{in_window} while the new certificate was not served yet "
        f"({serving_at - changed_at:.1f}s; renewal took {changed_at - renewed_at:.1f}s; "
        f"{injection})"
    )
    print(report)
    assert in_window >= 3, f"the renewal window saw too few admissions to count: {report}"
    if layout == "ca-chain":
        assert bundles_after == bundles_before, "the trusted CA must not change on renewal"
        assert stream.failed == [], report
    else:
        assert bundles_after != bundles_before
        assert stream.failed, f"the control should fail admissions: {report}"
