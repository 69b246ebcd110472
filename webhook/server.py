"""`trussium-webhook serve`: wiring of TLS, the three HTTP servers, and shutdown.

Start order: the health server first (so the kubelet sees a live process whose
/readyz says why it is not ready yet), the metrics server
(`cmdline/secure_metrics.py`), then the certificate material, then the
HTTPS admission server. On SIGTERM /readyz turns 503, admissions are still answered
for `shutdown_delay` seconds (while Service endpoints drop this pod), then the
listener closes and in-flight admissions get `shutdown_timeout` seconds.
"""

import asyncio
import logging
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp
from aiohttp import web
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trussium_operator.certs.authority import CertificateError, service_dns_names
from trussium_operator.certs.inject import ConflictError, describe
from trussium_operator.certs.reload import ReloadingTLS
from trussium_operator.certs.selfmanaged import SelfManaged
from trussium_operator.cmdline.addresses import split_address
from trussium_operator.cmdline.health import DISABLED
from trussium_operator.cmdline.kubeconfig import new_api_client
from trussium_operator.cmdline.limits import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_BUDGET_WAIT_SECONDS,
    DEFAULT_LIMITS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MEMORY_BUDGET_BYTES,
    ConnectionLimits,
)
from trussium_operator.cmdline.listener import Listener, listen
from trussium_operator.cmdline.options import ConfigurationError
from trussium_operator.cmdline.secure_metrics import MetricsOptions, metrics_endpoint
from trussium_operator.cmdline.stopping import stop_on_signals, until_stopped
from trussium_operator.common.constants import (
    WEBHOOK_CONFIG_NAME,
    WEBHOOK_SECRET_NAME,
    WEBHOOK_SERVICE_NAME,
)
from trussium_operator.webhook.app import AdmissionSettings, create_admission_app, create_health_app
from trussium_operator.webhook.budget import MemoryBudget
from trussium_operator.webhook.metrics import WebhookMetrics
from trussium_operator.webhook.secret_names import secret_names_lister

CertMode = Literal["self-managed", "files"]
SELF_MANAGED_RETRY_SECONDS = 5.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeOptions:
    operator_username: str
    bind_address: str = "0.0.0.0:9443"
    health_bind_address: str = "0.0.0.0:8081"
    metrics: MetricsOptions = field(default_factory=MetricsOptions)
    cert_mode: CertMode = "self-managed"
    cert_dir: Path | None = None
    namespace: str = ""
    secret_name: str = WEBHOOK_SECRET_NAME
    service_name: str = WEBHOOK_SERVICE_NAME
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()
    webhook_config_names: tuple[str, ...] = (WEBHOOK_CONFIG_NAME,)
    kubeconfig: str | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET_BYTES
    budget_wait: float = DEFAULT_BUDGET_WAIT_SECONDS
    limits: ConnectionLimits = DEFAULT_LIMITS
    body_timeout: float = DEFAULT_BODY_TIMEOUT_SECONDS
    # Warn about referenced Secrets that do not exist (needs `list secrets`).
    secret_lookup: bool = False
    shutdown_delay: float = 5.0
    shutdown_timeout: float = 20.0
    tls_poll_seconds: float = 5.0


@dataclass
class _State:
    tls: ReloadingTLS | None = None
    stopping: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def ready(self) -> bool:
        return self.tls is not None and not self.stopping


async def serve(options: ServeOptions, stop: asyncio.Event | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or `stop` is set)."""
    stop = stop or stop_on_signals()
    if options.cert_mode == "self-managed" and not options.namespace:
        raise ConfigurationError("--cert-mode self-managed needs --namespace (or POD_NAMESPACE)")
    if options.cert_mode == "files" and options.cert_dir is None:
        raise ConfigurationError("--cert-mode files needs --cert-dir")
    metrics = WebhookMetrics()
    state = _State()
    api_client = await _api_client(options.kubeconfig)
    if options.cert_mode == "self-managed" and api_client is None:
        raise ConfigurationError("--cert-mode self-managed needs access to the API server")
    endpoint = metrics_endpoint(options.metrics, metrics.registry, lambda: api_client)
    health = await start_site(
        create_health_app(state.ready),
        options.health_bind_address,
        limits=options.limits,
        metrics=metrics,
    )
    metrics_listener = (
        await start_site(
            endpoint.app,
            options.metrics.address,
            endpoint.ssl_context,
            limits=options.limits,
            metrics=metrics,
        )
        if options.metrics.address != DISABLED
        else None
    )
    admission_runner: Listener | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="trussium-webhook-") as scratch:
            cert_dir = options.cert_dir or Path(scratch)
            await until_stopped(stop, _load_tls(options, state, api_client, cert_dir))
            if state.tls is None:  # stopped first
                return
            tls = state.tls
            metrics.certificate_expiry.set_function(lambda: tls.not_after.timestamp())
            settings = AdmissionSettings(
                operator_username=options.operator_username,
                max_request_bytes=options.max_request_bytes,
                body_timeout=options.body_timeout,
                budget=MemoryBudget(options.memory_budget_bytes, options.budget_wait),
                secret_names=(
                    secret_names_lister(api_client)
                    if api_client and options.secret_lookup
                    else None
                ),
            )
            admission_runner = await start_site(
                create_admission_app(settings, metrics),
                options.bind_address,
                tls.context,
                options.shutdown_timeout,
                limits=options.limits,
                metrics=metrics,
            )
            log.info(
                "serving admission reviews", extra={"fields": {"address": options.bind_address}}
            )
            await stop.wait()
    finally:
        state.stopping = True
        for task in state.tasks:
            task.cancel()
        await asyncio.gather(*state.tasks, return_exceptions=True)
        if admission_runner is not None:
            # Keep answering while endpoints drop this pod (readiness now fails),
            # then close the listener and let in-flight requests finish.
            await asyncio.sleep(options.shutdown_delay)
            await admission_runner.cleanup()
        if metrics_listener is not None:
            await metrics_listener.cleanup()
        await endpoint.close()
        await health.cleanup()
        if api_client is not None:
            await api_client.close()
        log.info("webhook stopped")


async def _load_tls(
    options: ServeOptions, state: _State, api_client: client.ApiClient | None, cert_dir: Path
) -> None:
    """Make the certificate folder current (self-managed mode), then load and watch it."""
    manager: SelfManaged | None = None
    if options.cert_mode == "self-managed" and api_client is not None:
        manager = SelfManaged(
            api_client,
            namespace=options.namespace,
            secret_name=options.secret_name,
            dns_names=[
                *service_dns_names(options.service_name, options.namespace),
                *options.dns_names,
            ],
            ip_addresses=options.ip_addresses,
            webhook_config_names=options.webhook_config_names,
            cert_dir=cert_dir,
        )
        await _retry(manager.ensure, "self-managed certificate")
    while True:  # a mounted Secret (cert-manager) may appear after the pod starts
        try:
            tls = ReloadingTLS(cert_dir, poll_seconds=options.tls_poll_seconds)
            break
        except CertificateError as error:
            log.warning(
                "waiting for a usable certificate",
                extra={"fields": {"cert_dir": str(cert_dir), "error": str(error)}},
            )
            await asyncio.sleep(options.tls_poll_seconds)
    state.tasks.append(asyncio.create_task(tls.run()))
    if manager is not None:
        manager.on_files_changed = tls.reload
        state.tasks.append(asyncio.create_task(manager.run()))
    state.tls = tls


async def _retry(attempt: Callable[[], Awaitable[Any]], what: str) -> None:
    while True:
        try:
            await attempt()
            return
        except (ApiException, ConflictError, aiohttp.ClientError, OSError) as error:
            log.warning(
                "%s not ready, retrying in %.0fs",
                what,
                SELF_MANAGED_RETRY_SECONDS,
                extra={"fields": {"error": f"{type(error).__name__}: {describe(error)}"}},
            )
            await asyncio.sleep(SELF_MANAGED_RETRY_SECONDS)


async def start_site(
    app: web.Application,
    address: str,
    ssl_context: ssl.SSLContext | None = None,
    shutdown_timeout: float = 5.0,
    *,
    limits: ConnectionLimits = DEFAULT_LIMITS,
    metrics: WebhookMetrics | None = None,
) -> Listener:
    """Serve `app` on HOST:PORT; the listener's cleanup() waits for in-flight requests."""
    host, port = split_address(address)
    return await listen(
        app,
        host,
        port,
        ssl_context=ssl_context,
        shutdown_timeout=shutdown_timeout,
        limits=limits,
        metrics=(metrics or WebhookMetrics()).connections,
    )


async def _api_client(kubeconfig: str | None) -> client.ApiClient | None:
    """The API client, or None without --kubeconfig when no other way works
    (files mode serves without the API server)."""
    try:
        return await new_api_client(kubeconfig)
    except ConfigurationError as error:
        if kubeconfig:
            raise
        log.info("no Kubernetes API access", extra={"fields": {"error": str(error)}})
        return None
