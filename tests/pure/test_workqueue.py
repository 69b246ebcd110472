"""The work queue's guarantees: dedup, one in flight per key, backoff, rate limit."""

import asyncio

import pytest
from prometheus_client import REGISTRY

from trussium_operator.controller.machinery.tokenbucket import TokenBucket
from trussium_operator.controller.machinery.workqueue import ItemBackoff, WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_key_added_twice_is_handed_out_once() -> None:
    queue = WorkQueue[str]("t")
    queue.add("ns/a")
    queue.add("ns/a")
    queue.add("ns/b")
    assert len(queue) == 2
    assert await queue.get() == "ns/a"
    assert await queue.get() == "ns/b"


async def test_a_key_re_added_while_in_flight_waits_for_done() -> None:
    queue = WorkQueue[str]("t")
    queue.add("ns/a")
    key = await queue.get()
    queue.add("ns/a")
    assert len(queue) == 0, "a second worker must not get a key that is in flight"
    waiting = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not waiting.done()
    queue.done(key or "")
    assert await asyncio.wait_for(waiting, 1) == "ns/a"


async def test_done_without_re_add_does_not_requeue() -> None:
    queue = WorkQueue[str]("t")
    queue.add("ns/a")
    queue.done(await queue.get() or "")
    assert len(queue) == 0


async def test_workers_blocked_in_get_wake_up_on_add() -> None:
    queue = WorkQueue[str]("t")
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    for key in ("a/1", "a/2", "a/3"):
        queue.add(key)
    got = await asyncio.wait_for(asyncio.gather(*getters), 1)
    assert sorted(k or "" for k in got) == ["a/1", "a/2", "a/3"]


async def test_shut_down_releases_waiting_workers_and_hands_out_nothing() -> None:
    queue = WorkQueue[str]("t")
    waiting = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.shut_down()
    assert await asyncio.wait_for(waiting, 1) is None
    queue.add("ns/a")
    assert await queue.get() is None


def test_backoff_doubles_per_failure_up_to_the_cap_and_resets_on_forget() -> None:
    backoff = ItemBackoff[str](base=0.005, cap=1.0)
    delays = [backoff.when("k") for _ in range(10)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[-1] == 1.0
    assert backoff.when("other") == 0.005, "backoff is per key"
    backoff.forget("k")
    assert backoff.when("k") == 0.005


def test_token_bucket_allows_a_burst_then_spaces_retries_at_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)
    clock.now = 10.0
    assert bucket.reserve() == 0.0, "tokens refill over time"


async def test_rate_limited_add_waits_for_the_backoff() -> None:
    queue = WorkQueue[str]("t", backoff=ItemBackoff[str](base=0.05))
    queue.add_rate_limited("ns/a")
    assert len(queue) == 0
    assert await asyncio.wait_for(queue.get(), 1) == "ns/a"


async def test_an_earlier_delayed_add_wins_over_a_later_one() -> None:
    queue = WorkQueue[str]("t")
    queue.add_after("ns/a", 0.01)
    queue.add_after("ns/a", 30)
    assert await asyncio.wait_for(queue.get(), 1) == "ns/a"


async def test_unfinished_work_and_longest_processor_are_read_at_scrape_time() -> None:
    clock = FakeClock()
    queue = WorkQueue[str]("progress-test", clock=clock)

    def sample(name: str) -> float | None:
        return REGISTRY.get_sample_value(
            name, {"name": "progress-test", "controller": "progress-test"}
        )

    assert sample("workqueue_unfinished_work_seconds") == 0.0
    queue.add("ns/a")
    queue.add("ns/b")
    first = await queue.get()
    clock.now = 3.0
    second = await queue.get()
    clock.now = 5.0
    assert sample("workqueue_unfinished_work_seconds") == 5.0 + 2.0
    assert sample("workqueue_longest_running_processor_seconds") == 5.0
    queue.done(first or "")
    queue.done(second or "")
    assert sample("workqueue_unfinished_work_seconds") == 0.0
    assert sample("workqueue_longest_running_processor_seconds") == 0.0
