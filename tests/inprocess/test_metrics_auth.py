"""The metrics endpoint's reviews on top of the control-plane proof
(tests/apiserver/test_metrics_auth.py): what is cached and for how long, the
bound on the caches, an API server that does not answer, and a certificate
from files served to a client that verifies it."""

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestClient
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry, Gauge

from devcluster.layout import free_port
from trussium_operator.certs.cli import main_certs
from trussium_operator.cmdline.health import metrics_app, serve
from trussium_operator.cmdline.listener import ConnectionMetrics
from trussium_operator.cmdline.metrics_auth import (
    ALLOWED_SECONDS,
    AUTHENTICATED_SECONDS,
    DENIED_SECONDS,
    ExpiringCache,
    MetricsAuth,
    ReviewUnavailableError,
    User,
)
from trussium_operator.cmdline.secure_metrics import MetricsOptions, metrics_endpoint

AppClient = Callable[[web.Application], Awaitable[TestClient[web.Request, web.Application]]]
READER = User("system:serviceaccount:monitoring:prometheus", groups=("system:serviceaccounts",))


class FakeReviews:
    """Tokens "reader" (allowed) and "stranger" (not); counts the reviews asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.down = False

    async def authenticate(self, token: str) -> User | None:
        self.asked.append("TokenReview")
        if self.down:
            raise ReviewUnavailableError
        return {"reader": READER, "stranger": User("stranger")}.get(token)

    async def authorize(self, user: User, verb: str, path: str) -> bool:
        self.asked.append("SubjectAccessReview")
        if self.down:
            raise ReviewUnavailableError
        return user == READER and (verb, path) == ("get", "/metrics")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _app(auth: MetricsAuth) -> web.Application:
    return metrics_app(CollectorRegistry(), middlewares=[auth.middleware()])


async def _status(test_client: TestClient[web.Request, web.Application], token: str) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return (await test_client.get("/metrics", headers=headers)).status


async def test_answers_are_reused_until_they_expire(aiohttp_client: AppClient) -> None:
    reviews, clock = FakeReviews(), Clock()
    metrics = await aiohttp_client(_app(MetricsAuth(reviews, clock=clock)))
    assert [await _status(metrics, "reader") for _ in range(3)] == [200] * 3
    assert reviews.asked == ["TokenReview", "SubjectAccessReview"]

    clock.now = AUTHENTICATED_SECONDS + 1  # the user is looked up again, the decision kept
    assert await _status(metrics, "reader") == 200
    assert reviews.asked[2:] == ["TokenReview"]
    clock.now = ALLOWED_SECONDS + 1
    assert await _status(metrics, "reader") == 200
    assert reviews.asked[3:] == ["TokenReview", "SubjectAccessReview"]

    reviews.asked.clear()
    assert [await _status(metrics, "stranger") for _ in range(2)] == [403, 403]
    assert [await _status(metrics, "invented") for _ in range(2)] == [401, 401]
    assert reviews.asked == ["TokenReview", "SubjectAccessReview", "TokenReview"]
    clock.now += DENIED_SECONDS + 1  # the denial is asked again, the user kept
    assert await _status(metrics, "stranger") == 403
    assert reviews.asked[3:] == ["SubjectAccessReview"]


async def test_no_bearer_token_is_refused_without_asking(aiohttp_client: AppClient) -> None:
    reviews = FakeReviews()
    metrics = await aiohttp_client(_app(MetricsAuth(reviews)))
    assert await _status(metrics, "") == 401
    basic = await metrics.get("/metrics", headers={"Authorization": "Basic cmVhZGVy"})
    assert basic.status == 401
    assert reviews.asked == []


async def test_an_unanswered_review_is_a_503_and_not_remembered(
    aiohttp_client: AppClient,
) -> None:
    reviews = FakeReviews()
    metrics = await aiohttp_client(_app(MetricsAuth(reviews)))
    reviews.down = True
    answer = await metrics.get("/metrics", headers={"Authorization": "Bearer reader"})
    assert answer.status == 503
    assert "reader" not in await answer.text()
    reviews.down = False
    assert await _status(metrics, "reader") == 200


def test_the_caches_keep_at_most_their_size_dropping_the_least_recently_used() -> None:
    cache = ExpiringCache[str, int](2)
    cache.put("a", 1, 60)
    cache.put("b", 2, 60)
    assert cache.get("a") == (1,)
    cache.put("c", 3, 60)
    assert len(cache) == 2
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == ((1,), None, (3,))


async def test_a_certificate_from_files_is_served_and_verifies(tmp_path: Path) -> None:
    assert main_certs(["generate", "--out", str(tmp_path), "--ip-address", "127.0.0.1"]) == 0
    port = free_port()
    registry = CollectorRegistry()
    Gauge("answer", "a series", registry=registry).set(42)
    options = MetricsOptions(f"127.0.0.1:{port}", secure=True, cert_path=tmp_path)
    api = client.ApiClient(client.Configuration())  # never called: no token is sent
    endpoint = metrics_endpoint(options, registry, lambda: api)
    runner = await serve(
        endpoint.app,
        options.address,
        ConnectionMetrics("test", registry),
        ssl_context=endpoint.ssl_context,
    )
    assert runner is not None
    try:
        verified = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        connector = aiohttp.TCPConnector(ssl=verified)
        async with aiohttp.ClientSession(connector=connector) as session:
            answer = await asyncio.wait_for(
                session.get(f"https://127.0.0.1:{port}/metrics"), timeout=10
            )
            assert answer.status == 401  # the certificate verified; no token
    finally:
        await runner.cleanup()
        await endpoint.close()
        await api.close()
