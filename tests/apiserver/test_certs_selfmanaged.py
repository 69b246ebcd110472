"""Self-managed certificates (kept by the controller) and caBundle injection on the
real API server."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import Encoding
from kubernetes_asyncio import client

from devcluster import ControlPlane
from trussium_operator.certs.authority import decode_certificates, is_issued_by
from trussium_operator.certs.inject import inject_ca_bundle
from trussium_operator.certs.rotation import rotate, serving_secret_data
from trussium_operator.certs.selfmanaged import SelfManaged
from trussium_operator.webhook.certs_cli import main_certs

pytestmark = pytest.mark.api

SECRET = "trussium-webhook-tls"
CA_SECRET = "trussium-webhook-ca"
DNS = ["trussium-webhook.ops.svc"]
IPS = ["127.0.0.1"]
KINDS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")


def webhook_configuration(kind: str, name: str) -> dict[str, Any]:
    """Two URL webhooks on a group nothing uses, so other tests are never intercepted."""
    webhook = {
        "clientConfig": {"url": "https://127.0.0.1:1/never"},
        "rules": [
            {
                "apiGroups": ["certs-test.trussium.invalid"],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["nothing"],
            }
        ],
        "failurePolicy": "Ignore",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {**webhook, "name": f"{n}.certs-test.trussium.invalid"} for n in ("one", "two")
        ],
    }


@pytest.fixture
def config_name(plane: ControlPlane) -> Iterator[str]:
    """A Mutating and a Validating configuration sharing one fresh name."""
    name = f"certs-test-{secrets.token_hex(4)}"
    items = [
        webhook_configuration(kind, name)
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    ]
    plane.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    yield name
    for kind in KINDS:
        plane.kubectl("delete", kind, name, "--ignore-not-found")


def ca_bundles(plane: ControlPlane, name: str) -> list[bytes]:
    """The decoded caBundle of every webhook of both configurations."""
    bundles = []
    for kind in KINDS:
        config = json.loads(plane.kubectl("get", kind, name, "-o", "json").stdout)
        bundles += [
            base64.b64decode(w["clientConfig"].get("caBundle", "")) for w in config["webhooks"]
        ]
    return bundles


def resource_versions(plane: ControlPlane, namespace: str, name: str) -> list[str]:
    versions = []
    for kind in KINDS:
        versions.append(
            plane.kubectl("get", kind, name, "-o", "jsonpath={.metadata.resourceVersion}").stdout
        )
    for secret in (SECRET, CA_SECRET):
        versions.append(
            plane.kubectl(
                "-n",
                namespace,
                "get",
                "secret",
                secret,
                "-o",
                "jsonpath={.metadata.resourceVersion}",
            ).stdout
        )
    return versions


def secret_data(plane: ControlPlane, namespace: str, name: str = SECRET) -> dict[str, bytes]:
    secret = json.loads(plane.kubectl("-n", namespace, "get", "secret", name, "-o", "json").stdout)
    assert secret["type"] == "kubernetes.io/tls"
    return {key: base64.b64decode(value) for key, value in secret["data"].items()}


class Clock:
    """A settable clock, so renewal happens now instead of in months."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def replica(
    api_client: client.ApiClient,
    namespace: str,
    config_name: str,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> SelfManaged:
    return SelfManaged(
        api_client,
        namespace=namespace,
        secret_name=SECRET,
        ca_secret_name=CA_SECRET,
        dns_names=DNS,
        ip_addresses=IPS,
        webhook_config_names=[config_name],
        clock=clock,
    )


async def test_replicas_starting_together_share_one_ca(
    api_client: client.ApiClient,
    plane: ControlPlane,
    namespace: str,
    config_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    replicas = [replica(api_client, namespace, config_name) for _ in range(4)]
    with caplog.at_level(logging.INFO, logger="trussium_operator.certs.selfmanaged"):
        assert await asyncio.gather(*(r.ensure() for r in replicas)) == [True] * 4
    # The race really happened: losers of the create read the winner's Secrets.
    assert "a Secret changed under us" in caplog.text

    authority = secret_data(plane, namespace, CA_SECRET)
    serving = secret_data(plane, namespace)
    assert len(decode_certificates(authority["ca.crt"])) == 1
    assert serving["ca.crt"] == authority["ca.crt"]
    ca = decode_certificates(authority["tls.crt"])[0]
    assert is_issued_by(decode_certificates(serving["tls.crt"])[0], ca)
    assert "ca.key" not in serving
    assert authority["tls.key"] not in serving.values(), "the CA key is not in the serving Secret"
    assert ca_bundles(plane, config_name) == [authority["ca.crt"]] * 4


async def test_a_second_pass_with_nothing_to_do_writes_nothing(
    api_client: client.ApiClient, plane: ControlPlane, namespace: str, config_name: str
) -> None:
    manager = replica(api_client, namespace, config_name)
    assert await manager.ensure()
    before = resource_versions(plane, namespace, config_name)
    assert await manager.ensure()
    assert resource_versions(plane, namespace, config_name) == before


async def test_ca_rotation_trusts_the_new_ca_first_and_drops_the_old_one_after(
    api_client: client.ApiClient, plane: ControlPlane, namespace: str, config_name: str
) -> None:
    clock = Clock()
    manager = replica(api_client, namespace, config_name, clock)
    assert await manager.ensure()
    old_ca = decode_certificates(secret_data(plane, namespace, CA_SECRET)["ca.crt"])[0]

    clock.now += timedelta(days=1300)  # less than a third of the CA's five years left
    assert await manager.ensure()
    bundle = secret_data(plane, namespace, CA_SECRET)["ca.crt"]
    new_ca, kept = decode_certificates(bundle)
    assert kept == old_ca
    assert ca_bundles(plane, config_name) == [bundle] * 4
    served = decode_certificates(secret_data(plane, namespace)["tls.crt"])[0]
    assert is_issued_by(served, old_ca)

    clock.now += timedelta(hours=2)  # the new CA has been trusted long enough
    assert await manager.ensure()
    served = decode_certificates(secret_data(plane, namespace)["tls.crt"])[0]
    assert is_issued_by(served, new_ca)
    assert ca_bundles(plane, config_name) == [bundle] * 4, "pods may still serve the old one"

    clock.now += timedelta(hours=2)  # every pod has the new serving certificate by now
    assert await manager.ensure()
    assert ca_bundles(plane, config_name) == [new_ca.public_bytes(Encoding.PEM)] * 4
    assert secret_data(plane, namespace)["ca.crt"] == new_ca.public_bytes(Encoding.PEM)


async def test_a_ca_from_before_adr_0029_is_replaced_once_and_trusted_until_unused(
    api_client: client.ApiClient, plane: ControlPlane, namespace: str, config_name: str
) -> None:
    """The layout the webhook wrote itself: one Secret with the CA key beside tls.key,
    readable by the network-facing pods. The first pass moves no key: it renews the CA,
    keeps the served certificate (the old CA stays trusted), and removes `ca.key`; the old
    CA leaves the bundle once nothing serves what it signed. Restarts renew nothing."""
    clock = Clock()
    legacy = rotate(None, None, dns_names=DNS, ip_addresses=IPS, now=clock.now)
    data = {
        **serving_secret_data(legacy.serving, legacy.authority),
        "ca.key": legacy.authority.signing_ca.private_key_pem,
    }
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET},
        "type": "kubernetes.io/tls",
        "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
    }
    plane.kubectl("-n", namespace, "create", "-f", "-", input=json.dumps(body))
    await inject_ca_bundle(api_client, [config_name], data["ca.crt"])
    old_ca = legacy.authority.signing_ca.certificate

    assert await replica(api_client, namespace, config_name, clock).ensure()
    serving = secret_data(plane, namespace)
    assert sorted(serving) == ["ca.crt", "tls.crt", "tls.key"]
    assert serving["tls.crt"] == data["tls.crt"], "the served certificate is kept"
    authority = secret_data(plane, namespace, CA_SECRET)
    kept_key = authority["tls.key"] == data["ca.key"]  # compared so, no key in a failure
    assert not kept_key, "the exposed key signs nothing more"
    new_ca, kept = decode_certificates(authority["ca.crt"])
    assert kept == old_ca, "the old CA stays trusted while its certificate is served"
    assert ca_bundles(plane, config_name) == [authority["ca.crt"]] * 4

    async def restarted() -> None:
        """A new replica (a restart) decides nothing new: no Secret or bundle written."""
        before = resource_versions(plane, namespace, config_name)
        assert await replica(api_client, namespace, config_name, clock).ensure()
        assert resource_versions(plane, namespace, config_name) == before

    clock.now += timedelta(minutes=30)
    await restarted()

    clock.now += timedelta(hours=1)  # the new CA has been trusted long enough
    assert await replica(api_client, namespace, config_name, clock).ensure()
    served = decode_certificates(secret_data(plane, namespace)["tls.crt"])[0]
    assert is_issued_by(served, new_ca)
    assert ca_bundles(plane, config_name) == [authority["ca.crt"]] * 4

    clock.now += timedelta(hours=2)  # every pod serves the new certificate by now
    assert await replica(api_client, namespace, config_name, clock).ensure()
    assert ca_bundles(plane, config_name) == [new_ca.public_bytes(Encoding.PEM)] * 4
    same_key = secret_data(plane, namespace, CA_SECRET)["tls.key"] == authority["tls.key"]
    assert same_key, "the new CA is kept"
    await restarted()


async def test_missing_webhook_configuration_still_writes_the_secrets(
    api_client: client.ApiClient, plane: ControlPlane, namespace: str
) -> None:
    manager = replica(api_client, namespace, f"absent-{secrets.token_hex(4)}")
    assert not await manager.ensure()
    assert "tls.key" in secret_data(plane, namespace)


def test_cli_inject_patches_both_kinds_once(
    plane: ControlPlane, config_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main_certs(["generate", "--out", str(tmp_path), "--ip-address", "127.0.0.1"]) == 0
    capsys.readouterr()
    inject = [
        "inject",
        "--kubeconfig",
        str(plane.kubeconfig),
        "--ca-file",
        str(tmp_path / "ca.crt"),
    ]
    assert main_certs([*inject, "--webhook-config-name", config_name]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"patched MutatingWebhookConfiguration/{config_name}",
        f"patched ValidatingWebhookConfiguration/{config_name}",
    ]
    assert ca_bundles(plane, config_name) == [(tmp_path / "ca.crt").read_bytes()] * 4

    assert main_certs([*inject, "--webhook-config-name", config_name]) == 0
    assert capsys.readouterr().out.strip() == "caBundle already up to date"

    assert main_certs([*inject, "--webhook-config-name", "no-such-configuration"]) == 1
    assert "no-such-configuration" in capsys.readouterr().err
