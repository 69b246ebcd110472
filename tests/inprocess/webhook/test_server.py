"""`serve` wiring: TLS from the certificate folder, readiness, stopping, draining."""

import asyncio
import json
import ssl
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from devcluster.layout import free_port
from trussium_operator.serving.secure_metrics import MetricsOptions
from trussium_operator.webhook.app import AdmissionSettings, create_admission_app
from trussium_operator.webhook.certs_cli import main_certs
from trussium_operator.webhook.metrics import WebhookMetrics
from trussium_operator.webhook.server import ServeOptions, serve, start_site

from .reviews import OPERATOR, review, runtime


async def wait_ready(session: aiohttp.ClientSession, url: str) -> None:
    for _ in range(100):
        try:
            async with session.get(url) as ready:
                if ready.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"{url} never ready")


@dataclass
class Serving:
    port: int
    health_port: int
    stop: asyncio.Event
    server: asyncio.Task[None]


async def serving(cert_dir: Path, shutdown_delay: float) -> Serving:
    """`serve` with a new certificate folder, once ready."""
    assert main_certs(["generate", "--out", str(cert_dir), "--ip-address", "127.0.0.1"]) == 0
    port, health_port = free_port(), free_port()
    options = ServeOptions(
        operator_username=OPERATOR,
        bind_address=f"127.0.0.1:{port}",
        health_bind_address=f"127.0.0.1:{health_port}",
        metrics=MetricsOptions("0"),
        cert_dir=cert_dir,
        authorize_secret_references=False,  # no API server here
        shutdown_delay=shutdown_delay,
        body_timeout=3,
    )
    stop = asyncio.Event()
    server = asyncio.create_task(serve(options, stop))
    async with aiohttp.ClientSession() as session:
        await wait_ready(session, f"http://127.0.0.1:{health_port}/readyz")
    return Serving(port, health_port, stop, server)


async def test_serves_over_tls_until_stopped(tmp_path: Path) -> None:
    webhook = await serving(tmp_path, shutdown_delay=0)
    port, health_port = webhook.port, webhook.health_port
    tls = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    url = f"https://127.0.0.1:{port}/validate-trussiumruntime"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls)) as session:
        async with session.post(url, json=review(runtime())) as answer:
            assert (await answer.json())["response"]["allowed"] is True
        webhook.stop.set()
        await asyncio.wait_for(webhook.server, 15)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls)) as session:
        for address in (url, f"http://127.0.0.1:{health_port}/healthz"):
            try:
                await session.post(address, json={})
            except aiohttp.ClientConnectionError:
                continue
            raise AssertionError(f"{address} still served after stop")


async def test_in_flight_admissions_finish_during_shutdown() -> None:
    lookup_started = asyncio.Event()

    async def slow_secret_names(namespace: str) -> frozenset[str]:
        lookup_started.set()
        await asyncio.sleep(0.5)
        return frozenset()

    settings = AdmissionSettings(
        operator_username=OPERATOR, secret_names=slow_secret_names, secret_lookup_timeout=5
    )
    port = free_port()
    runner = await start_site(
        create_admission_app(settings, WebhookMetrics()), f"127.0.0.1:{port}", None, 10
    )
    referencing = runtime(imagePullSecrets=[{"name": "pull"}])
    async with aiohttp.ClientSession() as session:
        in_flight = asyncio.create_task(
            session.post(
                f"http://127.0.0.1:{port}/validate-trussiumruntime", json=review(referencing)
            )
        )
        await lookup_started.wait()
        await runner.cleanup()
        answer = await in_flight
        assert answer.status == 200
        result = (await answer.json())["response"]
    assert result["allowed"] is True
    assert any("'pull' does not exist" in warning for warning in result["warnings"])


class RawTLS:
    """One HTTP/1.1 connection over TLS, written byte by byte as the API server does."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, cert_dir: Path) -> "RawTLS":
        tls = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=tls), 5
        )
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def answer(self) -> tuple[str, dict[str, str], bytes]:
        """The next response: its status line, headers (lower-cased) and body."""
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 5)
        status, *lines = head.decode().split("\r\n")[:-2]
        headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in lines)}
        length = int(headers.get("content-length", "0"))
        body = await asyncio.wait_for(self.reader.readexactly(length), 5) if length else b""
        return status, headers, body

    async def closed_by_server(self) -> bool:
        return await asyncio.wait_for(self.reader.read(1), 5) == b""


def admission(extra_headers: str = "") -> tuple[bytes, bytes]:
    """A validating review's request head and body, as two writes."""
    body = json.dumps(review(runtime())).encode()
    head = (
        "POST /validate-trussiumruntime HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra_headers}\r\n"
    )
    return head.encode(), body


async def refused(port: int) -> None:
    """Wait until the admission port no longer accepts connections."""
    for _ in range(500):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return
        writer.close()
        await asyncio.sleep(0.01)
    raise AssertionError(f"port {port} still accepts connections")


async def test_a_request_whose_body_arrives_as_the_listener_closes_is_answered(
    tmp_path: Path,
) -> None:
    """The API server writes a review's head and body separately; when the listener
    closes between the two, the review is still answered (aiohttp's own shutdown
    would drop the body and leave the connection open and unread)."""
    webhook = await serving(tmp_path, shutdown_delay=0)
    connection = await RawTLS.open(webhook.port, tmp_path)
    head, body = admission("Expect: 100-continue\r\n")
    await connection.send(head)
    # The handler runs (it asks for the body) before the webhook is told to stop.
    assert (await connection.answer())[0] == "HTTP/1.1 100 Continue"
    webhook.stop.set()
    await refused(webhook.port)
    await connection.send(body)
    status, headers, answer = await connection.answer()
    assert status == "HTTP/1.1 200 OK"
    assert json.loads(answer)["response"]["allowed"] is True
    assert headers.get("connection") == "close"
    assert await connection.closed_by_server()
    await asyncio.wait_for(webhook.server, 10)


async def test_kept_alive_connections_are_closed_between_requests_while_stopping(
    tmp_path: Path,
) -> None:
    """After SIGTERM every answer says `Connection: close` and the connection closes
    after it, so the API server's next request opens a new connection (to a pod still
    ready); a connection left idle is closed when the listener closes."""
    webhook = await serving(tmp_path, shutdown_delay=4)
    busy, idle = (
        await RawTLS.open(webhook.port, tmp_path),
        await RawTLS.open(webhook.port, tmp_path),
    )
    async with aiohttp.ClientSession() as session:
        for connection in (busy, idle):
            await connection.send(b"".join(admission()))
            status, headers, _ = await connection.answer()
            assert (status, headers.get("connection")) == ("HTTP/1.1 200 OK", None)
        webhook.stop.set()
        for _ in range(100):  # stopping: /readyz fails, admissions are still answered
            async with session.get(f"http://127.0.0.1:{webhook.health_port}/readyz") as ready:
                if ready.status == 503:
                    break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("/readyz still 200 after stop")
    await busy.send(b"".join(admission()))
    status, headers, answer = await busy.answer()
    assert status == "HTTP/1.1 200 OK"
    assert json.loads(answer)["response"]["allowed"] is True
    assert headers.get("connection") == "close"
    assert await busy.closed_by_server()
    assert await idle.closed_by_server()
    await asyncio.wait_for(webhook.server, 10)
