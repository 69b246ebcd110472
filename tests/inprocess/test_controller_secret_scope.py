"""The Secret cache keeps only referenced Secrets (controller/runtime/secret_presence.py), yet a
runtime never reads a Secret that exists as missing: the whole controller against the
in-memory API server, with the lookup of a Secret referenced after the list held at
will to race a watch event."""

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest
from prometheus_client import REGISTRY, generate_latest

from devcluster.barriers import until, until_quiescent
from devcluster.controller_harness import condition, runtime_manifest
from tests.support.fakekube import FakeKube, Obj
from trussium_operator.controller.machinery import informer, metrics
from trussium_operator.controller.machinery.backoff import Backoff
from trussium_operator.controller.machinery.kube import SECRETS, ApiError, TransportError
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.manager import Manager, Options
from trussium_operator.controller.metrics import QUEUE
from trussium_operator.controller.runtime.referenced_secrets import Presence
from trussium_operator.serving.secure_metrics import MetricsOptions

NS = "team"
API_KEY = NamespacedName(NS, "api-key")
CREDENTIALS = {
    "type": "openai",
    "model": "m",
    "credentialsSecretRef": {"name": "api-key", "key": "k"},
}
Start = Callable[[], Coroutine[Any, Any, Manager]]


def secret(name: str, namespace: str = NS) -> Obj:
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": {"k": "czNjcjN0"}}


def referencing(name: str = "rt", **spec: Any) -> Obj:
    return runtime_manifest(name, NS, **({"provider": CREDENTIALS} | spec))


def lookups(fake: FakeKube) -> list[str]:
    """Secret lookups by name (the Go operator's Lease is looked up by name too)."""
    return [
        str(call)
        for call in fake.calls
        if "fieldSelector" in call.query and call.path.endswith("/secrets")
    ]


def secret_lists(fake: FakeKube) -> int:
    return sum(1 for c in fake.calls if c.path == SECRETS.path() and "watch" not in c.query)


async def reads(fake: FakeKube, status: str, reason: str, name: str = "rt") -> None:
    def check() -> bool:
        runtime = fake.get("TrussiumRuntime", NS, name)
        return runtime is not None and condition(runtime, "ConfigurationValid") == (status, reason)

    await until(check, f"{name} ConfigurationValid={status} {reason}")


async def quiescent() -> None:
    await until_quiescent(lambda: generate_latest(REGISTRY).decode())


@pytest.fixture
def fake() -> FakeKube:
    return FakeKube()


@pytest.fixture
async def start(fake: FakeKube, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Start]:
    """Start the controller once the test has put what it wants in place before it."""
    monkeypatch.setattr(informer, "Backoff", functools.partial(Backoff, base=0.01, cap=0.05))
    metrics.WORKQUEUE_DEPTH.labels(QUEUE).set(0)
    stop = asyncio.Event()
    tasks: list[asyncio.Task[int]] = []

    async def started() -> Manager:
        manager = Manager(fake, Options(health_address="0", metrics=MetricsOptions("0")))
        tasks.append(asyncio.create_task(manager.run(stop)))
        await until(manager.ready, "the controller ready")
        return manager

    yield started
    stop.set()
    for task in tasks:
        assert await asyncio.wait_for(task, 10) == 0


async def test_only_referenced_secrets_are_cached_whether_listed_or_watched(
    fake: FakeKube, start: Start
) -> None:
    for i in range(30):
        fake.create(secret(f"unrelated-{i}", namespace=f"other-{i % 3}"))
    fake.create(secret("api-key"))
    fake.apply(referencing())
    runtimes_listed = fake.hold(lambda call: call.path.endswith("/trussiumruntimes"))
    starting = asyncio.create_task(start())
    await asyncio.wait_for(runtimes_listed.arrived.wait(), 10)
    await until(lambda: any("/horizontalpodautoscalers" in c.path for c in fake.calls), "lists")
    assert secret_lists(fake) == 0  # filtering by an index not filled yet would drop api-key
    runtimes_listed.release()
    manager = await starting
    store = manager.secrets.cache.store
    assert len(store) == 1  # the list kept the one referenced Secret
    await reads(fake, "True", "ReferencesResolved")
    assert lookups(fake) == []  # the list came after the runtimes: nothing to look up

    for i in range(30, 40):  # arrive as watch events
        fake.create(secret(f"unrelated-{i}"))
    await quiescent()
    assert len(store) == 1

    watching = fake.fail(
        lambda call: "/secrets" in call.path and "watch" in call.query,
        TransportError("ClientConnectorError"),
        times=1_000_000,
    )
    fake.end_watches()
    await until(lambda: watching.hits >= 1, "the Secret watch broken")
    for i in range(40, 60):  # missed by the watch: only the relist sees them
        fake.create(secret(f"unrelated-{i}"))
    fake.compact()
    listed = secret_lists(fake)
    watching.stop()
    await until(lambda: secret_lists(fake) > listed and manager.ready(), "a relist")
    await quiescent()
    assert len(store) == 1
    assert store.get(NamespacedName(NS, "api-key")) is not None


async def test_a_secret_referenced_after_the_list_is_looked_up_not_read_as_missing(
    fake: FakeKube, start: Start
) -> None:
    fake.create(secret("api-key"))
    manager = await start()
    assert len(manager.secrets.cache.store) == 0  # nobody referenced it at the list

    fake.apply(referencing())
    await reads(fake, "True", "ReferencesResolved")
    assert lookups(fake) == [f"GET {SECRETS.path(NS)}"]
    assert all(";as=PartialObjectMetadata" in c.accept for c in fake.calls if "/secrets" in c.path)
    assert len(manager.secrets.cache.store) == 1


async def test_a_secret_found_while_the_list_runs_stays_though_the_list_passed_it_over(
    fake: FakeKube, start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(informer, "PAGE_SIZE", 1)
    fake.create(secret("api-key"))
    fake.create(secret("zz-other"))  # a second page, after api-key's
    second_page = fake.hold(lambda call: "/secrets" in call.path and "continue" in call.query)
    starting = asyncio.create_task(start())
    await asyncio.wait_for(second_page.arrived.wait(), 10)  # api-key's page went, unreferenced
    fake.apply(referencing())
    await until(lambda: lookups(fake), "a lookup of api-key")
    second_page.release()
    manager = await starting
    await reads(fake, "True", "ReferencesResolved")
    assert manager.secrets.presence(API_KEY) is Presence.PRESENT


async def test_a_secret_created_after_its_runtime_resolves_it(fake: FakeKube, start: Start) -> None:
    manager = await start()
    fake.apply(referencing())
    await reads(fake, "False", "SecretNotFound")  # the lookup answered: it does not exist
    fake.create(secret("api-key"))
    await reads(fake, "True", "ReferencesResolved")
    assert manager.secrets.presence(API_KEY) is Presence.PRESENT


async def test_a_deleted_secret_is_reported_and_an_unreferenced_one_forgotten(
    fake: FakeKube, start: Start
) -> None:
    fake.create(secret("api-key"))
    fake.create(secret("other-key"))
    fake.apply(referencing())
    manager = await start()
    await reads(fake, "True", "ReferencesResolved")

    await fake.request("DELETE", SECRETS.path(NS, "api-key"))
    await reads(fake, "False", "SecretNotFound")

    other = {
        "type": "openai",
        "model": "m",
        "credentialsSecretRef": {"name": "other-key", "key": "k"},
    }
    fake.apply(referencing(provider=other))
    await reads(fake, "True", "ReferencesResolved")
    store = manager.secrets.cache.store
    assert [s["metadata"]["name"] for s in store.values()] == ["other-key"]


async def test_a_lookup_answer_older_than_a_watch_event_is_discarded(
    fake: FakeKube, start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.create(secret("api-key"))
    manager = await start()
    answered, release = asyncio.Event(), asyncio.Event()
    serve = fake.request

    async def slow_lookup(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        answer = await serve(method, path, **kwargs)
        if "fieldSelector" in (kwargs.get("query") or {}):
            answered.set()
            await release.wait()
        return answer

    monkeypatch.setattr(fake, "request", slow_lookup)
    fake.apply(referencing())
    await asyncio.wait_for(answered.wait(), 10)  # answered "it exists", not yet delivered
    await quiescent()
    # Unknown: neither missing nor present, so no status yet.
    assert condition(fake.get("TrussiumRuntime", NS, "rt") or {}, "ConfigurationValid") == ("", "")

    await serve("DELETE", SECRETS.path(NS, "api-key"))  # the watch says it is gone
    await reads(fake, "False", "SecretNotFound")
    release.set()
    await quiescent()
    assert manager.secrets.presence(API_KEY) is Presence.MISSING
    await reads(fake, "False", "SecretNotFound")


async def test_a_failed_lookup_reports_the_check_failed_and_is_retried(
    fake: FakeKube, start: Start
) -> None:
    fake.create(secret("api-key"))
    await start()
    fake.fail(lambda call: "fieldSelector" in call.query, ApiError(500, "InternalError", "etcd"))
    fake.apply(referencing())
    await reads(fake, "False", "ReferenceCheckFailed")
    await reads(fake, "True", "ReferencesResolved")
    assert len(lookups(fake)) == 2


async def test_a_throttled_lookup_waits_its_retry_after_and_reports_nothing(
    fake: FakeKube, start: Start
) -> None:
    """ADR 0038: a 429 is no answer about the Secret; the runtime waits for the lookup."""
    fake.create(secret("api-key"))
    await start()
    asked: list[float] = []

    def lookup(call: Any) -> bool:
        if "fieldSelector" in call.query:
            asked.append(time.monotonic())
            return True
        return False

    too_many = ApiError(429, "Too Many Requests", "", retry_after=1.0)
    fake.fail(lookup, too_many, times=2)
    fake.apply(referencing())
    await until(lambda: len(asked) == 2, "a second throttled lookup")
    await reads(fake, "True", "ReferencesResolved")
    assert asked[1] - asked[0] >= 1.0
    assert len(lookups(fake)) == 3
    events = fake.objects("Event", NS)
    assert [e["reason"] for e in events if e["type"] == "Warning"] == []
