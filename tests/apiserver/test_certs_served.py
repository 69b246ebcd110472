"""The real API server calls a webhook served with self-managed certificates
through a whole CA rotation, with no failed review, and trusts one CA after."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import ssl
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509
from kubernetes_asyncio import client

from devcluster import ControlPlane
from devcluster.secretmount import SecretMount
from trussium_operator.certs.authority import decode_certificates, is_issued_by
from trussium_operator.certs.reload import ReloadingTLS
from trussium_operator.certs.rotation import Lifetimes
from trussium_operator.certs.selfmanaged import SelfManaged

pytestmark = pytest.mark.api

WARNING = "seen by the certs test webhook"
SECRET = "trussium-webhook-tls"
CA_SECRET = "trussium-webhook-ca"


async def review(request: web.Request) -> web.Response:
    uid = (await request.json())["request"]["uid"]
    answer = {"uid": uid, "allowed": True, "warnings": [WARNING]}
    return web.json_response(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}
    )


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def config_name(plane: ControlPlane) -> Iterator[str]:
    name = f"certs-served-{secrets.token_hex(4)}"
    yield name
    plane.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[web.AppRunner, Path]]:
    app = web.Application()
    app.router.add_post("/review", review)
    runner = web.AppRunner(app)
    await runner.setup()
    yield runner, tmp_path / "tls"
    await runner.cleanup()


def register(plane: ControlPlane, name: str, namespace: str, port: int) -> None:
    """A Fail-policy hook on ConfigMap creation in `namespace` only."""
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "configmaps.certs-test.trussium.invalid",
                "clientConfig": {"url": f"https://127.0.0.1:{port}/review"},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["configmaps"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "timeoutSeconds": 5,
                "admissionReviewVersions": ["v1"],
            }
        ],
    }
    plane.kubectl("apply", "-f", "-", input=json.dumps(config))


async def create_configmap(plane: ControlPlane, namespace: str) -> str:
    """Create a ConfigMap; returns kubectl's stderr (where warnings go)."""
    name = f"probe-{secrets.token_hex(4)}"
    result = await asyncio.to_thread(
        plane.kubectl, "-n", namespace, "create", "configmap", name, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stderr


class Stream:
    """ConfigMaps created one after another through the Fail-policy hook, counting failures."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        self.plane, self.namespace = plane, namespace
        self.results: list[str | None] = []  # None: reviewed; else the failure
        self._answered = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            name = f"probe-{secrets.token_hex(4)}"
            answer = await asyncio.to_thread(
                self.plane.kubectl, "-n", self.namespace, "create", "configmap", name, check=False
            )
            reviewed = answer.returncode == 0 and WARNING in answer.stderr
            async with self._answered:
                self.results.append(None if reviewed else answer.stderr or answer.stdout)
                self._answered.notify_all()

    def __enter__(self) -> Stream:
        self._task = asyncio.create_task(self._run())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()

    async def past(self, count: int) -> None:
        """Until `count` more reviews have been answered."""
        target = len(self.results) + count
        async with asyncio.timeout(60), self._answered:
            await self._answered.wait_for(lambda: len(self.results) >= target)


async def test_api_server_trusts_the_webhook_through_a_ca_rotation(
    api_client: client.ApiClient,
    plane: ControlPlane,
    namespace: str,
    config_name: str,
    server: tuple[web.AppRunner, Path],
) -> None:
    """The controller's side (SelfManaged) with a settable clock, the kubelet's
    (SecretMount, synced when the test says so) and the webhook's (ReloadingTLS),
    while the API server reviews a stream of requests through the injected bundle.
    With `Lifetimes.propagation` at 0 the old CA leaves too early and 3 of 20 fail."""
    runner, cert_dir = server
    now = datetime.now(UTC)
    # Start 1300 days back: the CA issued then is still valid but due for renewal now,
    # and so is its serving certificate (long-lived here, so that it has not expired).
    clock = Clock(now - timedelta(days=1300))
    keeper = SelfManaged(
        api_client,
        namespace=namespace,
        secret_name=SECRET,
        ca_secret_name=CA_SECRET,
        dns_names=["localhost"],
        ip_addresses=["127.0.0.1"],
        webhook_config_names=[config_name],
        lifetimes=Lifetimes(serving=timedelta(days=1500)),
        clock=clock,
    )
    assert not await keeper.ensure()  # no webhook configuration yet: the Secrets only
    mount = SecretMount(plane, namespace, SECRET, cert_dir)
    assert mount.sync()
    tls = ReloadingTLS(cert_dir)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.context)
    await site.start()
    register(plane, config_name, namespace, runner.addresses[0][1])
    assert await keeper.ensure()
    old_ca = decode_certificates(await bundle(plane, config_name))[0]
    for _ in range(40):  # until the API server has seen the configuration
        if WARNING in await create_configmap(plane, namespace):
            break
        await asyncio.sleep(0.25)
    else:
        pytest.fail("the API server never called the webhook")

    with Stream(plane, namespace) as stream:
        await stream.past(3)
        clock.now = now - timedelta(hours=3)  # CA renewed: both trusted, old one signs
        assert await keeper.ensure()
        new_ca, kept = decode_certificates(await bundle(plane, config_name))
        assert kept == old_ca
        await stream.past(3)

        clock.now = now - timedelta(hours=2)  # the new CA signs the serving certificate
        assert await keeper.ensure()
        await stream.past(3)  # the pod has not seen it yet: it still serves the old one
        port = runner.addresses[0][1]
        assert is_issued_by(await presented(port), old_ca)
        assert mount.sync()  # the kubelet refreshes the volume, the webhook reloads
        assert tls.reload()
        assert is_issued_by(await presented(port), new_ca)
        await stream.past(3)

        clock.now = now  # served everywhere for long enough: the old CA leaves
        assert await keeper.ensure()
        assert decode_certificates(await bundle(plane, config_name)) == [new_ca]
        await stream.past(5)
    failures = [result for result in stream.results if result is not None]
    print(f"reviews during the rotation: {len(stream.results)}, failed: {len(failures)}")
    assert failures == []
    assert len(stream.results) >= 17


async def presented(port: int) -> x509.Certificate:
    """The certificate a new handshake with the webhook presents."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # only looked at, then judged by is_issued_by
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return x509.load_der_x509_certificate(der)


async def bundle(plane: ControlPlane, config_name: str) -> bytes:
    """The caBundle the API server trusts for the hook."""
    answer = await asyncio.to_thread(
        plane.kubectl,
        "get", "validatingwebhookconfiguration", config_name,
        "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}",
    )  # fmt: skip
    return base64.b64decode(answer.stdout)
