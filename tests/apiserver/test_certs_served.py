"""The real API server calls a webhook served with self-managed certificates,
before and after a CA rotation."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from devcluster import ControlPlane
from trussium_operator.certs.authority import decode_certificates, is_issued_by
from trussium_operator.certs.reload import ReloadingTLS
from trussium_operator.certs.selfmanaged import SelfManaged

pytestmark = pytest.mark.api

WARNING = "seen by the certs test webhook"


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


async def test_api_server_trusts_the_webhook_through_a_ca_rotation(
    api_client: client.ApiClient,
    plane: ControlPlane,
    namespace: str,
    config_name: str,
    server: tuple[web.AppRunner, Path],
) -> None:
    runner, cert_dir = server
    now = datetime.now(UTC)
    # Start 1300 days back: the CA issued then is still valid but due for renewal now.
    clock = Clock(now - timedelta(days=1300))
    manager = SelfManaged(
        api_client,
        namespace=namespace,
        secret_name="trussium-webhook-tls",
        dns_names=["localhost"],
        ip_addresses=["127.0.0.1"],
        webhook_config_names=[config_name],
        cert_dir=cert_dir,
        clock=clock,
    )
    assert not await manager.ensure()  # no webhook configuration yet: folder only
    clock.now = now - timedelta(hours=2)
    assert not await manager.ensure()  # CA renewed; serving certificate from the old CA
    tls = ReloadingTLS(cert_dir)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.context)
    await site.start()
    port = runner.addresses[0][1]
    register(plane, config_name, namespace, port)
    assert await manager.ensure()

    old_ca, new_ca = reversed(decode_certificates((cert_dir / "ca.crt").read_bytes()))
    assert is_issued_by(tls.certificate, old_ca)
    for _ in range(40):  # until the API server has seen the configuration
        if WARNING in await create_configmap(plane, namespace):
            break
        await asyncio.sleep(0.25)
    else:
        pytest.fail("the API server never called the webhook")

    clock.now = now  # the new CA has been trusted for two hours: it signs now
    manager.on_files_changed = tls.reload
    assert await manager.ensure()
    assert is_issued_by(tls.certificate, new_ca)
    for _ in range(3):
        assert WARNING in await create_configmap(plane, namespace)
