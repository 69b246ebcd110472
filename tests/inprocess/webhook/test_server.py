"""`serve` wiring: TLS from the certificate folder, readiness, stopping, draining."""

import asyncio
import ssl
from pathlib import Path

import aiohttp

from devcluster.layout import free_port
from trussium_operator.certs.cli import main_certs
from trussium_operator.cmdline.secure_metrics import MetricsOptions
from trussium_operator.webhook.app import AdmissionSettings, create_admission_app
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


async def test_serves_over_tls_until_stopped(tmp_path: Path) -> None:
    assert main_certs(["generate", "--out", str(tmp_path), "--ip-address", "127.0.0.1"]) == 0
    port, health_port = free_port(), free_port()
    options = ServeOptions(
        operator_username=OPERATOR,
        bind_address=f"127.0.0.1:{port}",
        health_bind_address=f"127.0.0.1:{health_port}",
        metrics=MetricsOptions("0"),
        cert_dir=tmp_path,
        shutdown_delay=0,
    )
    stop = asyncio.Event()
    server = asyncio.create_task(serve(options, stop))
    tls = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    url = f"https://127.0.0.1:{port}/validate-trussiumruntime"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls)) as session:
        await wait_ready(session, f"http://127.0.0.1:{health_port}/readyz")
        async with session.post(url, json=review(runtime())) as answer:
            assert (await answer.json())["response"]["allowed"] is True
        stop.set()
        await asyncio.wait_for(server, 15)
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
