"""Listening sockets that slow or hostile clients cannot exhaust.

aiohttp alone keeps a connection that sends half a request for about an
hour, and accepts any number of them. Here every listener gets:
- a TLS handshake deadline (asyncio's `ssl_handshake_timeout`);
- a deadline for a complete request head, counted from the connection's
  start or the end of the previous response, which is also the idle
  keep-alive limit (aiohttp's keep-alive timer, which data trickling in does
  not extend: a connection still waiting for its request head is closed);
- a body deadline, applied by the admission handler around its read
  (`AdmissionSettings.body_timeout`);
- a cap on open connections: one past the cap is closed as soon as it is
  accepted, and counted.
aiohttp's own connection-level errors (malformed HTTP, a client gone
mid-request) are counted and logged at debug, without a traceback, so
anyone who can reach the port cannot flood the log.
"""

import asyncio
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import Counter

from trussium_operator.cmdline.limits import ConnectionLimits
from trussium_operator.webhook.metrics import WebhookMetrics

log = logging.getLogger(__name__)


class _ProtocolErrors(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server logger: connection errors counted and demoted to debug lines."""

    def __init__(self, counter: Counter) -> None:
        super().__init__(log)
        self.counter = counter

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        error = exc_info if isinstance(exc_info, BaseException) else None
        reason = type(error).__name__ if error is not None else "error"
        self.counter.labels(reason).inc()
        log.debug("connection dropped", extra={"fields": {"reason": reason}})

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        """aiohttp's own debug lines, without their tracebacks."""
        kwargs.pop("exc_info", None)
        return msg, kwargs


class _Capped(asyncio.Protocol):
    """Hands a connection to aiohttp's protocol unless `limit` connections are open."""

    def __init__(
        self,
        make: Callable[[], asyncio.Protocol],
        open_: set["_Capped"],
        limit: int,
        refused: Counter,
    ) -> None:
        self._make, self._open, self._limit, self._refused = make, open_, limit, refused
        self._inner: asyncio.Protocol | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if len(self._open) >= self._limit:
            self._refused.inc()
            transport.close()
            return
        self._open.add(self)
        self._inner = self._make()
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._open.discard(self)
        if self._inner is not None:
            self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()


@dataclass
class Listener:
    """A running listener; `cleanup()` stops accepting, then lets in-flight requests finish."""

    runner: web.AppRunner
    server: asyncio.Server
    open_connections: set[_Capped]

    async def cleanup(self) -> None:
        self.server.close()
        await self.runner.cleanup()


async def listen(
    app: web.Application,
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None,
    shutdown_timeout: float,
    limits: ConnectionLimits,
    metrics: WebhookMetrics,
) -> Listener:
    """Serve `app` on host:port within `limits`."""
    runner = web.AppRunner(
        app,
        access_log=None,
        shutdown_timeout=shutdown_timeout,
        keepalive_timeout=limits.header_timeout,
        lingering_time=limits.linger_seconds,
        logger=_ProtocolErrors(metrics.connections_dropped),
    )
    await runner.setup()
    assert runner.server is not None  # set by setup()
    make, open_connections = runner.server, set[_Capped]()
    server = await asyncio.get_running_loop().create_server(
        lambda: _Capped(
            make, open_connections, limits.max_connections, metrics.connections_refused
        ),
        host,
        port,
        ssl=ssl_context,
        ssl_handshake_timeout=limits.header_timeout if ssl_context else None,
        reuse_address=True,
    )
    return Listener(runner, server, open_connections)
