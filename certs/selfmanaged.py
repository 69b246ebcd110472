"""Self-managed certificates: the CA and serving Secrets, and the caBundles.

Run by the controller (docs/adr/0029), never by the webhook pods, which only
mount the serving Secret. Each pass reads both Secrets, asks
`rotation.rotate` what they should hold next, and writes only what differs,
in an order that keeps the API server trusting whatever a pod may serve: the
CA Secret first (its key is never lost), then the caBundles, then the
serving Secret. Writes are optimistic: a create that finds the Secret
(409 AlreadyExists) or an update carrying a stale resourceVersion (409
Conflict) reads and decides again, so concurrent writers converge on one CA
without a lock. A serving Secret written before ADR 0029 still holds the CA
key: its CA is adopted and at once renewed (a webhook pod could read that
key), and the key leaves the serving Secret. The renewal is decided only
while the CA Secret does not exist, so it happens once. Key material never
reaches a log line.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trussium_operator.certs.authority import CertificateError, KeyPair, parse_ip_addresses
from trussium_operator.certs.inject import (
    ConflictError,
    WebhookConfigurationNotFoundError,
    describe,
    inject_ca_bundle,
)
from trussium_operator.certs.rotation import (
    DEFAULT_LIFETIMES,
    LEGACY_CA_KEY_KEY,
    Authority,
    Lifetimes,
    rotate,
    serving_from_secret_data,
    serving_secret_data,
)

DEFAULT_CHECK_SECONDS = 60.0
RETRY_SECONDS = 5.0
_MAX_WRITE_ATTEMPTS = 5
_SECRET_TYPE = "kubernetes.io/tls"
_SECRET_LABELS = {"app.kubernetes.io/component": "webhook-certificates"}

log = logging.getLogger(__name__)
_T = TypeVar("_T")


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SelfManaged:
    """Keeps the CA Secret, the serving Secret and the caBundles in step.

    `ensure()` is one pass; `run()` repeats it every `check_seconds` until cancelled.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        namespace: str,
        secret_name: str,
        ca_secret_name: str,
        dns_names: Sequence[str],
        ip_addresses: Sequence[str] = (),
        webhook_config_names: Sequence[str],
        lifetimes: Lifetimes = DEFAULT_LIFETIMES,
        check_seconds: float = DEFAULT_CHECK_SECONDS,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._core = client.CoreV1Api(api_client)
        self._api_client = api_client
        self.namespace = namespace
        self.secret_name = secret_name
        self.ca_secret_name = ca_secret_name
        self.dns_names = tuple(dns_names)
        self.ip_addresses = tuple(ip_addresses)
        self.webhook_config_names = tuple(webhook_config_names)
        self.lifetimes = lifetimes
        self.check_seconds = check_seconds
        self.clock = clock
        if not dns_names:
            raise CertificateError("self-managed certificates need at least one DNS name")
        if secret_name == ca_secret_name:
            raise CertificateError("the CA and serving Secrets need different names")
        parse_ip_addresses(ip_addresses)  # a bad flag fails here, not on a later renewal

    async def ensure(self) -> bool:
        """One pass. True when both Secrets and every caBundle are current.

        False when a webhook configuration does not exist yet (it is logged;
        the Secrets are written anyway so the pods can start). API errors raise.
        """
        for _ in range(_MAX_WRITE_ATTEMPTS):
            try:
                return await self._pass()
            except ApiException as error:
                if error.status != 409:
                    raise
                log.info("a Secret changed under us; reading both again")
        raise ConflictError(
            f"Secrets {self.ca_secret_name} and {self.secret_name} kept changing "
            f"during {_MAX_WRITE_ATTEMPTS} consecutive attempts"
        )

    async def run(self) -> None:
        """Re-check every `check_seconds` (sooner after a failure), until cancelled."""
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
                await asyncio.sleep(self.check_seconds)
            else:
                await asyncio.sleep(retry)
                retry = min(retry * 2, self.check_seconds)

    async def _pass(self) -> bool:
        ca_secret = await self._read(self.ca_secret_name)
        serving_secret = await self._read(self.secret_name)
        serving_data = _decoded(serving_secret)
        ca_data = _decoded(ca_secret)
        rotation = rotate(
            self._authority(ca_data, serving_data),
            self._serving(serving_data),
            dns_names=self.dns_names,
            ip_addresses=self.ip_addresses,
            now=self.clock(),
            lifetimes=self.lifetimes,
            exposed=not ca_data and LEGACY_CA_KEY_KEY in serving_data,
        )
        if rotation.changed:
            log.info("webhook certificates: %s", "; ".join(rotation.reasons))
        wanted_ca = rotation.authority.to_secret_data()
        if ca_data != wanted_ca:
            await self._write(ca_secret, self.ca_secret_name, wanted_ca)
        complete = True
        try:
            await inject_ca_bundle(
                self._api_client, self.webhook_config_names, rotation.authority.bundle_pem
            )
        except WebhookConfigurationNotFoundError as error:
            log.warning("caBundle not injected yet: %s", error)
            complete = False
        wanted_serving = serving_secret_data(rotation.serving, rotation.authority)
        if serving_data != wanted_serving:
            if LEGACY_CA_KEY_KEY in serving_data:
                log.info(
                    "the CA key leaves Secret %s for %s", self.secret_name, self.ca_secret_name
                )
            await self._write(serving_secret, self.secret_name, wanted_serving)
        return complete

    def _authority(
        self, ca_data: Mapping[str, bytes], serving_data: Mapping[str, bytes]
    ) -> Authority | None:
        if ca_data:
            return _parsed(Authority.from_secret_data, ca_data, self.ca_secret_name)
        if LEGACY_CA_KEY_KEY in serving_data:
            return _parsed(Authority.from_legacy_secret_data, serving_data, self.secret_name)
        return None

    def _serving(self, data: Mapping[str, bytes]) -> KeyPair | None:
        return _parsed(serving_from_secret_data, data, self.secret_name) if data else None

    async def _read(self, name: str) -> Any:
        try:
            return await self._core.read_namespaced_secret(name, self.namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    async def _write(self, secret: Any, name: str, data: Mapping[str, bytes]) -> None:
        """Create, or replace the data exactly (dropping any other key) under the read
        resourceVersion; a 409 from either propagates to `ensure`."""
        encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
        if secret is None:
            body = client.V1Secret(
                metadata=client.V1ObjectMeta(name=name, labels=_SECRET_LABELS),
                type=_SECRET_TYPE,
                data=encoded,
            )
            await self._core.create_namespaced_secret(self.namespace, body)
        else:
            secret.data = encoded
            await self._core.replace_namespaced_secret(name, self.namespace, secret)
        log.info("Secret %s/%s written", self.namespace, name)


def _decoded(secret: Any) -> dict[str, bytes]:
    if secret is None or not secret.data:
        return {}
    return {key: base64.b64decode(value) for key, value in secret.data.items()}


def _parsed(
    parse: Callable[[Mapping[str, bytes]], _T], data: Mapping[str, bytes], name: str
) -> _T | None:
    try:
        return parse(data)
    except (CertificateError, ValueError) as error:
        log.warning("Secret %s holds unusable material, replacing it: %s", name, error)
        return None
