"""The Retry-After arithmetic (ADR 0038): what the client reads from a throttled answer,
and when the work queue gives the key back. kube-apiserver's own 429s are met in
tests/apiserver/test_controller_overload.py."""

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from trussium_operator.controller.machinery.kube import ApiError, Kube, retry_after_seconds
from trussium_operator.controller.machinery.workqueue import ItemBackoff, WorkQueue
from trussium_operator.controller.runtime.errors import Failure, classify

# name -> (status, headers, body), answered at /api/v1/namespaces/ns/configmaps/<name>
ANSWERS: dict[str, tuple[int, dict[str, str], str]] = {
    # What API Priority and Fairness and the in-flight limits send: plain text.
    "apf": (429, {"Retry-After": "2"}, "Too many requests, please try again later."),
    "unavailable": (503, {}, json.dumps({"reason": "ServiceUnavailable", "message": "etcd"})),
    "server-timeout": (
        500,
        {"Retry-After": "5"},
        json.dumps({"reason": "ServerTimeout", "message": "try again"}),
    ),
    "dated": (503, {"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}, "later"),
    "invalid": (422, {}, json.dumps({"reason": "Invalid", "message": "bad field"})),
}


@pytest.fixture
async def kube() -> AsyncIterator[Kube]:
    async def answer(request: web.Request) -> web.Response:
        status, headers, body = ANSWERS[request.match_info["name"]]
        return web.Response(status=status, headers=headers, text=body)

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/configmaps/{name}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kube = Kube(client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{port}")))
    yield kube
    await kube.api.close()
    await runner.cleanup()


async def refusal(kube: Kube, name: str) -> ApiError:
    with pytest.raises(ApiError) as refused:
        await kube.request("GET", f"/api/v1/namespaces/ns/configmaps/{name}")
    return refused.value


async def test_a_throttled_answer_carries_its_retry_after_and_is_transient(kube: Kube) -> None:
    answers = {name: await refusal(kube, name) for name in ANSWERS}
    assert {
        name: (e.status, e.reason, e.retry_after, classify(e)) for name, e in answers.items()
    } == {
        "apf": (429, "Too Many Requests", 2.0, Failure.TRANSIENT),
        "unavailable": (503, "ServiceUnavailable", None, Failure.TRANSIENT),
        "server-timeout": (500, "ServerTimeout", 5.0, Failure.TRANSIENT),
        "dated": (503, "Service Unavailable", None, Failure.TRANSIENT),
        "invalid": (422, "Invalid", None, Failure.REPORTED),
    }


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("1", 1.0),
        (" 30 ", 30.0),
        ("0", 0.0),
        (None, None),
        ("", None),
        ("-1", None),
        ("1.5", None),
        ("²", None),  # a digit to str.isdigit, not to HTTP
        ("Wed, 21 Oct 2026 07:28:00 GMT", None),
        ("9" * 400, float("inf")),  # the queue caps it
    ],
)
def test_only_the_seconds_form_of_retry_after_is_read(
    header: str | None, seconds: float | None
) -> None:
    assert retry_after_seconds(header) == seconds


async def test_a_key_comes_back_after_retry_after_its_backoff_and_the_cap() -> None:
    """Each key waits the longest of its backoff and its Retry-After, never past the cap."""
    queue = WorkQueue[str]("throttling-test", ItemBackoff(base=0.05, cap=0.6))
    loop = asyncio.get_running_loop()
    started = loop.time()
    queue.add_rate_limited("backoff")  # 0.05 s
    queue.add_rate_limited("asked", not_before=0.3)
    queue.add_rate_limited("asked-less", not_before=0.0)  # its backoff, 0.05 s, wins
    queue.add_rate_limited("asked-too-much", not_before=float("inf"))  # the cap, 0.6 s
    back: dict[str, float] = {}
    for _ in range(4):
        key = await asyncio.wait_for(queue.get(), 5)
        assert key is not None
        back[key] = loop.time() - started
        queue.done(key)
    assert list(back)[2:] == ["asked", "asked-too-much"]
    assert 0.05 <= back["backoff"] < 0.3
    assert 0.05 <= back["asked-less"] < 0.3
    assert 0.3 <= back["asked"] < 0.6
    assert 0.6 <= back["asked-too-much"] < 2.0
    queue.shut_down()


async def test_a_throttled_key_added_again_meanwhile_still_waits() -> None:
    """The watch events of what a throttled attempt did write (added while it ran, or
    after) do not bring its key back before Retry-After; a success ends the hold."""
    queue = WorkQueue[str]("throttling-hold-test", ItemBackoff(base=0.001, cap=5.0))
    loop = asyncio.get_running_loop()
    queue.add("during")
    queue.add("after")
    for _ in range(2):
        key = await asyncio.wait_for(queue.get(), 5)
        assert key is not None
        queue.add(key)  # an event while the attempt runs
        queue.add_rate_limited(key, not_before=0.4)
        queue.done(key)
    started = loop.time()
    queue.add("after")  # an event once it failed
    queue.add("fresh")
    assert await asyncio.wait_for(queue.get(), 5) == "fresh"
    queue.done("fresh")
    back: list[tuple[str, float]] = []
    for _ in range(2):
        key = await asyncio.wait_for(queue.get(), 5)
        assert key is not None
        back.append((key, loop.time() - started))
        queue.done(key)
    assert sorted(key for key, _ in back) == ["after", "during"]
    assert min(seconds for _, seconds in back) >= 0.35, back

    queue.add_rate_limited("after", not_before=0.4)
    queue.forget("after")  # it succeeded meanwhile (another attempt)
    queue.add("after")
    assert await asyncio.wait_for(queue.get(), 0.2) == "after"
    queue.shut_down()
