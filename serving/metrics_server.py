"""The /metrics server of both programs, as `serving/secure_metrics.py`'s flags ask:
behind the API server's reviews (`serving/metrics_auth.py`) over HTTPS, or plain HTTP.

A module of its own so that `validate`, which builds the same parser, starts
without aiohttp, the Kubernetes client or the certificate machinery.
"""

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from trussium_operator.certs.reload import ReloadingTLS, self_signed_context
from trussium_operator.cmdline.options import ConfigurationError, env_name
from trussium_operator.serving.addresses import DISABLED
from trussium_operator.serving.health import metrics_app
from trussium_operator.serving.metrics_auth import ApiReviews, MetricsAuth
from trussium_operator.serving.secure_metrics import MetricsOptions


@dataclass
class MetricsEndpoint:
    """The application to serve on `options.address`, with its TLS context (None:
    plain HTTP) and the certificate reloader's task, stopped by `close()`."""

    app: web.Application
    ssl_context: ssl.SSLContext | None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def metrics_endpoint(
    options: MetricsOptions,
    registry: CollectorRegistry,
    api_client: Callable[[], client.ApiClient | None],
) -> MetricsEndpoint:
    """/metrics of `registry`, behind the reviews unless plain HTTP was asked for
    (or nothing is served); `api_client` is asked for only when the reviews are."""
    if not options.secure or options.address == DISABLED:
        return MetricsEndpoint(metrics_app(registry), None)
    api = api_client()
    if api is None:
        raise ConfigurationError(
            "secure metrics need the API server (TokenReview, SubjectAccessReview): "
            f"give a kubeconfig, or set --metrics-secure=false ({env_name('--metrics-secure')})"
        )
    app = metrics_app(registry, middlewares=[MetricsAuth(ApiReviews(api)).middleware()])
    if options.cert_path is None:
        context, _ = self_signed_context()
        return MetricsEndpoint(app, context)
    tls = ReloadingTLS(options.cert_path, self_signed_until_present=True)
    return MetricsEndpoint(app, tls.context, [asyncio.create_task(tls.run())])
