"""`--kube-api-qps` and `--kube-api-burst`: the controller's requests to the API server,
as the server sees them, come at most `burst` at once and then at the rate."""

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from tests.support.fake_apiserver import FakeApiServer
from trussium_operator.controller.machinery.kube import Kube
from trussium_operator.controller.machinery.tokenbucket import TokenBucket

PATH = "/api/v1/configmaps"


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    fake = await FakeApiServer().start()
    yield fake
    await fake.stop()


async def test_requests_beyond_the_burst_arrive_at_the_configured_rate(
    server: FakeApiServer,
) -> None:
    kube = Kube(server.kube().api, TokenBucket(qps=20, burst=3))
    started = time.monotonic()
    try:
        await asyncio.wait_for(
            asyncio.gather(*(kube.request("GET", PATH) for _ in range(13))), timeout=10
        )
    finally:
        await kube.api.close()
    arrivals = server.lists_of(PATH)
    assert len(arrivals) == 13
    # The burst leaves at once; the 10 after it are at least 1/20 s apart, the last at
    # 0.5 s or later. (Lower bounds only: a loaded machine delays, never hurries, them.)
    assert arrivals[-1] - arrivals[3] >= 9 / 20 - 0.01
    assert arrivals[-1] - started >= 0.5
