"""Put a CA bundle into the `caBundle` of webhook configurations.

Both kinds are looked up under each name (the chart gives the Mutating and
the Validating configuration the same name). Only webhooks whose bundle
differs are patched, by a strategic merge patch keyed by webhook name that
carries the read resourceVersion: a concurrent edit (often another replica
injecting the same bundle) makes it fail with 409 instead of being
overwritten, and the configuration is read and compared again.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

log = logging.getLogger(__name__)

MUTATING = "MutatingWebhookConfiguration"
VALIDATING = "ValidatingWebhookConfiguration"
_MAX_ATTEMPTS = 5


class WebhookConfigurationNotFoundError(LookupError):
    pass


class ConflictError(RuntimeError):
    """The object kept changing under us; the next pass tries again."""


async def inject_ca_bundle(
    api_client: client.ApiClient, config_names: Iterable[str], ca_pem: bytes
) -> list[str]:
    """Patch every configuration named in `config_names` whose bundle differs.

    Returns the patched configurations as "Kind/name". Raises
    WebhookConfigurationNotFoundError when a name matches neither kind.
    """
    api = client.AdmissionregistrationV1Api(api_client)
    encoded = base64.b64encode(ca_pem).decode()
    readers = {
        MUTATING: (
            api.read_mutating_webhook_configuration,
            api.patch_mutating_webhook_configuration,
        ),
        VALIDATING: (
            api.read_validating_webhook_configuration,
            api.patch_validating_webhook_configuration,
        ),
    }
    patched: list[str] = []
    for name in config_names:
        outcomes = {
            kind: await _inject_one(*calls, name, encoded) for kind, calls in readers.items()
        }
        if all(outcome is None for outcome in outcomes.values()):
            raise WebhookConfigurationNotFoundError(
                f"no {MUTATING} or {VALIDATING} named {name!r} exists"
            )
        for kind, outcome in outcomes.items():
            if outcome:
                patched.append(f"{kind}/{name}")
                log.info("caBundle updated in %s/%s", kind, name)
    return patched


async def _inject_one(read: Any, patch: Any, name: str, encoded: str) -> bool | None:
    """True when patched, False when already current, None when it does not exist."""
    for _ in range(_MAX_ATTEMPTS):
        try:
            config = await read(name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        body = ca_bundle_patch(config, encoded)
        if body is None:
            return False
        try:
            await patch(name, body)
        except ApiException as error:
            if error.status != 409:
                raise
            continue
        return True
    raise ConflictError(f"webhook configuration {name!r} changed during {_MAX_ATTEMPTS} attempts")


def ca_bundle_patch(config: Any, encoded_bundle: str) -> dict[str, Any] | None:
    """The patch setting every webhook's caBundle, or None when all already match."""
    stale = [
        webhook.name
        for webhook in config.webhooks or []
        if webhook.client_config.ca_bundle != encoded_bundle
    ]
    if not stale:
        return None
    return {
        "metadata": {"resourceVersion": config.metadata.resource_version},
        "webhooks": [
            {"name": name, "clientConfig": {"caBundle": encoded_bundle}} for name in stale
        ],
    }


def describe(error: Exception) -> str:
    """An error for a log line: status and reason only for API errors, whose
    full text includes response bodies and headers."""
    if isinstance(error, ApiException):
        return f"API server answered {error.status} {error.reason}"
    return str(error)
