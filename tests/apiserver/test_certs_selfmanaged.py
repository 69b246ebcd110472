"""Self-managed certificates and caBundle injection on the real API server."""

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
from kubernetes_asyncio import client

from devcluster import ControlPlane
from trussium_operator.certs.authority import decode_certificates, is_issued_by
from trussium_operator.certs.cli import main_certs
from trussium_operator.certs.selfmanaged import SelfManaged

pytestmark = pytest.mark.api

SECRET = "trussium-webhook-tls"
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
    versions.append(
        plane.kubectl(
            "-n", namespace, "get", "secret", SECRET, "-o", "jsonpath={.metadata.resourceVersion}"
        ).stdout
    )
    return versions


def secret_data(plane: ControlPlane, namespace: str) -> dict[str, bytes]:
    secret = json.loads(
        plane.kubectl("-n", namespace, "get", "secret", SECRET, "-o", "json").stdout
    )
    assert secret["type"] == "kubernetes.io/tls"
    return {key: base64.b64decode(value) for key, value in secret["data"].items()}


def file_stamps(folder: Path) -> dict[str, int]:
    return {path.name: path.stat().st_mtime_ns for path in folder.iterdir()}


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
    cert_dir: Path,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> SelfManaged:
    return SelfManaged(
        api_client,
        namespace=namespace,
        secret_name=SECRET,
        dns_names=DNS,
        ip_addresses=IPS,
        webhook_config_names=[config_name],
        cert_dir=cert_dir,
        clock=clock,
    )


async def test_replicas_starting_together_share_one_ca(
    api_client: client.ApiClient,
    plane: ControlPlane,
    namespace: str,
    config_name: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    replicas = [replica(api_client, namespace, config_name, tmp_path / str(i)) for i in range(4)]
    with caplog.at_level(logging.INFO, logger="trussium_operator.certs.selfmanaged"):
        assert await asyncio.gather(*(r.ensure() for r in replicas)) == [True] * 4
    # The race really happened: losers of the create adopted the winner's Secret.
    assert "another replica updated Secret" in caplog.text

    stored = secret_data(plane, namespace)
    for i in range(4):
        assert (tmp_path / str(i) / "ca.crt").read_bytes() == stored["ca.crt"]
        assert (tmp_path / str(i) / "tls.crt").read_bytes() == stored["tls.crt"]
    assert len(decode_certificates(stored["ca.crt"])) == 1
    assert ca_bundles(plane, config_name) == [stored["ca.crt"]] * 4


async def test_a_second_pass_with_nothing_to_do_writes_nothing(
    api_client: client.ApiClient,
    plane: ControlPlane,
    namespace: str,
    config_name: str,
    tmp_path: Path,
) -> None:
    manager = replica(api_client, namespace, config_name, tmp_path)
    assert await manager.ensure()
    before = resource_versions(plane, namespace, config_name)
    files_before = file_stamps(tmp_path)
    assert await manager.ensure()
    assert resource_versions(plane, namespace, config_name) == before
    assert file_stamps(tmp_path) == files_before


async def test_ca_rotation_publishes_both_cas_before_serving_from_the_new_one(
    api_client: client.ApiClient,
    plane: ControlPlane,
    namespace: str,
    config_name: str,
    tmp_path: Path,
) -> None:
    clock = Clock()
    manager = replica(api_client, namespace, config_name, tmp_path, clock)
    assert await manager.ensure()
    old_ca = decode_certificates(secret_data(plane, namespace)["ca.crt"])[0]

    clock.now += timedelta(days=1300)  # less than a third of the CA's five years left
    assert await manager.ensure()
    stored = secret_data(plane, namespace)
    new_ca, kept = decode_certificates(stored["ca.crt"])
    assert kept == old_ca
    assert ca_bundles(plane, config_name) == [stored["ca.crt"]] * 4
    served = decode_certificates((tmp_path / "tls.crt").read_bytes())[0]
    assert is_issued_by(served, old_ca)

    clock.now += timedelta(hours=2)  # the new CA has been trusted long enough
    assert await manager.ensure()
    served = decode_certificates((tmp_path / "tls.crt").read_bytes())[0]
    assert is_issued_by(served, new_ca)
    assert secret_data(plane, namespace)["tls.crt"] == (tmp_path / "tls.crt").read_bytes()
    assert ca_bundles(plane, config_name) == [stored["ca.crt"]] * 4


async def test_running_replica_follows_a_rotation_by_another(
    api_client: client.ApiClient, namespace: str, config_name: str, tmp_path: Path
) -> None:
    follower = replica(api_client, namespace, config_name, tmp_path / "follower")
    changed = asyncio.Event()
    follower.on_files_changed = changed.set
    assert await follower.ensure()
    changed.clear()
    task = asyncio.create_task(follower.run())
    try:
        clock = Clock()
        clock.now += timedelta(days=300)  # the serving certificate is due
        assert await replica(
            api_client, namespace, config_name, tmp_path / "leader", clock
        ).ensure()
        async with asyncio.timeout(30):
            await changed.wait()
    finally:
        task.cancel()
    leader_cert = (tmp_path / "leader" / "tls.crt").read_bytes()
    assert (tmp_path / "follower" / "tls.crt").read_bytes() == leader_cert


async def test_missing_webhook_configuration_still_writes_the_folder(
    api_client: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    manager = replica(api_client, namespace, f"absent-{secrets.token_hex(4)}", tmp_path)
    assert not await manager.ensure()
    assert (tmp_path / "tls.crt").exists()


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
