"""The plain-HTTP endpoints both programs serve: /healthz, /readyz and /metrics.

The controller serves the probes and the metrics on two addresses, the
webhook all three on its health address; the answers are the same.
"""

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from trussium_operator.cmdline.addresses import split_address

# A bind address of "0" serves nothing (controller-runtime's convention).
DISABLED = "0"


def probes_app(
    ready: Callable[[], bool],
    not_ready: str | Callable[[], str],
    registry: CollectorRegistry | None = None,
) -> web.Application:
    """/healthz, and /readyz answering 503 with `not_ready` (or what it returns) until
    `ready()`; with a registry, its /metrics too."""

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if ready():
            return web.Response(text="ok")
        return web.Response(status=503, text=not_ready() if callable(not_ready) else not_ready)

    app = metrics_app(registry) if registry is not None else web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


def metrics_app(registry: CollectorRegistry = REGISTRY) -> web.Application:
    """/metrics in Prometheus' text format."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


async def serve(app: web.Application, address: str) -> web.AppRunner | None:
    """Start `app` on `address`, or nothing when it is DISABLED."""
    if address == DISABLED:
        return None
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = split_address(address)
    await web.TCPSite(runner, host, port).start()
    return runner
