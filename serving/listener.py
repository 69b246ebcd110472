"""Listening sockets that slow, idle or hostile clients cannot exhaust.

aiohttp alone keeps a connection that sends half a request for about an
hour, and accepts any number of them; asyncio's TLS gives every accepted
socket a 256 KiB buffer before the peer has sent a byte. Here every listener
of both programs gets:
- a cap on open connections, counted from accept (before TLS). At the cap a
  new connection is still served: the connection idle longest (no request in
  flight: still handshaking, no complete head yet, or kept alive between
  requests) is closed to make room, else the request in flight longest; a
  connection in its state for less than `newcomer_grace` goes only when no
  older one can. So a peer holding connections open cannot lock the API
  server out, nor push out its newest connection;
- a deadline for the first byte and then for the TLS handshake
  (`handshake_timeout`); TLS and HTTP start with the first byte, and a TLS
  connection queues about one record (asyncio's own holds up to 512 KiB);
- a deadline for a complete request head, counted from the handshake or the
  end of the previous response, which is also the idle keep-alive limit
  (aiohttp's keep-alive timer, which data trickling in does not extend);
- a body deadline, applied by the admission handler around its read;
- a drain on shutdown (docs/adr/0032): from `drain()` every answer says
  `Connection: close` and its connection closes after it; `cleanup()` stops
  accepting, answers the requests under way (aiohttp's own shutdown would
  drop a body still on its way and leave the connection open, unread), and
  closes a connection only when nothing of a request is on it.
aiohttp's own connection-level errors (malformed HTTP, a client gone
mid-request) are counted and logged at debug, without a traceback, so
anyone who can reach the port cannot flood the log.
"""

import asyncio
import contextlib
import logging
import ssl
from asyncio import sslproto
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from trussium_operator.serving.limits import DEFAULT_LIMITS, ConnectionLimits

log = logging.getLogger(__name__)

# Bytes read from the socket at a time: a TLS record is at most 16 KiB + 256.
TLS_READ_BUFFER = 17 * 1024
# Encrypted bytes a connection may queue before the socket is no longer read.
TLS_QUEUED_BYTES = TLS_READ_BUFFER
_TLS_READ = bytearray(TLS_READ_BUFFER)
# The plain-HTTP read buffer per connection, and aiohttp's per-request
# buffer (it stops reading the socket at twice this much unread body).
READ_BUFFER = 8 * 1024


@dataclass
class ConnectionMetrics:
    """What the limits did, as `<prefix>_connections_{evicted,dropped}_total`."""

    prefix: str
    registry: CollectorRegistry
    evicted: Counter = field(init=False)
    dropped: Counter = field(init=False)

    def __post_init__(self) -> None:
        self.evicted = Counter(
            f"{self.prefix}_connections_evicted_total",
            "Open connections closed at the cap to make room for a new one, by state "
            "(idle: no request in flight; busy: the request in flight longest).",
            ["state"],
            registry=self.registry,
        )
        self.dropped = Counter(
            f"{self.prefix}_connections_dropped_total",
            "Requests or connections ended early (malformed HTTP, timeouts, clients gone), "
            "by reason.",
            ["reason"],
            registry=self.registry,
        )


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


class _SmallTLS(sslproto.SSLProtocol):
    """asyncio's TLS protocol without its 256 KiB buffers: the socket is read into
    one buffer all connections share (asyncio copies out of it at once, in the
    same step), and at most about one record is queued per connection."""

    max_size = TLS_READ_BUFFER

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ssl_buffer = _TLS_READ
        self._ssl_buffer_view = memoryview(_TLS_READ)
        self._set_read_buffer_limits(high=TLS_QUEUED_BYTES)  # type: ignore[attr-defined]


# Where a connection's first bytes land: the transport fills it and hands it
# back in one synchronous step, so every connection can share it.
_FIRST_READ = bytearray(4096)


class _Connection(asyncio.BufferedProtocol):
    """One accepted socket from accept to close, in front of TLS and aiohttp.

    It stays the socket's protocol, so it sees every close, even of a
    connection that never finished its handshake. TLS and HTTP start with the
    first bytes received: until then a connection holds no buffer at all.
    """

    def __init__(self, pool: "_Pool") -> None:
        self._pool = pool
        self.transport: asyncio.Transport | None = None
        self.http: web.RequestHandler | None = None
        self._tls: _SmallTLS | None = None
        self._buffer: bytearray | None = None
        self._first_bytes_due: asyncio.TimerHandle | None = None
        # When the connection last became idle, or its request started.
        self.since = 0.0
        self.in_flight = 0
        # True from the end of a request until the next byte: no request is on it.
        self.quiet = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A socket transport: asyncio's, or uvloop's (which has its methods, not its class).
        self.transport = cast(asyncio.Transport, transport)
        loop = asyncio.get_running_loop()
        self.since = loop.time()
        self._pool.admit(self)
        self._first_bytes_due = loop.call_later(self._pool.limits.handshake_timeout, self.close)

    def _start(self) -> None:
        """TLS (or plain HTTP) from here on."""
        assert self.transport is not None
        if self._first_bytes_due is not None:
            self._first_bytes_due.cancel()
        self.http = self._pool.make_http()
        self._pool.by_http[self.http] = self
        if self._pool.ssl_context is None:
            self._buffer = bytearray(READ_BUFFER)
            self.http.connection_made(self.transport)
            return
        # No waiter: nobody awaits the handshake (aiohttp starts with it).
        timeout = self._pool.limits.handshake_timeout
        self._tls = _SmallTLS(
            asyncio.get_running_loop(),
            self.http,
            self._pool.ssl_context,
            None,
            server_side=True,
            ssl_handshake_timeout=timeout,
            ssl_shutdown_timeout=timeout,
        )
        self._tls.connection_made(self.transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._pool.discard(self)
        if self._first_bytes_due is not None:
            self._first_bytes_due.cancel()
        inner = self._tls or self.http
        if inner is not None:
            inner.connection_lost(exc)

    def get_buffer(self, sizehint: int) -> Any:
        if self._tls is not None:
            return self._tls.get_buffer(sizehint)
        return self._buffer if self._buffer is not None else _FIRST_READ

    def buffer_updated(self, nbytes: int) -> None:
        self.quiet = False
        if self._tls is not None:
            self._tls.buffer_updated(nbytes)
            return
        if self.http is None:
            first = bytes(_FIRST_READ[:nbytes])
            self._start()
            self._feed(first)
            return
        if self._buffer is not None:
            self.http.data_received(bytes(self._buffer[:nbytes]))

    def _feed(self, data: bytes) -> None:
        if self._tls is None:
            assert self.http is not None
            self.http.data_received(data)
            return
        self._tls.get_buffer(len(data))[: len(data)] = data
        self._tls.buffer_updated(len(data))

    def eof_received(self) -> bool | None:
        inner = self._tls or self.http
        return inner.eof_received() if inner is not None else None

    def pause_writing(self) -> None:
        inner = self._tls or self.http
        if inner is not None:
            inner.pause_writing()

    def resume_writing(self) -> None:
        inner = self._tls or self.http
        if inner is not None:
            inner.resume_writing()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def close_quietly(self) -> None:
        """Close a quiet connection as HTTP does (TLS close_notify, then FIN)."""
        if self.http is not None:
            self.http.force_close()


@dataclass
class _Pool:
    """The open connections of one listener, and who goes when it is full."""

    make_http: Callable[[], web.RequestHandler]
    ssl_context: ssl.SSLContext | None
    limits: ConnectionLimits
    metrics: ConnectionMetrics
    open: set[_Connection] = field(default_factory=set)
    by_http: dict[asyncio.Protocol, _Connection] = field(default_factory=dict)
    # Answers say `Connection: close` (shutdown has begun).
    draining: bool = False
    # Set when a connection closes or its request ends.
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def admit(self, new: _Connection) -> None:
        """Make room for `new`, closing the connection that has held its state longest:
        idle before busy, but either only once it is past the newcomer grace, so that
        neither a client still in its handshake nor a request just begun is pushed
        out while an older one can go."""
        if len(self.open) >= self.limits.max_connections:
            settled = asyncio.get_running_loop().time() - self.limits.newcomer_grace
            idle = [c for c in self.open if not c.in_flight]
            busy = [c for c in self.open if c.in_flight]
            candidates = next(
                group
                for group in (
                    [c for c in idle if c.since <= settled],
                    [c for c in busy if c.since <= settled],
                    idle,
                    busy,
                )
                if group
            )
            victim = min(candidates, key=lambda c: c.since)
            self.metrics.evicted.labels("busy" if victim.in_flight else "idle").inc()
            self.discard(victim)
            victim.close()
        self.open.add(new)

    def discard(self, connection: _Connection) -> None:
        self.open.discard(connection)
        if connection.http is not None:
            self.by_http.pop(connection.http, None)
        self.changed.set()

    async def settle(self) -> None:
        """Close each connection once no request is on it; return when none has one."""
        while True:
            self.changed.clear()
            for connection in [c for c in self.open if c.quiet]:
                connection.close_quietly()
            if all(c.quiet for c in self.open):
                return
            await self.changed.wait()

    def tracked(
        self, handle: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
    ) -> Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]:
        """aiohttp's request handler, marking its connection busy while it runs."""

        async def run(request: web.BaseRequest) -> web.StreamResponse:
            connection = self.by_http.get(request.protocol)
            if connection is None:
                return await handle(request)
            loop = asyncio.get_running_loop()
            connection.in_flight += 1
            connection.since = loop.time()
            try:
                answer = await handle(request)
            except web.HTTPException as error:  # aiohttp answers with it
                self._closing(error)
                raise
            finally:
                connection.in_flight -= 1
                connection.since = loop.time()
                # The answer is written before the loop runs anything else.
                connection.quiet = not connection.in_flight
                self.changed.set()
            self._closing(answer)
            return answer

        return run

    def _closing(self, answer: web.StreamResponse) -> None:
        if self.draining:
            answer.force_close()


@dataclass
class Listener:
    """A running listener; `cleanup()` stops accepting, then lets in-flight requests finish."""

    runner: web.AppRunner
    server: asyncio.Server
    _pool: _Pool
    shutdown_timeout: float

    @property
    def open_connections(self) -> int:
        return len(self._pool.open)

    def drain(self) -> None:
        """From now on each answer closes its connection (`Connection: close`), so
        clients open new ones, which a Service sends to pods still ready."""
        self._pool.draining = True

    async def cleanup(self) -> None:
        self.server.close()
        self.drain()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.shutdown_timeout):
                await self._pool.settle()
        for connection in [c for c in self._pool.open if not c.quiet]:  # past the timeout
            connection.close()
        await self.runner.cleanup()
        for connection in list(self._pool.open):  # still in their TLS handshake or close
            connection.close()


async def listen(
    app: web.Application,
    host: str,
    port: int,
    *,
    metrics: ConnectionMetrics,
    ssl_context: ssl.SSLContext | None = None,
    shutdown_timeout: float = 5.0,
    limits: ConnectionLimits = DEFAULT_LIMITS,
) -> Listener:
    """Serve `app` on host:port within `limits`."""
    runner = web.AppRunner(
        app,
        access_log=None,
        shutdown_timeout=shutdown_timeout,
        keepalive_timeout=limits.header_timeout,
        lingering_time=limits.linger_seconds,
        read_bufsize=READ_BUFFER,
        logger=_ProtocolErrors(metrics.dropped),
    )
    await runner.setup()
    assert runner.server is not None  # set by setup()
    pool = _Pool(runner.server, ssl_context, limits, metrics)
    runner.server.request_handler = pool.tracked(runner.server.request_handler)
    server = await asyncio.get_running_loop().create_server(
        lambda: _Connection(pool), host, port, reuse_address=True
    )
    return Listener(runner, server, pool, shutdown_timeout)
