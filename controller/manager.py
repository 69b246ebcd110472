"""The controller's wiring, in one place, and its lifecycle.

Read the watch table (`controller.runtime.watches.watch_table`) as controller-runtime's
builder sentence: For(TrussiumRuntime, generation changed).Owns(each managed
kind of the registry, `controller/runtime/kinds.py`).Watches(Secret metadata,
referencing runtimes).
The manager starts one informer per entry, each filling the cache of its role.
"""

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import REGISTRY

from trussium_operator.cmdline.metadata_only import METADATA_ONLY, METADATA_ONLY_WATCH
from trussium_operator.cmdline.stopping import until_stopped as _until
from trussium_operator.common import constants as c
from trussium_operator.common.conditions import conditions_of, find_condition
from trussium_operator.controller.machinery import metrics
from trussium_operator.controller.machinery.cache import Change
from trussium_operator.controller.machinery.informer import Informer
from trussium_operator.controller.machinery.kube import JSON, Kube, describe
from trussium_operator.controller.machinery.leader import RELEASE_SECONDS, LeaderElector, Timing
from trussium_operator.controller.machinery.names import NamespacedName
from trussium_operator.controller.machinery.workqueue import WorkQueue
from trussium_operator.controller.metrics import (
    CONNECTIONS,
    CONTROLLER,
    QUEUE,
    register_runtime_gauge,
    register_runtime_metrics,
)
from trussium_operator.controller.migration.exclusion import ForeignLeaseGate, LeaseSearch
from trussium_operator.controller.runtime.errors import Failure, classify, retry_after
from trussium_operator.controller.runtime.kinds import MANAGED_KINDS, ManagedKind
from trussium_operator.controller.runtime.reconciler import LEGACY_FIELD_MANAGERS, Reconciler
from trussium_operator.controller.runtime.recorder import Recorder
from trussium_operator.controller.runtime.secret_presence import SecretPresence
from trussium_operator.controller.runtime.watches import (
    SECRETS_ROLE,
    Caches,
    Mapper,
    Watch,
    watch_table,
)
from trussium_operator.controller.webhook_certificates import WebhookCertificates
from trussium_operator.serving.health import probes_app, serve
from trussium_operator.serving.limits import DEFAULT_LIMITS, ConnectionLimits
from trussium_operator.serving.metrics_server import metrics_endpoint
from trussium_operator.serving.secure_metrics import MetricsOptions

log = logging.getLogger("controller.manager")
# The shutdown budget (docs/operations.md): in-flight reconciles get DRAIN_SECONDS
# to finish while the Lease is still renewed, stragglers CANCEL_SECONDS to unwind
# once cancelled, the Lease release leader.RELEASE_SECONDS. 40 s in all, under the chart's
# terminationGracePeriodSeconds, so the process is never killed holding the Lease.
DRAIN_SECONDS = 30.0
CANCEL_SECONDS = 5.0
# The whole budget: the chart's grace period must exceed it (tests/apiserver/test_chart_values.py).
SHUTDOWN_GRACE_SECONDS = DRAIN_SECONDS + CANCEL_SECONDS + RELEASE_SECONDS


@dataclass(frozen=True)
class Options:
    watch_namespace: str | None = None
    workers: int = 4
    leader_elect: bool = True
    leader_election_id: str = c.FIELD_MANAGER
    leader_election_namespace: str = "default"
    timing: Timing = field(default_factory=Timing)
    metrics: MetricsOptions = field(default_factory=MetricsOptions)
    health_address: str = "0.0.0.0:8081"
    # The probe and metrics listeners' limits, the webhook's defaults.
    limits: ConnectionLimits = DEFAULT_LIMITS
    identity: str = "trussium-operator"
    # Field managers whose Update entries are moved to ours (ADR 0008).
    legacy_field_managers: frozenset[str] = LEGACY_FIELD_MANAGERS
    # Reconcile only while no Lease so found (the Go operator's) is held; None: never wait.
    exclusion_lease: LeaseSearch | None = field(default_factory=LeaseSearch)
    # False: no Secret is ever listed or watched (an install without Secret rights, ADR 0028).
    check_secret_references: bool = True
    # Keep the webhook's self-managed certificates (docs/adr/0029); None: someone else does.
    webhook_certificates: WebhookCertificates | None = None


class Manager:
    def __init__(
        self, kube: Kube, options: Options, kinds: tuple[ManagedKind, ...] = MANAGED_KINDS
    ) -> None:
        self.kube = kube
        self.options = options
        self.queue = WorkQueue[NamespacedName](QUEUE)
        metrics.init_controller(CONTROLLER, QUEUE, options.workers, lambda: self.queue.in_flight)
        self.secrets = SecretPresence(checked=options.check_secret_references)
        self.watches = watch_table(self.secrets, kinds)
        self.caches = Caches.for_watches(self.watches)
        self.informers = [self._informer(watch) for watch in self.watches]
        self.reconciler = Reconciler(
            kube,
            self.caches,
            self.secrets,
            Recorder(kube, options.identity),
            options.legacy_field_managers,
            kinds,
        )
        self.gate = (
            ForeignLeaseGate(
                kube, options.exclusion_lease, options.identity, options.timing.retry_period
            )
            if options.exclusion_lease
            else None
        )
        self.certificates = (
            options.webhook_certificates.keeper(kube.api) if options.webhook_certificates else None
        )
        self.elector = (
            LeaderElector(
                kube,
                NamespacedName(options.leader_election_namespace, options.leader_election_id),
                options.identity,
                options.timing,
            )
            if options.leader_elect
            else None
        )

    def _informer(self, watch: Watch) -> Informer:
        return Informer(
            self.kube,
            watch.resource,
            self._enqueue(watch.map_to),
            namespace=self.options.watch_namespace,
            label_selector=watch.label_selector,
            accept=(METADATA_ONLY, METADATA_ONLY_WATCH) if watch.metadata_only else (JSON, JSON),
            cache=self.caches[watch.role],
            optional=watch.optional,
            on_served=self._enqueue_every_runtime,
        )

    async def _run_informer(self, watch: Watch, informer: Informer) -> None:
        """Start listing once the cache this watch filters by has synced: the Secret
        cache admits only referenced Secrets, so listing before the runtimes are
        known would drop Secrets that are referenced."""
        if watch.after is not None:
            await self.caches[watch.after].synced.wait()
        await informer.run()

    async def _look_up_secrets(self) -> None:
        secrets = next(w for w in self.watches if w.role == SECRETS_ROLE)
        await self.secrets.look_up(self.kube, self._enqueue(secrets.map_to))

    def _enqueue_every_runtime(self) -> None:
        """An optional kind's API appeared: every runtime may need its object now."""
        for runtime in self.caches.runtimes.store.values():
            self.queue.add(NamespacedName.of(runtime))

    def _enqueue(self, map_to: Mapper) -> Callable[[Change], None]:
        def enqueue(change: Change) -> None:
            for key in map_to(change):
                self.queue.add(key)

        return enqueue

    def ready(self) -> bool:
        return not self.not_ready()

    def not_ready(self) -> str:
        """Why /readyz fails, empty when ready: an informer not listed and watching (a
        broken one turns it red until it is up to date again), or the Go operator's Lease
        held or unreadable."""
        reasons = [] if all(cache.fresh for cache in self.caches) else ["caches not synced"]
        if self.gate and (gate := self.gate.not_ready()):
            reasons.append(gate)
        return "; ".join(reasons)

    def _ready_statuses(self) -> Iterator[str]:
        for runtime in self.caches.runtimes.store.values():
            ready = find_condition(conditions_of(runtime.get("status")), c.ConditionType.READY)
            yield str(ready.get("status")) if ready else "Unknown"

    async def run(self, stop: asyncio.Event) -> int:
        """Run until `stop` is set (exit 0) or the leader lease is lost (exit 1)."""
        collector = register_runtime_gauge(self._ready_statuses)
        per_runtime = register_runtime_metrics(
            self.caches.runtimes.store.values, lambda: self.elector is None or self.elector.leading
        )
        endpoint = metrics_endpoint(self.options.metrics, REGISTRY, lambda: self.kube.api)
        runners = [
            await serve(
                probes_app(self.ready, self.not_ready),
                self.options.health_address,
                CONNECTIONS,
                limits=self.options.limits,
            ),
            await serve(
                endpoint.app,
                self.options.metrics.address,
                CONNECTIONS,
                ssl_context=endpoint.ssl_context,
                limits=self.options.limits,
            ),
        ]
        informer_tasks = [
            asyncio.create_task(self._run_informer(watch, informer))
            for watch, informer in zip(self.watches, self.informers, strict=True)
        ]
        if self.secrets.checked:
            informer_tasks.append(asyncio.create_task(self._look_up_secrets()))
        if self.gate:
            informer_tasks.append(asyncio.create_task(self.gate.run()))
        if self.certificates:
            informer_tasks.append(asyncio.create_task(self.certificates.run()))
        try:
            return await self._lead_and_work(stop)
        finally:
            for task in informer_tasks:
                task.cancel()
            await asyncio.gather(*informer_tasks, return_exceptions=True)
            for runner in runners:
                if runner is not None:
                    await runner.cleanup()
            await endpoint.close()
            REGISTRY.unregister(collector)
            REGISTRY.unregister(per_runtime)

    async def _lead_and_work(self, stop: asyncio.Event) -> int:
        if not await _until(stop, self._all_synced()):
            return 0
        runtimes = self.caches.runtimes.store
        log.info("caches synced", extra={"fields": {"runtimes": len(runtimes)}})
        if self.elector and not await _until(stop, self.elector.acquire()):
            return 0
        self._enqueue_every_runtime()
        workers = [asyncio.create_task(self._work(stop)) for _ in range(self.options.workers)]
        holding = asyncio.create_task(self.elector.hold() if self.elector else _forever())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([holding, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if holding.done():
            return await _leadership_lost(holding, workers)
        # Stopping: no new key; in-flight reconciles finish while the renew loop keeps
        # the Lease, so it cannot pass to another process while one of them still writes.
        log.info("shutting down: finishing in-flight reconciles")
        self.queue.shut_down()
        drained = asyncio.create_task(asyncio.wait(workers))
        await asyncio.wait(
            [drained, holding], timeout=DRAIN_SECONDS, return_when=asyncio.FIRST_COMPLETED
        )
        drained.cancel()
        if holding.done():
            return await _leadership_lost(holding, workers)
        late = [w for w in workers if not w.done()]
        if late:
            log.warning(
                "cancelling reconciles still running", extra={"fields": {"count": len(late)}}
            )
            for worker in late:
                worker.cancel()
            _, stuck = await asyncio.wait(late, timeout=CANCEL_SECONDS)
            if stuck:
                # Releasing now could let a standby write beside them: let the Lease expire.
                holding.cancel()
                return 0
        holding.cancel()
        await asyncio.gather(holding, return_exceptions=True)
        if self.elector:
            await self.elector.release()
        return 0

    async def _all_synced(self) -> None:
        await asyncio.gather(*(cache.synced.wait() for cache in self.caches))

    async def _work(self, stop: asyncio.Event) -> None:
        """Reconcile keys until the queue shuts down (or `stop` comes while the Go
        operator holds its Lease)."""
        while True:
            gate = self.gate
            if gate and not gate.is_open() and not await _until(stop, gate.wait_open()):
                return  # stopped while the Go operator held its lease
            if (key := await self.queue.get()) is None:
                return
            if self.elector and not self.elector.valid():
                # Not safe to write now; the renew loop either renews in time or reports
                # the loss (and the workers are cancelled). Keep the key for later.
                self.queue.done(key)
                self.queue.add_after(key, self.options.timing.retry_period)
                continue
            if gate and not gate.is_open():
                self.queue.done(key)
                self.queue.add(key)  # the Go operator came back meanwhile: hold it
                continue
            started = time.monotonic()
            result = "success"
            try:
                await self.reconciler.reconcile(key)
            except Exception as error:
                failure = classify(error)
                if failure.counted:
                    result = "error"
                    metrics.RECONCILE_ERRORS.labels(CONTROLLER).inc()
                    if failure is Failure.BUG:  # controller-runtime's recovered panic
                        metrics.RECONCILE_PANICS.labels(CONTROLLER).inc()
                    log.warning(
                        "reconcile error, retrying with backoff",
                        exc_info=error if failure.traceback else None,
                        extra={"fields": key.fields() | {"error": describe(error)}},
                    )
                else:
                    result = "requeue"
                self.queue.add_rate_limited(key, not_before=retry_after(error))
            else:
                self.queue.forget(key)
            finally:
                self.queue.done(key)
                metrics.RECONCILE_TIME.labels(CONTROLLER).observe(time.monotonic() - started)
                metrics.RECONCILE_TOTAL.labels(CONTROLLER, result).inc()


async def _leadership_lost(holding: asyncio.Task[None], workers: list[asyncio.Task[None]]) -> int:
    """The renew deadline passed: another leader may already be active, so stop writing now."""
    log.error("stopping: leadership lost", exc_info=holding.exception())
    for worker in workers:
        worker.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
    return 1


async def _forever() -> None:
    await asyncio.Event().wait()
