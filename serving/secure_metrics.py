"""The /metrics endpoint of both programs, served as the Go operator serves its own
(docs/adr/0026): HTTPS on 8443, each request reviewed by the API server
(`serving/metrics_auth.py`); plain HTTP only with `--metrics-secure=false`.

The certificate is one made at start (self-signed, as controller-runtime
makes one) unless `--metrics-cert-path` names a folder with `tls.crt` and
`tls.key` (a mounted Secret, cert-manager's), which is then reloaded when
the files change. A folder still empty at start is served a self-signed
certificate until the files appear: the chart mounts the webhook's serving
Secret into the controller as an optional volume, and in `selfManaged` mode
the controller itself writes that Secret after it starts (docs/adr/0039).
"""

import argparse
import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from trussium_operator.certs.reload import ReloadingTLS, self_signed_context
from trussium_operator.cmdline.options import (
    ConfigurationError,
    add_flag,
    boolean,
    env_bool,
    env_name,
)
from trussium_operator.serving.addresses import split_address
from trussium_operator.serving.health import DISABLED, metrics_app
from trussium_operator.serving.metrics_auth import ApiReviews, MetricsAuth

DEFAULT_ADDRESS = "0.0.0.0:8443"


@dataclass(frozen=True)
class MetricsOptions:
    address: str = DEFAULT_ADDRESS
    secure: bool = True
    cert_path: Path | None = None


def add_metrics_flags(parser: argparse.ArgumentParser) -> None:
    """`--metrics-bind-address`, `--metrics-secure[=BOOL]` and `--metrics-cert-path`,
    spelled as the Go operator spells them."""
    add_flag(
        parser,
        "--metrics-bind-address",
        default=DEFAULT_ADDRESS,
        help='HOST:PORT of /metrics; "0" disables',
    )
    parser.add_argument(
        "--metrics-secure",
        nargs="?",
        const=True,
        type=boolean,
        default=env_bool("--metrics-secure", True),
        metavar="BOOL",
        help="HTTPS, each request authenticated (TokenReview) and authorized "
        "(SubjectAccessReview: get on /metrics) by the API server (default); "
        "--metrics-secure=false: plain HTTP, readable by anyone who reaches the port",
    )
    add_flag(
        parser,
        "--metrics-cert-path",
        type=Path,
        default=None,
        help="folder with tls.crt and tls.key for the metrics server, reloaded when they "
        "change (a self-signed certificate until they first appear); default: a "
        "self-signed certificate made at start",
    )


def metrics_options(args: argparse.Namespace) -> MetricsOptions:
    """The parsed flags, checked: ConfigurationError when they cannot be served."""
    if args.metrics_bind_address != DISABLED:
        try:
            split_address(args.metrics_bind_address)
        except ValueError as error:
            raise ConfigurationError(f"--metrics-bind-address: {error}") from None
    path: Path | None = args.metrics_cert_path
    if path is not None and not path.is_dir():
        raise ConfigurationError(f"--metrics-cert-path {path}: not a folder")
    if path is not None and not args.metrics_secure:
        raise ConfigurationError("--metrics-cert-path needs --metrics-secure")
    return MetricsOptions(args.metrics_bind_address, bool(args.metrics_secure), path)


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
