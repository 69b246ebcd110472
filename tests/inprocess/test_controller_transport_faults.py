"""The controller against a misbehaving API server (a fake on loopback): every transport
failure is retried with a growing backoff, leadership ends only at the renew deadline,
a broken informer restarts with readiness red meanwhile, and shutdown finishes its
work before it hands the Lease over."""

import asyncio
import itertools
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable

import pytest

from devcluster.layout import free_port
from tests.support.fake_apiserver import FakeApiServer, Lease, Watch
from trussium_operator.controller import manager as manager_module
from trussium_operator.controller.machinery.backoff import Backoff
from trussium_operator.controller.machinery.informer import Informer
from trussium_operator.controller.machinery.kube import SECRETS, Resource
from trussium_operator.controller.machinery.leader import LeaderElector, LeadershipLostError, Timing
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.manager import Manager, Options
from trussium_operator.controller.runtime.reconciler import Reconciler
from trussium_operator.serving.secure_metrics import MetricsOptions

FAST = Timing(lease_duration=3.0, renew_deadline=2.0, retry_period=0.2)
LOCK = NamespacedName("ns", "lock")
CONFIGMAPS = Resource("v1", "ConfigMap", "configmaps")


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    fake = await FakeApiServer().start()
    yield fake
    await fake.stop()


async def until(check: Callable[[], object], what: str, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# --- backoff ------------------------------------------------------------------


def test_the_delay_doubles_to_its_cap_with_jitter_between_half_and_all() -> None:
    low = Backoff(jitter=lambda: 0.0, clock=FakeClock())
    high = Backoff(jitter=lambda: 1.0, clock=FakeClock())
    assert [round(low.failed(), 2) for _ in range(8)] == [0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 15, 15]
    assert [round(high.failed(), 2) for _ in range(8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30]


def test_a_success_resets_the_delay_only_after_two_healthy_minutes() -> None:
    clock = FakeClock()
    backoff = Backoff(jitter=lambda: 1.0, clock=clock)
    for _ in range(4):
        backoff.healthy()  # a list succeeded, then the watch broke at once
        clock.now += 0.1
        backoff.failed()
    backoff.healthy()
    clock.now += 119.0
    assert backoff.failed() == pytest.approx(12.8), "a short healthy spell does not reset"
    backoff.healthy()
    clock.now += 120.0
    assert backoff.failed() == pytest.approx(0.8)


def test_an_always_failing_watch_lists_a_handful_of_times_in_ten_seconds() -> None:
    """The review saw 2,795 LISTs in 10 s; with the shortest jitter it is now 5 at most."""
    clock = FakeClock()
    backoff = Backoff(jitter=lambda: 0.0, clock=clock)
    lists = 0
    while clock.now < 10.0:
        lists += 1
        backoff.healthy()
        clock.now += backoff.failed()
    assert lists <= 5


# --- leader election ----------------------------------------------------------

FAILURES = [Lease.DROP, Lease.TRUNCATE, Lease.ERROR, Lease.HANG]


async def test_renewals_that_fail_in_every_way_are_retried_inside_the_deadline(
    server: FakeApiServer,
) -> None:
    elector = LeaderElector(server.kube(), LOCK, "me", FAST)
    await elector.acquire()
    holding = asyncio.create_task(elector.hold())
    try:
        for failure in FAILURES:
            writes = len(server.record.lease_writes)
            # One failure, then renewals work: the leader must keep the lease.
            server.script.leases.append(failure)
            await until(lambda: len(server.record.lease_writes) > writes, f"after {failure}")  # noqa: B023
            assert not holding.done(), f"{failure} ended the leadership"
            assert elector.valid()
    finally:
        holding.cancel()
        await asyncio.gather(holding, return_exceptions=True)
        await elector.kube.api.close()


async def test_a_stop_that_arrives_as_a_renewal_succeeds_stops_the_leader(
    server: FakeApiServer,
) -> None:
    """The stop lands between the renewal's answer and the renew loop resuming (on
    Python 3.11, asyncio.wait_for returned the answer there and dropped the stop, so
    a stopping controller renewed on and its shutdown hung)."""
    elector = LeaderElector(server.kube(), LOCK, "me", FAST)
    try:
        await elector.acquire()
        holding = asyncio.create_task(elector.hold())

        async def renewed_as_the_stop_comes() -> bool:
            asyncio.get_running_loop().call_soon(holding.cancel)
            return True

        elector._try = renewed_as_the_stop_comes  # type: ignore[method-assign]
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(5):
                await holding
    finally:
        await elector.kube.api.close()


@pytest.mark.parametrize(("holder", "released"), [("me", True), ("other", False)])
async def test_a_release_after_a_renewal_landed_unanswered_reads_the_lease_again(
    server: FakeApiServer, holder: str, released: bool
) -> None:
    """A renewal cancelled on the wire (a stop) may land without our copy learning its
    resourceVersion: the release then conflicts, reads the Lease, and releases it if it
    is still ours; a Lease another process took meanwhile is left alone."""
    elector = LeaderElector(server.kube(), LOCK, "me", FAST)
    try:
        await elector.acquire()
        assert server.lease is not None
        server.lease["metadata"]["resourceVersion"] = "renewed-elsewhere"
        server.lease["spec"]["holderIdentity"] = holder
        await elector.release()
        assert server.lease["spec"]["holderIdentity"] == ("" if released else holder)
    finally:
        await elector.kube.api.close()


@pytest.mark.parametrize("failure", [Lease.DROP, Lease.HANG])
async def test_the_leader_steps_down_when_the_renew_deadline_has_really_passed(
    server: FakeApiServer, failure: Lease
) -> None:
    elector = LeaderElector(server.kube(), LOCK, "me", FAST)
    try:
        await elector.acquire()
        holding = asyncio.create_task(elector.hold())
        await until(lambda: len(server.record.lease_writes) >= 3, "a few renewals")
        server.script.default_lease = failure
        with pytest.raises(LeadershipLostError):
            await holding
        lost_at = time.monotonic()
        last_renewal = server.record.lease_writes[-1][0]
        assert lost_at - last_renewal >= FAST.renew_deadline - 0.05
        assert lost_at - last_renewal < FAST.renew_deadline + FAST.retry_period + 1.0
        assert not elector.valid()
    finally:
        await elector.kube.api.close()


async def test_a_standby_keeps_trying_to_acquire_through_every_failure(
    server: FakeApiServer,
) -> None:
    server.script.leases.extend(FAILURES)
    elector = LeaderElector(server.kube(), LOCK, "me", FAST)
    try:
        await asyncio.wait_for(elector.acquire(), 20)
        assert server.lease is not None
        assert server.lease["spec"]["holderIdentity"] == "me"
        assert not server.script.leases, "every scripted failure was met"
    finally:
        await elector.kube.api.close()


# --- informers ----------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        Watch.GONE,
        Watch.GONE_STATUS,
        Watch.DROP,
        Watch.CLOSE,
        Watch.OVERLONG,
        Watch.MALFORMED,
    ],
)
async def test_a_watch_that_always_fails_is_retried_with_a_growing_delay(
    server: FakeApiServer, failure: Watch
) -> None:
    """Whether it relists (410, unreadable, short) or resumes (dropped), never in a loop."""
    server.script.default_watch = failure
    kube = server.kube()
    informer = Informer(kube, CONFIGMAPS, lambda _: None, backoff=Backoff(base=0.1))
    task = asyncio.create_task(informer.run())
    path = CONFIGMAPS.path()
    try:
        await until(lambda: len(server.watches_of(path)) >= 6, "five retries")
        starts = [at for at, _ in server.watches_of(path)]
        if failure is Watch.DROP:
            starts = starts[::2]  # aiohttp resends once on a cut reused connection
            assert len(server.lists_of(path)) == 1, "a dropped connection resumes, no relist"
        gaps = [b - a for a, b in itertools.pairwise(starts)]
        for failures, gap in enumerate(gaps[:2]):
            assert gap >= 0.05 * 2**failures - 0.01, f"retry {failures + 1} came after {gap:.3f}s"
        assert not task.done(), "the informer ended"
        assert informer.cache.synced.is_set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.api.close()


def _readyz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


async def test_a_broken_informer_restarts_and_readiness_is_red_until_it_relisted(
    server: FakeApiServer,
) -> None:
    port = free_port()
    kube = server.kube()
    options = Options(
        leader_elect=False,
        health_address=f"127.0.0.1:{port}",
        metrics=MetricsOptions("0"),
        exclusion_lease=None,
    )
    manager = Manager(kube, options)
    stop = asyncio.Event()
    running = asyncio.create_task(manager.run(stop))
    path = SECRETS.path()
    try:
        await until(lambda: manager.ready(), "ready")
        assert await asyncio.to_thread(_readyz, port) == 200
        lists = len(server.lists_of(path))
        gate = server.list_gates[path] = asyncio.Event()
        for failure in (Watch.OVERLONG, Watch.MALFORMED, Watch.GONE):
            await until(lambda: server.held.get(path), "a Secret watch open")
            server.watch_script(path).append(failure)
            server.end_watches()  # the Secret watch resumes, and meets the failure
            await until(lambda: len(server.lists_of(path)) > lists, f"relist after {failure}")  # noqa: B023
            assert await asyncio.to_thread(_readyz, port) == 503, failure
            gate.set()
            await until(lambda: manager.ready(), f"ready again after {failure}")
            assert await asyncio.to_thread(_readyz, port) == 200
            gate.clear()
            lists = len(server.lists_of(path))
        assert not running.done()
    finally:
        server.list_gates.clear()
        stop.set()
        await asyncio.wait_for(running, 10)
        await kube.api.close()


async def test_a_dropped_watch_resumes_from_the_last_version_without_a_relist(
    server: FakeApiServer,
) -> None:
    kube = server.kube()
    informer = Informer(kube, CONFIGMAPS, lambda _: None)
    task = asyncio.create_task(informer.run())
    path = CONFIGMAPS.path()
    try:
        await until(lambda: server.held.get(path), "a watch open")
        version = server.bump()  # the next bookmark carries it
        server.watch_script(path).extend([Watch.DROP, Watch.DROP])  # aiohttp resends once
        server.end_watches()
        await until(lambda: len(server.watches_of(path)) >= 3, "a watch after the drop")
        await until(lambda: server.held.get(path), "the watch resumed")
        assert informer.cache.fresh
        assert server.watches_of(path)[-1][1] == version
        assert len(server.lists_of(path)) == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.api.close()


async def test_a_watch_broken_mid_stream_resumes_after_the_last_event_it_handled(
    server: FakeApiServer,
) -> None:
    kube = server.kube()
    informer = Informer(kube, CONFIGMAPS, lambda _: None)
    task = asyncio.create_task(informer.run())
    path = CONFIGMAPS.path()
    try:
        await until(lambda: server.held.get(path), "a watch open")
        server.watch_script(path).append(Watch.BREAK)
        server.end_watches()
        await until(lambda: len(server.watches_of(path)) >= 3, "a watch after the break")
        broken, resumed = server.watches_of(path)[-2:]
        assert int(resumed[1]) == int(broken[1]) + 1, "resumed after the event seen, no replay"
        assert len(server.lists_of(path)) == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.api.close()


# --- workers and shutdown -----------------------------------------------------


class Recording(Reconciler):
    """Records keys; each reconcile waits for `finish` (set by default)."""

    def __init__(self) -> None:
        self.started: list[tuple[float, NamespacedName]] = []
        self.ended: list[tuple[float, NamespacedName]] = []
        self.cancelled: list[tuple[float, NamespacedName]] = []
        self.finish = asyncio.Event()
        self.finish.set()

    async def reconcile(self, key: NamespacedName) -> None:
        self.started.append((time.monotonic(), key))
        try:
            await self.finish.wait()
        except asyncio.CancelledError:
            self.cancelled.append((time.monotonic(), key))
            raise
        self.ended.append((time.monotonic(), key))


def leader_options(**overrides: object) -> Options:
    values: dict[str, object] = {
        "leader_election_namespace": "ns",
        "leader_election_id": "lock",
        "identity": "me",
        "timing": FAST,
        "workers": 1,
        "health_address": "0",
        "metrics": MetricsOptions("0"),
        "exclusion_lease": None,  # no Go operator here
    }
    return Options(**(values | overrides))  # type: ignore[arg-type]


async def test_a_worker_that_meets_an_invalid_lease_keeps_the_key_and_keeps_working(
    server: FakeApiServer,
) -> None:
    clock = FakeClock()
    kube = server.kube()
    manager = Manager(kube, leader_options())
    manager.elector = LeaderElector(kube, LOCK, "me", FAST, clock=clock)
    manager.reconciler = recording = Recording()
    try:
        await manager.elector.acquire()
        clock.now = FAST.renew_deadline + 1  # e.g. the process was frozen: not safe to write
        worker = asyncio.create_task(manager._work(asyncio.Event()))
        manager.queue.add(NamespacedName("ns", "a"))
        await until(lambda: not len(manager.queue) and not manager.queue.in_flight, "key taken")
        assert not recording.started
        clock.now = 0.5  # renewed in time after all
        await until(lambda: recording.ended, "the key reconciled")
        assert [key for _, key in recording.ended] == [NamespacedName("ns", "a")]
        assert not worker.done(), "the worker exited"
    finally:
        manager.queue.shut_down()
        await kube.api.close()


async def test_shutdown_finishes_in_flight_work_while_renewing_then_releases(
    server: FakeApiServer,
) -> None:
    kube = server.kube()
    manager = Manager(kube, leader_options())
    manager.reconciler = recording = Recording()
    recording.finish.clear()
    stop = asyncio.Event()
    running = asyncio.create_task(manager.run(stop))
    try:
        await until(lambda: server.record.lease_writes, "leading")
        manager.queue.add(NamespacedName("ns", "a"))
        await until(lambda: recording.started, "a reconcile in flight")
        stop.set()
        stopped_at = time.monotonic()
        renewals = len(server.record.lease_writes)
        # Longer than the Lease lasts: renewals must go on meanwhile.
        await until(
            lambda: time.monotonic() - stopped_at > FAST.lease_duration, "drain", seconds=10
        )
        assert len(server.record.lease_writes) >= renewals + 5
        assert all(holder == "me" for _, holder in server.record.lease_writes)
        recording.finish.set()
        assert await asyncio.wait_for(running, 10) == 0
        released_at, holder = server.record.lease_writes[-1]
        assert holder == "", "the Lease is released"
        assert released_at >= recording.ended[0][0], "released only after the reconcile ended"
    finally:
        stop.set()
        recording.finish.set()
        await kube.api.close()


async def test_shutdown_cancels_work_past_the_drain_budget_before_releasing(
    server: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(manager_module, "DRAIN_SECONDS", 0.5)
    kube = server.kube()
    manager = Manager(kube, leader_options())
    manager.reconciler = recording = Recording()
    recording.finish.clear()  # never finishes on its own
    stop = asyncio.Event()
    running = asyncio.create_task(manager.run(stop))
    try:
        await until(lambda: server.record.lease_writes, "leading")
        manager.queue.add(NamespacedName("ns", "a"))
        await until(lambda: recording.started, "a reconcile in flight")
        stop.set()
        assert await asyncio.wait_for(running, 10) == 0
        released_at, holder = server.record.lease_writes[-1]
        assert holder == ""
        assert recording.cancelled, "the reconcile was cancelled"
        assert released_at >= recording.cancelled[0][0]
    finally:
        stop.set()
        await kube.api.close()
