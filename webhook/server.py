"""`trussium-webhook serve`: wiring of TLS, the three HTTP servers, and shutdown.

Start order: the health server first (so the kubelet sees a live process whose
/readyz says why it is not ready yet), the metrics server
(`serving/secure_metrics.py`), then the certificate material, then the
HTTPS admission server. On SIGTERM /readyz turns 503, admissions are still answered
for `shutdown_delay` seconds (while Service endpoints drop this pod), each with
`Connection: close`, then the listener closes and in-flight admissions get
`shutdown_timeout` seconds.
"""

import asyncio
import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web
from kubernetes_asyncio import client

from trussium_operator.certs.reload import ReloadingTLS
from trussium_operator.certs.served import CertificateError
from trussium_operator.cmdline.kubeconfig import new_api_client
from trussium_operator.cmdline.options import ConfigurationError, env_name
from trussium_operator.cmdline.stopping import stop_on_signals, until_stopped
from trussium_operator.serving.addresses import DISABLED, split_address
from trussium_operator.serving.limits import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_BUDGET_WAIT_SECONDS,
    DEFAULT_LIMITS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MEMORY_BUDGET_BYTES,
    ConnectionLimits,
)
from trussium_operator.serving.listener import Listener, listen
from trussium_operator.serving.metrics_server import metrics_endpoint
from trussium_operator.serving.secure_metrics import MetricsOptions
from trussium_operator.webhook.app import AdmissionSettings, create_admission_app, create_health_app
from trussium_operator.webhook.budget import MemoryBudget
from trussium_operator.webhook.metrics import WebhookMetrics
from trussium_operator.webhook.secret_access import secret_access_reviewer
from trussium_operator.webhook.secret_names import secret_names_lister

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeOptions:
    operator_username: str
    # tls.crt and tls.key: the mounted serving Secret (docs/certificates.md).
    cert_dir: Path
    bind_address: str = "0.0.0.0:9443"
    health_bind_address: str = "0.0.0.0:8081"
    metrics: MetricsOptions = field(default_factory=MetricsOptions)
    kubeconfig: str | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET_BYTES
    budget_wait: float = DEFAULT_BUDGET_WAIT_SECONDS
    limits: ConnectionLimits = DEFAULT_LIMITS
    body_timeout: float = DEFAULT_BODY_TIMEOUT_SECONDS
    # Warn about referenced Secrets that do not exist (needs `list secrets`).
    secret_lookup: bool = False
    # Refuse references to Secrets the requester may not get (SubjectAccessReview).
    authorize_secret_references: bool = True
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
    metrics = WebhookMetrics()
    state = _State()
    # Only the access reviews (of Secret references, of metrics scrapers) and the opt-in
    # missing-Secret warning talk to the API server.
    reviews = options.metrics.secure and options.metrics.address != DISABLED
    needs_api = options.secret_lookup or options.authorize_secret_references or reviews
    api_client = await _api_client(options.kubeconfig) if needs_api else None
    if api_client is None and options.authorize_secret_references:
        raise ConfigurationError(
            "authorizing Secret references needs the API server (SubjectAccessReview): give "
            "a kubeconfig, or set --no-authorize-secret-references "
            f"({env_name('--authorize-secret-references')}=false)"
        )
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
        await until_stopped(stop, _load_tls(options, state))
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
                secret_names_lister(api_client) if api_client and options.secret_lookup else None
            ),
            secret_access=(
                secret_access_reviewer(api_client)
                if api_client and options.authorize_secret_references
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
        log.info("serving admission reviews", extra={"fields": {"address": options.bind_address}})
        await stop.wait()
    finally:
        state.stopping = True
        for task in state.tasks:
            task.cancel()
        await asyncio.gather(*state.tasks, return_exceptions=True)
        if admission_runner is not None:
            # Keep answering while endpoints drop this pod (readiness now fails),
            # each answer closing its kept-alive connection, then close the
            # listener and let in-flight requests finish (docs/adr/0032).
            admission_runner.drain()
            await asyncio.sleep(options.shutdown_delay)
            await admission_runner.cleanup()
        if metrics_listener is not None:
            await metrics_listener.cleanup()
        await endpoint.close()
        await health.cleanup()
        if api_client is not None:
            await api_client.close()
        log.info("webhook stopped")


async def _load_tls(options: ServeOptions, state: _State) -> None:
    """Load the certificate folder, waiting until it is usable, then watch it."""
    while True:  # a mounted Secret may be filled after the pod starts
        try:
            tls = ReloadingTLS(options.cert_dir, poll_seconds=options.tls_poll_seconds)
            break
        except CertificateError as error:
            log.warning(
                "waiting for a usable certificate",
                extra={"fields": {"cert_dir": str(options.cert_dir), "error": str(error)}},
            )
            await asyncio.sleep(options.tls_poll_seconds)
    state.tasks.append(asyncio.create_task(tls.run()))
    state.tls = tls


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
