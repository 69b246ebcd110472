"""Slow and surplus clients on the real TLS listener (loopback): none can hold it.

N connections trickle a request head or body a byte at a time; every one
must be closed once the header or body deadline passes, while well-formed
reviews keep being answered. The figures are printed (run with -s).
"""

import asyncio
import contextlib
import logging
import os
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from devcluster.layout import free_port
from trussium_operator.certs.reload import ReloadingTLS
from trussium_operator.serving.limits import ConnectionLimits
from trussium_operator.serving.listener import Listener
from trussium_operator.webhook.app import AdmissionSettings, create_admission_app
from trussium_operator.webhook.certs_cli import main_certs
from trussium_operator.webhook.metrics import WebhookMetrics
from trussium_operator.webhook.server import start_site

from .reviews import OPERATOR, review, runtime

SLOW_CLIENTS = int(os.environ.get("SLOW_CLIENTS", "200"))
HEADER_TIMEOUT = 2.0
BODY_TIMEOUT = 2.0
LINGER = 0.5
# The deadline plus room for a loaded machine; far below aiohttp's one-hour default.
CLOSE_WITHIN = HEADER_TIMEOUT + BODY_TIMEOUT + LINGER + 15.0
PATH = "/validate-trussiumruntime"


@dataclass
class Served:
    listener: Listener
    port: int
    client_tls: ssl.SSLContext
    metrics: WebhookMetrics


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, max_connections: int, newcomer_grace: float = 1.0
) -> AsyncIterator[Served]:
    assert main_certs(["generate", "--out", str(tmp_path), "--ip-address", "127.0.0.1"]) == 0
    metrics = WebhookMetrics()
    port = free_port()
    listener = await start_site(
        create_admission_app(
            AdmissionSettings(operator_username=OPERATOR, body_timeout=BODY_TIMEOUT), metrics
        ),
        f"127.0.0.1:{port}",
        ReloadingTLS(tmp_path).context,
        limits=ConnectionLimits(
            header_timeout=HEADER_TIMEOUT,
            max_connections=max_connections,
            linger_seconds=LINGER,
            newcomer_grace=newcomer_grace,
        ),
        metrics=metrics,
    )
    try:
        yield Served(
            listener, port, ssl.create_default_context(cafile=str(tmp_path / "ca.crt")), metrics
        )
    finally:
        await listener.cleanup()


async def _closed_by_server(reader: asyncio.StreamReader) -> None:
    """Returns once the server has closed the connection (EOF or reset)."""
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while await reader.read(4096):
            pass


async def slow_client(served: Served, part: str) -> float:
    """Sends a request head (part="head") or body (part="body") a byte every 0.2 s until closed;
    returns the seconds from its connection to the server closing it."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", served.port, ssl=served.client_tls, server_hostname="127.0.0.1"
    )
    connected = time.monotonic()
    head = f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    if part == "body":
        head += "Content-Length: 100000\r\n\r\n{"
    writer.write(head.encode())
    closed = asyncio.create_task(_closed_by_server(reader))
    trickle = b"X-Slow: 1\r\n" if part == "head" else b" "
    with contextlib.suppress(ConnectionError, ssl.SSLError, RuntimeError):
        while not closed.done():
            writer.write(trickle[:1])
            trickle = trickle[1:] + trickle[:1]
            await writer.drain()
            await asyncio.wait({closed}, timeout=0.2)
    await closed
    writer.close()
    return time.monotonic() - connected


async def well_formed_reviews(served: Served, stop: asyncio.Event) -> list[int]:
    """Posts a review every 0.1 s until stopped; the HTTP status of each."""
    statuses: list[int] = []
    connector = aiohttp.TCPConnector(ssl=served.client_tls)
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        while not stop.is_set():
            uid = f"uid-{len(statuses)}"
            url = f"https://127.0.0.1:{served.port}{PATH}"
            async with session.post(url, json=review(runtime(), uid=uid)) as answer:
                body = await answer.json()
                assert body["response"]["uid"] == uid
                statuses.append(answer.status)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)
    return statuses


async def test_slow_heads_and_bodies_are_all_closed_while_reviews_are_answered(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, max_connections=SLOW_CLIENTS + 10) as served:
        stop = asyncio.Event()
        reviews = asyncio.create_task(well_formed_reviews(served, stop))
        parts = ["head", "body"] * (SLOW_CLIENTS // 2)
        clients = [asyncio.create_task(slow_client(served, part)) for part in parts]
        done, pending = await asyncio.wait(clients, timeout=CLOSE_WITHIN)
        stop.set()
        statuses = await reviews
        held = len(pending)
        for task in pending:
            task.cancel()
        lifetimes = sorted(task.result() for task in done)
        print(
            f"\nslow clients: {len(clients)} ({SLOW_CLIENTS // 2} heads, {SLOW_CLIENTS // 2} "
            f"bodies), header/body timeout {HEADER_TIMEOUT}/{BODY_TIMEOUT} s; held after the "
            f"timeout: {held}; closed after median {lifetimes[len(lifetimes) // 2]:.2f} s, "
            f"max {lifetimes[-1]:.2f} s; well-formed reviews meanwhile: {len(statuses)}, "
            f"all 200: {set(statuses) == {200}}"
        )
        assert held == 0
        assert statuses
        assert set(statuses) == {200}
        # The server's own count agrees: nothing but (at most) the review client's connection.
        assert served.listener.open_connections <= 1
        dropped = served.metrics.registry.get_sample_value(
            "trussium_webhook_connections_dropped_total", {"reason": "body_timeout"}
        )
        # Every body client is dropped for its body, unless on a loaded machine its head
        # was not even parsed within the header timeout (then it is closed as a slow head).
        assert dropped is not None
        assert SLOW_CLIENTS // 2 - 2 <= dropped <= SLOW_CLIENTS // 2


async def test_at_the_cap_the_connection_idle_longest_makes_room_for_a_new_one(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, max_connections=3) as served:
        holders = []
        for _ in range(3):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", served.port, ssl=served.client_tls, server_hostname="127.0.0.1"
            )
            await _answered_once(reader, writer)
            holders.append((reader, writer))
        assert served.listener.open_connections == 3
        # A new client (the API server, say) is served at once, not refused...
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=served.client_tls)) as s,
            s.post(f"https://127.0.0.1:{served.port}{PATH}", json=review(runtime())) as answer,
        ):
            assert answer.status == 200
        # ...and the holder idle longest was closed to make room for it, only that one.
        await asyncio.wait_for(_closed_by_server(holders[0][0]), CLOSE_WITHIN)
        assert served.listener.open_connections <= 3
        evicted = served.metrics.registry.get_sample_value(
            "trussium_webhook_connections_evicted_total", {"state": "idle"}
        )
        assert evicted == 1
        for _, holder in holders:
            holder.close()


async def test_at_the_cap_a_new_client_is_not_pushed_out_for_an_older_request(
    tmp_path: Path,
) -> None:
    """Every older connection has a request in flight (a flood of bodies): the next
    arrival closes the oldest request, not the client that connected just before it."""
    grace = 0.3
    async with serving(tmp_path, max_connections=3, newcomer_grace=grace) as served:
        holders = []
        for _ in range(2):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", served.port, ssl=served.client_tls, server_hostname="127.0.0.1"
            )
            writer.write(
                f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{{".encode()
            )
            await writer.drain()
            holders.append((reader, writer))
        # The rule under test is about age: let the holders' requests outlive the
        # grace (time is the condition here; the body deadline is further away, so
        # they stay in flight, which the `busy` eviction asserted below confirms).
        await asyncio.sleep(grace + 0.2)
        newcomer, newcomer_writer = await asyncio.open_connection(
            "127.0.0.1", served.port, ssl=served.client_tls, server_hostname="127.0.0.1"
        )
        async with asyncio.timeout(CLOSE_WITHIN):
            # The server's count is a plain value with nothing to wait on: poll it.
            while served.listener.open_connections < 3:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=served.client_tls)) as s,
            s.post(f"https://127.0.0.1:{served.port}{PATH}", json=review(runtime())) as answer,
        ):
            assert answer.status == 200
        await asyncio.wait_for(_closed_by_server(holders[0][0]), CLOSE_WITHIN)
        await _answered_once(newcomer, newcomer_writer)  # still open, and served
        evicted = served.metrics.registry.get_sample_value(
            "trussium_webhook_connections_evicted_total", {"state": "busy"}
        )
        assert evicted == 1
        for _, holder in [*holders, (newcomer, newcomer_writer)]:
            holder.close()


async def _answered_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One request answered on this connection, so the server surely counts it as open."""
    writer.write(f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 405")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    await reader.readexactly(length)


async def test_malformed_http_and_vanishing_clients_are_counted_not_logged_as_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving(tmp_path, max_connections=10) as served:
        for garbage in (b"\x16\x03 not http\r\n\r\n", b"POST / HTTP/1.1\r\nBad Header\r\n\r\n"):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", served.port, ssl=served.client_tls, server_hostname="127.0.0.1"
            )
            writer.write(garbage)
            await asyncio.wait_for(_closed_by_server(reader), CLOSE_WITHIN)
            writer.close()
        # A client that leaves halfway through its body.
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", served.port, ssl=served.client_tls, server_hostname="127.0.0.1"
        )
        writer.write(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{{".encode())
        await writer.drain()
        writer.transport.abort()
        async with asyncio.timeout(CLOSE_WITHIN):
            # The server's counters are plain values with nothing to wait on: poll them.
            while len(dropped_reasons(served)) < 2:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
    # The first garbage is refused by aiohttp with a debug line of its own (a bad method).
    assert dropped_reasons(served) == {"BadHttpMessage": 1, "client_gone": 1}
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == [], [r.getMessage() for r in errors]
    assert not [r for r in caplog.records if r.exc_info]


def dropped_reasons(served: Served) -> dict[str, float]:
    return {
        sample.labels["reason"]: sample.value
        for metric in served.metrics.registry.collect()
        for sample in metric.samples
        if sample.name == "trussium_webhook_connections_dropped_total"
    }


async def test_a_client_that_never_completes_the_tls_handshake_is_closed(tmp_path: Path) -> None:
    async with serving(tmp_path, max_connections=10) as served:
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)  # plain TCP
        writer.write(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
        await asyncio.wait_for(_closed_by_server(reader), HEADER_TIMEOUT + 15)
        writer.close()
