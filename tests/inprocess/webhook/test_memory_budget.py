"""The memory budget for request bodies: what a client sees past it, and that every
path out of a request gives its share back."""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest

from devcluster.barriers import until
from devcluster.layout import free_port
from trussium_operator.common.decode_cost import decoded_bytes
from trussium_operator.serving.limits import SMALL_REVIEW_DECODED_BYTES
from trussium_operator.serving.listener import Listener
from trussium_operator.webhook.app import AdmissionSettings, create_admission_app
from trussium_operator.webhook.budget import MemoryBudget, OverBudgetError
from trussium_operator.webhook.metrics import WebhookMetrics
from trussium_operator.webhook.server import start_site

from .reviews import OPERATOR, review, runtime

MIB = 1024 * 1024
BUDGET_WAIT = 0.2
PATH = "/validate-trussiumruntime"
ANSWER_WITHIN = 30.0


async def test_a_reservation_past_the_budget_waits_then_fails_and_gives_nothing_back() -> None:
    budget = MemoryBudget(total=100, wait=BUDGET_WAIT)
    with budget.hold() as first:
        await first.grow_to(80)
        with pytest.raises(OverBudgetError), budget.hold() as second:
            await second.grow_to(30)
        assert budget.available == 20
    assert budget.available == 100


async def test_a_waiting_reservation_gets_what_another_request_returns() -> None:
    budget = MemoryBudget(total=100, wait=ANSWER_WITHIN)
    first = budget.hold()
    await first.__enter__().grow_to(100)

    async def second() -> int:
        with budget.hold() as reservation:
            await reservation.grow_to(60)
            return budget.available

    waiting = asyncio.create_task(second())
    await _until_queued(budget, 1)
    assert not waiting.done()
    first.__exit__(None, None, None)
    assert await asyncio.wait_for(waiting, ANSWER_WITHIN) == 40
    assert budget.available == 100


async def test_a_cancelled_request_returns_its_share_and_leaves_the_queue() -> None:
    budget = MemoryBudget(total=100, wait=ANSWER_WITHIN)

    async def reader(size: int) -> None:
        with budget.hold() as reservation:
            await reservation.grow_to(size)
            await asyncio.Event().wait()  # a client that never finishes its body

    holder = asyncio.create_task(reader(70))
    queued = asyncio.create_task(reader(50))
    await _until_queued(budget, 1)
    assert budget.available == 30
    for task in (holder, queued):
        task.cancel()
    await asyncio.gather(holder, queued, return_exceptions=True)
    assert budget.available == 100
    with budget.hold() as reservation:  # nothing stale ahead in the queue
        await reservation.grow_to(100)


async def _until_queued(budget: MemoryBudget, count: int) -> None:
    """Until `count` reservations wait (each task needs a few loop turns to get there)."""
    for _ in range(100):
        if budget.queued == count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{budget.queued} reservations queued, expected {count}")


@contextlib.asynccontextmanager
async def serving(budget: MemoryBudget) -> AsyncIterator[int]:
    settings = AdmissionSettings(
        operator_username=OPERATOR, max_request_bytes=4 * MIB, body_timeout=60, budget=budget
    )
    port = free_port()
    listener: Listener = await start_site(
        create_admission_app(settings, WebhookMetrics()), f"127.0.0.1:{port}"
    )
    try:
        yield port
    finally:
        await listener.cleanup()


async def send(
    port: int, head: bytes, body: bytes
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head + body)
    await writer.drain()
    return reader, writer


def head(length: int, *extra: str) -> bytes:
    lines = [f"POST {PATH} HTTP/1.1", "Host: x", f"Content-Length: {length}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    async with asyncio.timeout(ANSWER_WITHIN):
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        body = await reader.readexactly(int(headers["Content-Length"]))
    return int(lines[0].split()[1]), headers, body


async def test_a_body_past_the_budget_is_answered_429_and_the_budget_comes_back() -> None:
    # A body being read holds four times its bytes: the least it costs decoded.
    budget = MemoryBudget(total=4 * MIB, wait=BUDGET_WAIT)
    async with serving(budget) as port:
        # A body that stops short of its declared length holds most of the budget...
        holder = await send(port, head(2 * MIB), b" " * (1008 * 1024))
        await until(lambda: budget.available < 128 * 1024, "the holder's share", ANSWER_WITHIN)
        # ...so a plain review of 900 KiB waits briefly, then is told why and when to retry.
        large = json.dumps(review(runtime()) | {"padding": " " * (900 * 1024)}).encode()
        reader, writer = await send(port, head(len(large)), large)
        status, headers, body = await answer(reader)
        assert status == 429
        assert headers["Retry-After"] == "1"
        assert "memory budget for request bodies (4194304 bytes)" in json.loads(body)["error"]
        writer.close()
        # A small review needs no budget: it is answered even now.
        small = json.dumps(review(runtime())).encode()
        reader, writer = await send(port, head(len(small)), small)
        assert (await answer(reader))[0] == 200
        writer.close()
        # The holder goes away mid-body: its share comes back, and the large review fits.
        holder[1].close()
        await until(lambda: budget.available == budget.total, "its share back", ANSWER_WITHIN)
        reader, writer = await send(port, head(len(large)), large)
        assert (await answer(reader))[0] == 200
        writer.close()


async def test_a_review_costing_more_decoded_than_the_budget_is_answered_413_unread() -> None:
    budget = MemoryBudget(total=4 * MIB, wait=BUDGET_WAIT)
    async with serving(budget) as port:
        # 150 KB of empty objects: some 5 MB once decoded (about 25 times its size).
        tiny = review(runtime() | {"status": {"conditions": [{}] * 50_000}})
        body = json.dumps(tiny, separators=(",", ":")).encode()
        reader, writer = await send(port, head(len(body)), body)
        status, _, answer_body = await answer(reader)
        assert status == 413
        error = json.loads(answer_body)["error"]
        assert "more than the webhook's memory budget of 4194304 bytes" in error
        assert "holds up to 100" in error  # values: each `{` and `,` counted
        writer.close()
        assert budget.available == budget.total
        # The same runtime without them is decided as ever.
        body = json.dumps(review(runtime() | {"status": {}})).encode()
        reader, writer = await send(port, head(len(body)), body)
        assert (await answer(reader))[0] == 200
        writer.close()


async def test_a_decoded_review_holds_its_estimate_until_answered() -> None:
    budget = MemoryBudget(total=4 * MIB, wait=BUDGET_WAIT)
    lookups: list[int] = []
    release = asyncio.Event()

    async def secret_names(namespace: str) -> frozenset[str]:
        lookups.append(budget.available)
        await release.wait()
        return frozenset()

    settings = AdmissionSettings(
        operator_username=OPERATOR,
        max_request_bytes=4 * MIB,
        budget=budget,
        secret_names=secret_names,
        secret_lookup_timeout=ANSWER_WITHIN,
    )
    port = free_port()
    listener = await start_site(
        create_admission_app(settings, WebhookMetrics()), f"127.0.0.1:{port}"
    )
    try:
        # 10,000 labels: some 2 MB estimated decoded, held while the validating hook
        # awaits its Secret lookup.
        labels = {f"k{i}": "v" for i in range(10_000)}
        obj = runtime(imagePullSecrets=[{"name": "pull"}])
        obj["metadata"]["labels"] = labels
        body = json.dumps(review(obj)).encode()
        reader, writer = await send(port, head(len(body)), body)
        await until(lambda: bool(lookups), "the Secret lookup", ANSWER_WITHIN)
        assert budget.total - lookups[0] >= decoded_bytes(body) - SMALL_REVIEW_DECODED_BYTES
        release.set()
        assert (await answer(reader))[0] == 200
        writer.close()
        await until(lambda: budget.available == budget.total, "all back", ANSWER_WITHIN)
    finally:
        await listener.cleanup()
