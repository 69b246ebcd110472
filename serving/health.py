"""The endpoints both programs serve: /healthz and /readyz (plain HTTP, for the
kubelet) and /metrics (on an address of its own, `serving/secure_metrics.py`).
Every listener has the same limits as the webhook's HTTPS port (serving/listener.py).
"""

import ssl
from collections.abc import Callable, Iterable

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from trussium_operator.serving.addresses import DISABLED, split_address
from trussium_operator.serving.limits import DEFAULT_LIMITS, ConnectionLimits
from trussium_operator.serving.listener import ConnectionMetrics, Listener, listen


def probes_app(ready: Callable[[], bool], not_ready: str | Callable[[], str]) -> web.Application:
    """/healthz, and /readyz answering 503 with `not_ready` (or what it returns) until
    `ready()`."""

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if ready():
            return web.Response(text="ok")
        return web.Response(status=503, text=not_ready() if callable(not_ready) else not_ready)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


def metrics_app(
    registry: CollectorRegistry = REGISTRY, middlewares: Iterable[Middleware] = ()
) -> web.Application:
    """/metrics in Prometheus' text format, behind `middlewares`."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application(middlewares=middlewares)
    app.router.add_get("/metrics", metrics)
    return app


async def serve(
    app: web.Application,
    address: str,
    metrics: ConnectionMetrics,
    *,
    ssl_context: ssl.SSLContext | None = None,
    limits: ConnectionLimits = DEFAULT_LIMITS,
) -> Listener | None:
    """Start `app` on `address` within `limits` (HTTPS with `ssl_context`), or nothing
    when it is DISABLED."""
    if address == DISABLED:
        return None
    host, port = split_address(address)
    return await listen(app, host, port, metrics=metrics, ssl_context=ssl_context, limits=limits)
