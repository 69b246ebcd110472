"""The controller's probe and metrics listeners keep the webhook's rules: a connection
cap counted from accept, a head deadline, and idle connections closed first.

Served by `serving.health.serve`, as the manager serves :8080 and :8081.
"""

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator

import aiohttp
from prometheus_client import REGISTRY

from devcluster.layout import free_port
from trussium_operator.controller.metrics import CONNECTIONS
from trussium_operator.serving.health import metrics_app, probes_app, serve
from trussium_operator.serving.limits import ConnectionLimits
from trussium_operator.serving.listener import Listener

HALF_A_HEAD = b"GET /healthz HTTP/1.1\r\nHost: probe\r\nX-Slow: "
HOLDERS = 2000
CAP = 256
LIMITS = ConnectionLimits(header_timeout=2.0, handshake_timeout=2.0, max_connections=CAP)
# The deadlines plus room for a loaded machine.
CLOSE_WITHIN = LIMITS.header_timeout + LIMITS.handshake_timeout + 20.0


def evicted() -> float:
    value = REGISTRY.get_sample_value(
        "trussium_controller_connections_evicted_total", {"state": "idle"}
    )
    return value or 0.0


@contextlib.asynccontextmanager
async def probes() -> AsyncIterator[tuple[Listener, int]]:
    port = free_port()
    listener = await serve(
        probes_app(lambda: True, "not ready"), f"127.0.0.1:{port}", CONNECTIONS, limits=LIMITS
    )
    assert listener is not None
    try:
        yield listener, port
    finally:
        await listener.cleanup()


async def closed_by_server(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while await reader.read(4096):
            pass


async def healthz(port: int) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/healthz") as answer,
    ):
        return answer.status


async def test_two_thousand_half_sent_heads_are_closed_and_the_cap_holds() -> None:
    before = evicted()
    async with probes() as (listener, port):
        held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        most = 0
        for _ in range(HOLDERS):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(HALF_A_HEAD)
            held.append((reader, writer))
            most = max(most, listener.open_connections)
        assert most <= CAP
        # The kubelet's next probe is answered while all of them try to hold on.
        assert await asyncio.wait_for(healthz(port), CLOSE_WITHIN) == 200
        # Every one is closed: the idle ones first to make room, the rest at the deadline.
        await asyncio.wait_for(
            asyncio.gather(*(closed_by_server(reader) for reader, _ in held)), CLOSE_WITHIN
        )
        assert listener.open_connections == 0
        print(f"\n{evicted() - before:.0f} of {HOLDERS} closed at the cap, the others later")
        for _, writer in held:
            writer.close()


async def test_connections_that_send_nothing_are_closed_at_the_first_byte_deadline() -> None:
    port = free_port()
    listener = await serve(metrics_app(), f"127.0.0.1:{port}", CONNECTIONS, limits=LIMITS)
    assert listener is not None
    try:
        silent = [await asyncio.open_connection("127.0.0.1", port) for _ in range(10)]
        await asyncio.wait_for(
            asyncio.gather(*(closed_by_server(reader) for reader, _ in silent)), CLOSE_WITHIN
        )
        assert listener.open_connections == 0
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as answer,
        ):
            assert answer.status == 200
            assert "trussium_controller_connections_evicted_total" in await answer.text()
        for _, writer in silent:
            writer.close()
    finally:
        await listener.cleanup()
