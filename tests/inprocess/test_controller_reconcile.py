"""The whole controller (informers, work queue, reconciler, leader election) against the
in-memory API server: what a user sees of a runtime, when writes conflict, connections
break and watches expire, all in milliseconds. The same flows run on a real control
plane in tests/apiserver and tests/cluster; these make the rare interleavings happen
on demand."""

import asyncio
import functools
import itertools
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import REGISTRY, generate_latest

from devcluster.barriers import until, until_quiescent
from devcluster.controller_harness import condition, managed_kinds_of, runtime_manifest
from tests.support.fakekube import FakeKube, Obj
from tests.support.parse_count import counting_parses
from trussium_operator.common import constants as c
from trussium_operator.common import validation
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.common.images import render_image
from trussium_operator.common.managed_fields import GO_OPERATOR_MANAGER
from trussium_operator.common.render import RenderContext
from trussium_operator.controller.machinery import informer, metrics
from trussium_operator.controller.machinery.backoff import Backoff
from trussium_operator.controller.machinery.kube import (
    APPLY_PATCH,
    JSON_PATCH,
    ApiError,
    TransportError,
)
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.manager import Manager, Options
from trussium_operator.controller.metrics import CONTROLLER, QUEUE
from trussium_operator.controller.runtime import reconciler, validated
from trussium_operator.controller.runtime.kinds import ManagedKind, render_managed_objects
from trussium_operator.serving.secure_metrics import MetricsOptions

NS = "team"
MANAGED = managed_kinds_of(runtime_manifest("rt", NS))


@dataclass
class Running:
    fake: FakeKube
    manager: Manager

    def runtime(self, name: str = "rt") -> Obj:
        runtime = self.fake.get("TrussiumRuntime", NS, name)
        assert runtime is not None
        return runtime

    def reasons(self, name: str = "rt") -> list[str]:
        events = sorted(self.fake.objects("Event", NS), key=lambda e: str(e["eventTime"]))
        return [e["reason"] for e in events if e["regarding"]["name"] == name]

    async def condition(self, type_: str, status: str, reason: str, name: str = "rt") -> Obj:
        def check() -> Obj | None:
            runtime = self.runtime(name)
            return runtime if condition(runtime, type_) == (status, reason) else None

        return await until(check, f"{name} {type_}={status} {reason}")

    async def quiescent(self) -> None:
        await until_quiescent(lambda: generate_latest(REGISTRY).decode())


def counter(result: str) -> float:
    labels = {"controller": CONTROLLER, "result": result}
    return REGISTRY.get_sample_value("controller_runtime_reconcile_total", labels) or 0.0


def errors(name: str = "controller_runtime_reconcile_errors_total") -> float:
    return REGISTRY.get_sample_value(name, {"controller": CONTROLLER}) or 0.0


@pytest.fixture
async def running(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Running]:
    # client-go's relist delay (0.4 s and up) would dominate these tests; the rule is the same.
    monkeypatch.setattr(informer, "Backoff", functools.partial(Backoff, base=0.01, cap=0.05))
    # The queue depth gauge is process-wide: a previous test's manager may have left a value.
    metrics.WORKQUEUE_DEPTH.labels(QUEUE).set(0)
    fake = FakeKube()
    manager = Manager(fake, Options(health_address="0", metrics=MetricsOptions("0")))
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    await until(manager.ready, "the controller ready")
    yield Running(fake, manager)
    stop.set()
    assert await asyncio.wait_for(task, 10) == 0


def roll_out(fake: FakeKube, name: str = "rt") -> None:
    """What the Deployment controller writes once every replica is up."""
    deployment = fake.get("Deployment", NS, name)
    assert deployment is not None
    replicas = deployment["spec"].get("replicas", 1)
    counts = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
    status: dict[str, Any] = dict.fromkeys(counts, replicas)
    fake.set_status(
        "Deployment",
        NS,
        name,
        status | {"observedGeneration": deployment["metadata"]["generation"]},
    )


async def reconciled(run: Running, name: str = "rt") -> Obj:
    await until(lambda: run.fake.get("Deployment", NS, name), f"{name}'s Deployment")
    roll_out(run.fake, name)
    runtime = await run.condition("Ready", "True", "RuntimeReady", name)
    await run.quiescent()
    return runtime


async def test_a_runtime_gets_its_objects_and_turns_ready_once_its_deployment_is(
    running: Running,
) -> None:
    fake = running.fake
    fake.apply(runtime_manifest("rt", NS))
    await running.condition("Progressing", "True", "DeploymentGenerationPending")
    uid = running.runtime()["metadata"]["uid"]
    for kind in MANAGED:
        obj = fake.get(kind, NS, "rt")
        assert obj is not None, kind
        assert obj["metadata"]["labels"][c.LABEL_MANAGED_BY] == c.MANAGED_BY, kind
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["uid"], owner["controller"]) == (uid, True), kind
        (entry,) = obj["metadata"]["managedFields"]
        assert (entry["manager"], entry["operation"]) == (c.FIELD_MANAGER, "Apply"), kind
    assert condition(running.runtime(), "Ready") == ("False", "RuntimeNotReady")

    roll_out(fake)
    runtime = await running.condition("Ready", "True", "RuntimeReady")
    assert runtime["status"]["observedGeneration"] == runtime["metadata"]["generation"]
    assert runtime["status"]["lastSuccessfulImage"].endswith(":1.0.0")
    await running.quiescent()
    seen = running.reasons()
    assert (seen[0], seen[-1]) == ("RuntimeProgressing", "RuntimeReady"), seen
    assert seen.count("RuntimeReady") == 1, seen


def status_put(name: str) -> Any:
    return lambda call: call.method == "PUT" and call.path.endswith(f"/{name}/status")


async def test_a_status_write_that_loses_a_race_is_retried_quietly(running: Running) -> None:
    fake = running.fake
    fake.apply(runtime_manifest("rt", NS))
    await reconciled(running)
    requeues, failures = counter("requeue"), errors()
    held = fake.hold(status_put("rt"))

    # The Deployment loses its replicas: the controller reads the runtime from its cache
    # and writes Ready=False, while someone else labels the runtime first.
    fake.set_status("Deployment", NS, "rt", {"readyReplicas": 0, "availableReplicas": 0})
    await asyncio.wait_for(held.arrived.wait(), 10)
    label = {"name": "rt", "namespace": NS, "labels": {"team": "a"}}
    fake.apply({"apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": label}, manager="labeller")
    held.release()

    await running.condition("Ready", "False", "RuntimeNotReady")
    await running.quiescent()
    assert counter("requeue") > requeues, "the 409 was not met"
    assert errors() == failures
    assert "ReconciliationFailed" not in running.reasons()
    assert running.runtime()["metadata"]["labels"] == {"team": "a"}


async def test_a_takeover_that_loses_a_race_is_retried_quietly_and_then_prunes(
    running: Running,
) -> None:
    """The Go operator's Deployment: the guarded takeover patch fails its `test` op (422)
    when someone writes in between; the retry takes over and the apply prunes what
    only the Go operator set."""
    fake = running.fake
    requeues, failures = counter("requeue"), errors()
    held = fake.hold(
        lambda call: call.content_type == JSON_PATCH and call.path.endswith("deployments/rt")
    )
    runtime = fake.apply(runtime_manifest("rt", NS))
    spec = TrussiumRuntime.model_validate(apply_defaults(runtime).object)
    (legacy,) = [o for o in render_managed_objects(spec, None) if o["kind"] == "Deployment"]
    legacy["metadata"]["annotations"] = {"legacy.example/only-go": "yes"}
    fake.create(legacy, manager=GO_OPERATOR_MANAGER)

    await asyncio.wait_for(held.arrived.wait(), 10)
    annotate = [{"op": "add", "path": "/metadata/labels/team", "value": "a"}]
    fake.edit("Deployment", NS, "rt", annotate, manager="kubectl-label")
    held.release()

    def taken_over() -> bool:
        deployment = fake.get("Deployment", NS, "rt") or {}
        managers = {e["manager"] for e in deployment["metadata"]["managedFields"]}
        annotations = deployment["metadata"].get("annotations") or {}
        return GO_OPERATOR_MANAGER not in managers and "legacy.example/only-go" not in annotations

    await until(taken_over, "the legacy fields taken over and pruned")
    await running.quiescent()
    assert counter("requeue") > requeues, "the 422 was not met"
    assert errors() == failures
    assert "ReconciliationFailed" not in running.reasons()
    deployment = fake.get("Deployment", NS, "rt") or {}
    assert deployment["metadata"]["labels"]["team"] == "a", "the other writer's label stays"


async def test_a_broken_connection_is_counted_and_retried_not_reported(running: Running) -> None:
    """ADR 0015: a request with no answer says nothing about the runtime; the retry
    converges it, and only the error metric shows the failed attempts."""
    fake = running.fake
    failures = errors()
    fault = fake.fail(
        lambda call: call.content_type == APPLY_PATCH and "/configmaps/" in call.path,
        TransportError("ServerDisconnectedError"),
        times=2,
    )
    fake.apply(runtime_manifest("rt", NS))
    await reconciled(running)
    assert fault.hits == 2
    assert errors() == failures + 2
    assert "ReconciliationFailed" not in running.reasons()
    assert condition(running.runtime(), "Degraded") == ("False", "AsExpected")


async def test_a_throttled_request_waits_its_retry_after_and_is_not_reported(
    running: Running,
) -> None:
    """ADR 0038: an overloaded API server's 429 says nothing about the runtime. No status
    write and no Warning while it lasts, and each retry waits the Retry-After asked."""
    fake = running.fake
    rejected: list[tuple[float, int]] = []  # (time, calls so far) of each throttled apply

    def rejecting(call: Any) -> bool:
        if call.content_type == APPLY_PATCH and "/configmaps/" in call.path:
            rejected.append((time.monotonic(), len(fake.calls)))
            return True
        return False

    too_many = ApiError(429, "Too Many Requests", "", retry_after=1.0)
    fault = fake.fail(rejecting, too_many, times=3)
    failures = errors()
    fake.apply(runtime_manifest("rt", NS))
    await reconciled(running)
    assert fault.hits == 3
    assert errors() == failures + 3
    gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(rejected)]
    assert min(gaps) >= 1.0, gaps
    throttled = fake.calls[rejected[0][1] : rejected[-1][1]]
    reports = [
        str(call)
        for call in throttled
        if call.write and (call.path.endswith("/rt/status") or "/events" in call.path)
    ]
    assert reports == [], "a status write or an Event while throttled"
    assert "ReconciliationFailed" not in running.reasons()
    assert condition(running.runtime(), "Degraded") == ("False", "AsExpected")


async def test_an_unexpected_exception_is_a_panic_an_error_and_retried(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What controller-runtime does with a panic it recovers: counted in
    reconcile_panics_total and as an error, and retried; never a terminal error."""
    counts = {
        name: errors(name)
        for name in (
            "controller_runtime_reconcile_errors_total",
            "controller_runtime_reconcile_panics_total",
            "controller_runtime_terminal_reconcile_errors_total",
        )
    }
    raised: list[ValueError] = []

    def buggy_once(*args: Any) -> Any:
        if not raised:
            raised.append(ValueError("a bug"))
            raise raised[0]
        return render_image(*args)

    monkeypatch.setattr(reconciler, "render_image", buggy_once)
    running.fake.apply(runtime_manifest("rt", NS))
    await reconciled(running)
    assert raised
    assert {name: errors(name) - before for name, before in counts.items()} == {
        "controller_runtime_reconcile_errors_total": 1,
        "controller_runtime_reconcile_panics_total": 1,
        "controller_runtime_terminal_reconcile_errors_total": 0,
    }


async def test_a_sidecar_removal_that_loses_a_race_is_retried_quietly(running: Running) -> None:
    """The guarded removal of a container someone added fails its `test` op (422) when
    they change it meanwhile; the retry removes what is there now."""
    fake = running.fake
    fake.apply(runtime_manifest("rt", NS))
    await reconciled(running)
    requeues, failures = counter("requeue"), errors()
    held = fake.hold(
        lambda call: call.content_type == JSON_PATCH and call.path.endswith("deployments/rt")
    )
    sidecar = {"name": "sidecar", "image": "busybox:1"}
    add = [{"op": "add", "path": "/spec/template/spec/containers/-", "value": sidecar}]
    fake.edit("Deployment", NS, "rt", add, manager="kubectl-edit")
    await asyncio.wait_for(held.arrived.wait(), 10)
    bump = [
        {"op": "replace", "path": "/spec/template/spec/containers/1/image", "value": "busybox:2"}
    ]
    fake.edit("Deployment", NS, "rt", bump, manager="kubectl-edit")
    held.release()

    def containers() -> list[str]:
        pod = (fake.get("Deployment", NS, "rt") or {})["spec"]["template"]["spec"]
        return [container["name"] for container in pod["containers"]]

    await until(lambda: containers() == [c.CONTAINER_NAME], "the sidecar removed")
    await running.quiescent()
    assert counter("requeue") > requeues, "the 422 was not met"
    assert errors() == failures
    assert "ReconciliationFailed" not in running.reasons()


async def test_a_change_made_while_the_watches_were_down_and_expired_is_not_lost(
    running: Running,
) -> None:
    fake = running.fake
    fake.apply(runtime_manifest("rt", NS))
    await reconciled(running)
    environment = (fake.get("ConfigMap", NS, "rt") or {})["data"]["TRUSSIUM_ENVIRONMENT"]
    calls = len(fake.calls)

    down = fake.fail(
        lambda call: call.query.get("watch") == "true",
        TransportError("ClientConnectorError"),
        times=1_000_000,
    )
    fake.end_watches()
    drift = [{"op": "replace", "path": "/data/TRUSSIUM_ENVIRONMENT", "value": "dev"}]
    fake.edit("ConfigMap", NS, "rt", drift, manager="kubectl-edit")
    fake.compact()
    await until(lambda: down.hits >= 9, "every informer to find the API server gone")
    down.stop()

    def restored() -> bool:
        data = (fake.get("ConfigMap", NS, "rt") or {})["data"]
        return bool(data["TRUSSIUM_ENVIRONMENT"] == environment)

    await until(restored, "the drift undone")
    relists = [
        call
        for call in fake.calls[calls:]
        if call.method == "GET" and call.path.endswith("/configmaps") and "watch" not in call.query
    ]
    assert relists, "the ConfigMap informer never relisted"


async def test_a_runtime_waits_for_its_secret_and_reconciles_once_it_exists(
    running: Running,
) -> None:
    fake = running.fake
    provider = {
        "type": "openai",
        "model": "m",
        "credentialsSecretRef": {"name": "api-key", "key": "token"},
    }
    fake.apply(runtime_manifest("rt", NS, provider=provider))
    await running.condition("ConfigurationValid", "False", "SecretNotFound")
    await running.quiescent()
    assert all(fake.get(kind, NS, "rt") is None for kind in MANAGED)
    assert running.reasons().count("ConfigurationInvalid") == 1

    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "api-key", "namespace": NS},
        "data": {"token": "czNjcjN0"},
    }
    fake.create(secret)
    await running.condition("ConfigurationValid", "True", "ReferencesResolved")
    await reconciled(running)
    secret_calls = [call for call in fake.calls if "/secrets" in call.path]
    assert secret_calls
    assert all(";as=PartialObjectMetadata" in call.accept for call in secret_calls)


async def test_an_idle_controller_reconciles_on_noise_but_writes_nothing(
    running: Running,
) -> None:
    fake = running.fake
    fake.apply(runtime_manifest("rt", NS))
    await reconciled(running)
    calls, reconciles = len(fake.calls), counter("success")

    # Noise: the Deployment controller rewrites the same status, every watch times out.
    deployment = fake.get("Deployment", NS, "rt") or {}
    fake.set_status("Deployment", NS, "rt", deployment["status"])
    fake.end_watches()
    await until(lambda: counter("success") > reconciles, "a reconcile of the noise")
    await running.quiescent()
    assert [write for write in fake.writes(calls) if "/leases/" not in write] == []


async def test_each_reconcile_parses_its_runtime_once(running: Running) -> None:
    """One parse per reconcile, whether its runtime version is new
    (validated, the verdict carrying the parse) or known valid (parsed only); a new
    spec costs one more parse where the cache indexes its Secret references."""
    fake = running.fake
    fake.apply(runtime_manifest("rt", NS))
    await reconciled(running)

    before = counter("success")
    with counting_parses() as parses:
        fake.set_status("Deployment", NS, "rt", {"replicas": 1, "readyReplicas": 0})
        await running.condition("Ready", "False", "RuntimeNotReady")
        roll_out(fake)
        await running.condition("Ready", "True", "RuntimeReady")
        await running.quiescent()
    reconciles = counter("success") - before
    assert reconciles >= 2
    # Each parse_runtime parses the spec model once; nothing else parses a spec.
    assert (len(parses.objects), parses.spec_models) == (reconciles, reconciles)

    before = counter("success")
    with counting_parses() as parses:
        fake.apply(runtime_manifest("rt", NS, replicas=2))
        await until(
            lambda: (fake.get("Deployment", NS, "rt") or {})["spec"].get("replicas") == 2,
            "the new replica count applied",
        )
        await running.quiescent()
    reconciles = counter("success") - before
    assert reconciles >= 1
    assert (len(parses.objects), parses.spec_models) == (reconciles, reconciles + 1)


async def test_a_rollout_validates_its_new_generation_once(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reconciles of one rollout (the apply, then each Deployment status change)
    read one generation, whose status writes move the resourceVersion: one validation."""
    fake = running.fake
    fake.apply(runtime_manifest("rt", NS))
    await reconciled(running)
    generations: list[int] = []

    def counting(obj: Any, *args: Any, **kwargs: Any) -> validation.ValidationResult:
        generations.append(obj["metadata"]["generation"])
        return validation.validate_runtime(obj, *args, **kwargs)

    monkeypatch.setattr(validated, "validate_runtime", counting)
    before = counter("success")
    fake.apply(runtime_manifest("rt", NS, replicas=2))
    await running.condition("Ready", "False", "RuntimeNotReady")
    roll_out(fake)
    runtime = await running.condition("Ready", "True", "RuntimeReady")
    await running.quiescent()
    assert counter("success") - before >= 2
    assert generations == [runtime["metadata"]["generation"]]


async def test_the_log_says_status_updated_exactly_when_the_status_was_written(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    """A second identical failure posts its Event but leaves the status as it is: no
    "status updated" line for it."""
    fake = running.fake
    fake.apply(runtime_manifest("rt", NS))
    await reconciled(running)
    caplog.set_level(logging.INFO, logger="controller.runtime.reconciler")
    caplog.clear()
    since = len(fake.calls)
    forbidden = ApiError(403, "Forbidden", "deployments is forbidden")
    fake.fail(lambda call: call.method == "PATCH" and "/deployments/rt" in call.path, forbidden, 2)
    fake.apply(runtime_manifest("rt", NS, replicas=2))
    await until(
        lambda: (fake.get("Deployment", NS, "rt") or {})["spec"].get("replicas") == 2,
        "the new replica count applied after two failures",
    )
    await running.quiescent()
    assert running.reasons().count("ReconciliationFailed") == 2
    writes = [call for call in fake.calls[since:] if status_put("rt")(call)]
    logged = [r for r in caplog.records if r.getMessage() == "status updated"]
    assert len(logged) == len(writes)


async def test_a_reconcile_with_nothing_new_since_the_last_one_does_no_work(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch events of the controller's own writes queue the runtime again: that
    reconcile reads the versions it left behind and stops before rendering."""
    fake = running.fake
    fake.apply(runtime_manifest("rt", NS))
    await reconciled(running)
    renders: list[str] = []
    manifest = ManagedKind.manifest

    def counted(kind: ManagedKind, context: RenderContext) -> Obj:
        renders.append(kind.kind)
        return manifest(kind, context)

    monkeypatch.setattr(ManagedKind, "manifest", counted)
    calls, successes = len(fake.calls), counter("success")
    running.manager.queue.add(NamespacedName(NS, "rt"))
    await until(lambda: counter("success") > successes, "the reconcile")
    await running.quiescent()
    assert (renders, fake.calls[calls:]) == ([], [])

    # Anything new does: here the Deployment losing its replicas.
    fake.set_status("Deployment", NS, "rt", {"readyReplicas": 0, "availableReplicas": 0})
    await running.condition("Ready", "False", "RuntimeNotReady")
    assert "Deployment" in renders
