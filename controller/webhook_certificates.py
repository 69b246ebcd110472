"""The webhook's self-managed certificates, kept by the controller (docs/adr/0029).

The controller, not the network-facing webhook, holds the CA key and sets the
caBundles; the webhook pods only mount the serving Secret. The work runs on
every replica from start-up, beside the informers and independent of the
leader Lease: its writes are compare-and-swap on resourceVersion and converge
on one winner, so they need no lock, and the webhook's first certificate
waits for neither the caches nor a Lease handover.
"""

from dataclasses import dataclass

from kubernetes_asyncio import client

from trussium_operator.certs.authority import CertificateError, service_dns_names
from trussium_operator.certs.selfmanaged import SelfManaged
from trussium_operator.cmdline.options import ConfigurationError


@dataclass(frozen=True)
class WebhookCertificates:
    """Where the webhook's certificates live and which names they must carry."""

    namespace: str
    secret_name: str
    ca_secret_name: str
    service_name: str
    config_names: tuple[str, ...]
    extra_dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()

    def keeper(self, api_client: client.ApiClient) -> SelfManaged:
        """The loop that keeps them; a bad name or address is a ConfigurationError."""
        try:
            return SelfManaged(
                api_client,
                namespace=self.namespace,
                secret_name=self.secret_name,
                ca_secret_name=self.ca_secret_name,
                dns_names=[
                    *service_dns_names(self.service_name, self.namespace),
                    *self.extra_dns_names,
                ],
                ip_addresses=self.ip_addresses,
                webhook_config_names=self.config_names,
            )
        except CertificateError as error:
            raise ConfigurationError(f"webhook certificates: {error}") from None
