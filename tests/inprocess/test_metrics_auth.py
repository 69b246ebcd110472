"""The metrics endpoint's reviews on top of the control-plane proof
(tests/apiserver/test_metrics_auth.py): what is cached and for how long, the
bound on the caches, a flood of invented tokens, an API server that does not
answer, and a certificate from files served to a client that verifies it."""

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestClient, make_mocked_request
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry, Gauge

from devcluster.layout import free_port
from trussium_operator.serving.health import metrics_app, serve
from trussium_operator.serving.listener import ConnectionMetrics
from trussium_operator.serving.metrics_auth import (
    ALLOWED_SECONDS,
    AUTHENTICATED_SECONDS,
    CACHE_ENTRIES,
    DENIED_SECONDS,
    MAX_CONCURRENT_REVIEWS,
    MAX_WAITING_REVIEWS,
    RETRY_AFTER_SECONDS,
    SLOT_WAIT_SECONDS,
    ExpiringCache,
    MetricsAuth,
    ReviewUnavailableError,
    User,
)
from trussium_operator.serving.metrics_server import metrics_endpoint
from trussium_operator.serving.secure_metrics import MetricsOptions
from trussium_operator.webhook.certs_cli import main_certs

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


class SlowReviews(FakeReviews):
    """FakeReviews whose reviews of unknown tokens take until `answer` is set, counting
    how many are in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()
        self.in_flight = self.most_in_flight = 0

    async def authenticate(self, token: str) -> User | None:
        if token not in ("reader", "stranger"):
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                await self.answer.wait()
            finally:
                self.in_flight -= 1
        return await super().authenticate(token)


async def _get(auth: MetricsAuth, token: str) -> web.StreamResponse:
    request = make_mocked_request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})

    async def handler(_: web.Request) -> web.StreamResponse:
        return web.Response(text="metrics")

    return await auth.middleware()(request, handler)


async def test_invented_tokens_never_evict_a_scrapers_cached_answers() -> None:
    reviews = FakeReviews()
    # A clock that stands still: only eviction, never expiry, may drop an answer here,
    # however long the flood takes on a loaded machine.
    auth = MetricsAuth(reviews, clock=lambda: 0.0)
    assert (await _get(auth, "reader")).status == 200
    assert (await _get(auth, "stranger")).status == 403
    flood = 3 * CACHE_ENTRIES
    for i in range(flood):
        assert (await _get(auth, f"invented-{i}")).status == 401
    assert reviews.asked.count("TokenReview") == 2 + flood
    reviews.asked.clear()
    assert (await _get(auth, "reader")).status == 200
    assert (await _get(auth, "stranger")).status == 403
    assert reviews.asked == []  # both still answered from the caches


async def test_a_flood_waits_in_a_bounded_queue_and_the_rest_is_refused_at_once() -> None:
    reviews, flood = SlowReviews(), 500
    auth = MetricsAuth(reviews)
    assert (await _get(auth, "reader")).status == 200  # cached before the flood
    started = asyncio.get_running_loop().time()
    requests = [asyncio.create_task(_get(auth, f"invented-{i}")) for i in range(flood)]
    done, _ = await asyncio.wait(requests, timeout=SLOT_WAIT_SECONDS / 2)
    refused = [task.result() for task in done]
    assert len(refused) == flood - MAX_CONCURRENT_REVIEWS - MAX_WAITING_REVIEWS
    assert {(r.status, r.headers["Retry-After"]) for r in refused} == {
        (429, str(RETRY_AFTER_SECONDS))
    }
    assert auth.slots.waiting == MAX_WAITING_REVIEWS
    assert reviews.most_in_flight == MAX_CONCURRENT_REVIEWS
    assert (await _get(auth, "reader")).status == 200  # from the cache, without waiting

    waiting = set(requests) - done
    while len(waiting) > MAX_CONCURRENT_REVIEWS:  # until only the reviews in flight are left
        timed_out, waiting = await asyncio.wait(
            waiting, timeout=10 * SLOT_WAIT_SECONDS, return_when=asyncio.FIRST_COMPLETED
        )
        assert timed_out, "a waiter was still waiting after ten times its bound"
        assert {task.result().status for task in timed_out} == {429}
    elapsed = asyncio.get_running_loop().time() - started
    print(f"{flood} invented tokens: all but the reviews in flight answered in {elapsed:.2f} s")
    assert elapsed < 10 * SLOT_WAIT_SECONDS  # a second each, on a loaded machine: generous
    assert auth.slots.waiting == 0

    reviews.answer.set()  # the reviews in flight finish; the slots are free again
    answers = await asyncio.wait_for(asyncio.gather(*waiting), 10)
    assert [answer.status for answer in answers] == [401] * MAX_CONCURRENT_REVIEWS
    assert (await _get(auth, "invented-again")).status == 401


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


async def test_an_empty_certificate_folder_is_served_self_signed_until_files_appear(
    tmp_path: Path,
) -> None:
    """The controller's view of the webhook's serving Secret, mounted as an optional
    volume, before the controller has written it (selfManaged mode's first start)."""
    mounted, issued = tmp_path / "mounted", tmp_path / "issued"
    mounted.mkdir()
    assert main_certs(["generate", "--out", str(issued), "--ip-address", "127.0.0.1"]) == 0
    port = free_port()
    options = MetricsOptions(f"127.0.0.1:{port}", secure=True, cert_path=mounted)
    api = client.ApiClient(client.Configuration())  # never called: no token is sent
    endpoint = metrics_endpoint(options, CollectorRegistry(), lambda: api)
    runner = await serve(
        endpoint.app,
        options.address,
        ConnectionMetrics("test", CollectorRegistry()),
        ssl_context=endpoint.ssl_context,
    )
    assert runner is not None
    verified = ssl.create_default_context(cafile=str(issued / "ca.crt"))

    async def status() -> int | str:
        connector = aiohttp.TCPConnector(ssl=verified, force_close=True)
        async with aiohttp.ClientSession(connector=connector) as session:
            try:
                answer = await asyncio.wait_for(
                    session.get(f"https://127.0.0.1:{port}/metrics"), timeout=10
                )
            except aiohttp.ClientConnectorCertificateError:
                return "unverified"
            return answer.status

    try:
        assert await status() == "unverified"  # self-signed meanwhile: served, not trusted
        for name in ("tls.crt", "tls.key"):
            (mounted / name).write_bytes((issued / name).read_bytes())
        for _ in range(150):  # 30 s at most: the files are polled every 5 s
            if (answer := await status()) != "unverified":
                break
            await asyncio.sleep(0.2)
        assert answer == 401  # the certificate verified; no token
    finally:
        await runner.cleanup()
        await endpoint.close()
        await api.close()
