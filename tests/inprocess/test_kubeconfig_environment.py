"""The API client reads its proxy from the environment once, when it is made: a proxy
variable applies (unless NO_PROXY exempts the server), and no request looks again."""

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.fake_apiserver import FakeApiServer
from trussium_operator.cmdline.kubeconfig import new_api_client
from trussium_operator.controller.machinery.kube import Kube, TransportError

PATH = "/api/v1/configmaps"
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY")


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    fake = await FakeApiServer().start()
    yield fake
    await fake.stop()


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def kubeconfig(tmp_path: Path, port: int) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


def closed_port() -> str:
    """An address nothing listens on: a proxy there refuses every connection."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


async def get(kube: Kube) -> None:
    try:
        await asyncio.wait_for(kube.request("GET", PATH), timeout=10)
    finally:
        await kube.api.close()


async def test_a_proxy_in_the_environment_carries_the_requests(
    server: FakeApiServer, environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    environment.setenv("HTTP_PROXY", closed_port())
    kube = Kube(await new_api_client(kubeconfig(tmp_path, server.port)))
    with pytest.raises(TransportError):
        await get(kube)
    assert server.lists_of(PATH) == []


async def test_no_proxy_exempts_the_api_server(
    server: FakeApiServer, environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    environment.setenv("HTTP_PROXY", closed_port())
    environment.setenv("NO_PROXY", "127.0.0.1")
    await get(Kube(await new_api_client(kubeconfig(tmp_path, server.port))))
    assert len(server.lists_of(PATH)) == 1


async def test_requests_do_not_read_the_environment_again(
    server: FakeApiServer, environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    kube = Kube(await new_api_client(kubeconfig(tmp_path, server.port)))
    # Read per request (in a worker thread, as aiohttp does when trusting the
    # environment), this would send the request to a proxy that refuses it.
    environment.setenv("HTTP_PROXY", closed_port())
    await get(kube)
    assert len(server.lists_of(PATH)) == 1
