"""Self-managed certificates: one Secret shared by every webhook replica.

Each pass reads the Secret, asks `rotation.rotate` what it should hold, and
writes only when that differs. Writes are optimistic: create (409
AlreadyExists: another replica won, use its material) or a patch carrying the
read resourceVersion (409 Conflict: re-read and decide again). All replicas
therefore converge on the winner's CA. The material then goes to the
certificate folder (picked up by the reloader) and the CA bundle to the
webhook configurations. Key material never reaches a log line.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from trussium_operator.certs.authority import CertificateError, parse_ip_addresses
from trussium_operator.certs.files import BundleFiles, write_bundle
from trussium_operator.certs.inject import (
    ConflictError,
    WebhookConfigurationNotFoundError,
    describe,
    inject_ca_bundle,
)
from trussium_operator.certs.rotation import DEFAULT_LIFETIMES, Lifetimes, TLSMaterial, rotate

DEFAULT_CHECK_SECONDS = 300.0
RETRY_SECONDS = 5.0
_MAX_WRITE_ATTEMPTS = 5
_SECRET_TYPE = "kubernetes.io/tls"
_SECRET_LABELS = {"app.kubernetes.io/component": "webhook-certificates"}

log = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SelfManaged:
    """Keeps the Secret, the certificate folder and the caBundles in step.

    Call `ensure()` once before serving (it writes the folder), then run
    `run()` as a task for renewals and other replicas' changes.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        namespace: str,
        secret_name: str,
        dns_names: Sequence[str],
        ip_addresses: Sequence[str] = (),
        webhook_config_names: Sequence[str],
        cert_dir: Path,
        lifetimes: Lifetimes = DEFAULT_LIFETIMES,
        check_seconds: float = DEFAULT_CHECK_SECONDS,
        clock: Callable[[], datetime] = _utc_now,
        on_files_changed: Callable[[], object] | None = None,
    ) -> None:
        self._core = client.CoreV1Api(api_client)
        self._api_client = api_client
        self.namespace = namespace
        self.secret_name = secret_name
        self.dns_names = tuple(dns_names)
        self.ip_addresses = tuple(ip_addresses)
        self.webhook_config_names = tuple(webhook_config_names)
        self.cert_dir = cert_dir
        self.lifetimes = lifetimes
        self.check_seconds = check_seconds
        self.clock = clock
        self.on_files_changed = on_files_changed
        self._resource_version: str | None = None
        if not dns_names:
            raise CertificateError("self-managed certificates need at least one DNS name")
        parse_ip_addresses(ip_addresses)  # a bad flag fails here, not on a later renewal

    async def ensure(self) -> bool:
        """One pass. True when the Secret, the folder and every caBundle are current.

        False when a webhook configuration does not exist yet (it is logged;
        the folder is written anyway so serving can start). API errors raise.
        """
        material = await self._converge_secret()
        files = BundleFiles(
            material.serving.certificate_pem,
            material.serving.private_key_pem,
            material.ca_bundle_pem,
        )
        if write_bundle(self.cert_dir, files) and self.on_files_changed is not None:
            self.on_files_changed()
        try:
            await inject_ca_bundle(
                self._api_client, self.webhook_config_names, material.ca_bundle_pem
            )
        except WebhookConfigurationNotFoundError as error:
            log.warning("caBundle not injected yet: %s", error)
            return False
        return True

    async def run(self) -> None:
        """Re-check every `check_seconds` and whenever the Secret changes, until cancelled."""
        retry = RETRY_SECONDS
        while True:
            try:
                complete = await self.ensure()
            except (ApiException, aiohttp.ClientError, ConflictError, OSError) as error:
                log.warning(
                    "certificate check failed, retrying in %.0fs: %s", retry, describe(error)
                )
                complete = False
            if complete:
                retry = RETRY_SECONDS
                await self._wait_for_secret_change(self.check_seconds)
            else:
                await asyncio.sleep(retry)
                retry = min(retry * 2, self.check_seconds)

    async def _converge_secret(self) -> TLSMaterial:
        for _ in range(_MAX_WRITE_ATTEMPTS):
            secret = await self._read_secret()
            rotation = rotate(
                self._material(secret),
                dns_names=self.dns_names,
                ip_addresses=self.ip_addresses,
                now=self.clock(),
                lifetimes=self.lifetimes,
            )
            if not rotation.changed:
                assert secret is not None  # rotate() changes anything when there is no Secret
                self._resource_version = secret.metadata.resource_version
                return rotation.material
            data = {
                key: base64.b64encode(value).decode()
                for key, value in rotation.material.to_secret_data().items()
            }
            try:
                written = await self._write_secret(secret, data)
            except ApiException as error:
                if error.status != 409:
                    raise
                log.info("another replica updated Secret %s first; re-reading", self.secret_name)
                continue
            self._resource_version = written.metadata.resource_version
            log.info(
                "Secret %s/%s updated: %s",
                self.namespace,
                self.secret_name,
                "; ".join(rotation.reasons),
            )
            return rotation.material
        raise ConflictError(
            f"Secret {self.namespace}/{self.secret_name} changed during "
            f"{_MAX_WRITE_ATTEMPTS} consecutive attempts"
        )

    async def _read_secret(self) -> Any:
        try:
            return await self._core.read_namespaced_secret(self.secret_name, self.namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    async def _write_secret(self, secret: Any, data: dict[str, str]) -> Any:
        if secret is None:
            body = client.V1Secret(
                metadata=client.V1ObjectMeta(name=self.secret_name, labels=_SECRET_LABELS),
                type=_SECRET_TYPE,
                data=data,
            )
            return await self._core.create_namespaced_secret(self.namespace, body)
        patch = {"metadata": {"resourceVersion": secret.metadata.resource_version}, "data": data}
        return await self._core.patch_namespaced_secret(self.secret_name, self.namespace, patch)

    def _material(self, secret: Any) -> TLSMaterial | None:
        if secret is None or not secret.data:
            return None
        try:
            decoded = {key: base64.b64decode(value) for key, value in secret.data.items()}
            return TLSMaterial.from_secret_data(decoded)
        except (CertificateError, ValueError) as error:
            log.warning(
                "Secret %s holds unusable material, replacing it: %s", self.secret_name, error
            )
            return None

    async def _wait_for_secret_change(self, seconds: float) -> None:
        """Return when another writer changes the Secret, or after `seconds`."""
        try:
            async with watch.Watch() as watcher:
                stream = watcher.stream(
                    self._core.list_namespaced_secret,
                    self.namespace,
                    field_selector=f"metadata.name={self.secret_name}",
                    resource_version=self._resource_version,
                    timeout_seconds=max(1, math.ceil(seconds)),
                )
                async for event in stream:
                    if event["object"].metadata.resource_version != self._resource_version:
                        return
        except (ApiException, aiohttp.ClientError) as error:
            # An expired resourceVersion or a dropped connection: re-check now,
            # but not in a tight loop.
            log.info("watch on Secret %s ended: %s", self.secret_name, describe(error))
            await asyncio.sleep(RETRY_SECONDS)
