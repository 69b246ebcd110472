"""The listener on uvloop, the controller's event loop (ADR 0055).

The listener is written against asyncio's socket transports; uvloop's have
the same methods under another class. Here a TLS listener runs on a uvloop
loop and keeps its promises: it answers over TLS, makes room at its cap by
closing the connection idle longest, and closes a client that never
finishes its handshake.
"""

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import uvloop
from aiohttp import web
from prometheus_client import CollectorRegistry

from devcluster.layout import free_port
from trussium_operator.certs.reload import ReloadingTLS
from trussium_operator.serving.limits import ConnectionLimits
from trussium_operator.serving.listener import ConnectionMetrics, Listener, listen
from trussium_operator.webhook.certs_cli import main_certs

WITHIN = 15.0


async def _hello(_: web.Request) -> web.Response:
    return web.Response(text="hello")


def on_uvloop(scenario: Callable[[], Awaitable[None]]) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert isinstance(runner.get_loop(), uvloop.Loop)
        runner.run(asyncio.wait_for(scenario(), 60))


async def _closed_by_server(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while await reader.read(4096):
            pass


async def _get(url: str, client_tls: ssl.SSLContext) -> str:
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls)) as session,
        session.get(url) as answer,
    ):
        assert answer.status == 200
        return await answer.text()


def test_the_tls_listener_keeps_its_limits_on_uvloop(tmp_path: Path) -> None:
    assert main_certs(["generate", "--out", str(tmp_path), "--ip-address", "127.0.0.1"]) == 0
    client_tls = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    registry = CollectorRegistry()
    metrics = ConnectionMetrics("uvloop", registry)
    port = free_port()
    url = f"https://127.0.0.1:{port}/"

    async def scenario() -> None:
        app = web.Application()
        app.router.add_get("/", _hello)
        listener: Listener = await listen(
            app,
            "127.0.0.1",
            port,
            metrics=metrics,
            ssl_context=ReloadingTLS(tmp_path).context,
            limits=ConnectionLimits(max_connections=2, newcomer_grace=0, handshake_timeout=1),
        )
        try:
            assert await _get(url, client_tls) == "hello"
            # A plain-TCP client that starts a handshake and stops is closed.
            stalled, stalled_writer = await asyncio.open_connection("127.0.0.1", port)
            stalled_writer.write(b"\x16\x03\x01")
            await asyncio.wait_for(_closed_by_server(stalled), WITHIN)
            stalled_writer.close()
            # Two idle TLS clients fill the cap; a third request is still answered, and
            # the holder idle longest is the one closed to make room.
            holders = [
                await asyncio.open_connection(
                    "127.0.0.1", port, ssl=client_tls, server_hostname="127.0.0.1"
                )
                for _ in range(2)
            ]
            assert await _get(url, client_tls) == "hello"
            await asyncio.wait_for(_closed_by_server(holders[0][0]), WITHIN)
            evicted = {"state": "idle"}
            assert registry.get_sample_value("uvloop_connections_evicted_total", evicted) == 1
            for _, writer in holders:
                writer.close()
        finally:
            await listener.cleanup()

    on_uvloop(scenario)
