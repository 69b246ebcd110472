"""`python -m hack.bench_scale`: how the controller's time, traffic and memory grow.

On the local control plane (`cluster` profile, kwok nodes enough for every
pod), one controller process measures, step by step in one run:

- unrelated objects: M ConfigMaps and M/4 Secrets in other namespaces,
  created before any runtime; the controller's RSS after each M;
- runtimes: the TrussiumRuntimes added to reach each N (server-side applied
  at once, as `kubectl apply --server-side` would), then apply -> all
  reconciled (observedGeneration current, every managed object present) and
  -> all Ready; the controller's
  API requests per added runtime by verb and resource (audit log, by user
  agent); its requests in an idle window; RSS, and CPU seconds per runtime;
- status latency: under a trickle of spec changes (scale, image) after
  convergence, a watch in this process timestamps each Deployment status
  change and the runtime status change that shows it (p50, p95, p99);
- the floor: the controller stopped, the same Deployments applied the same
  way with no operator, to all observed and all Ready.

The 1-minute load average is recorded beside every number. `--output`
saves everything as JSON; `--baseline` prints ratios to an earlier run.
See docs/benchmarks.md ("Scale").
"""

import argparse
import asyncio
import contextlib
import functools
import gc
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from devcluster import ControlPlane, Profile
from devcluster.controller_harness import (
    USER_AGENT_PREFIX,
    Controller,
    managed_kinds_of,
    runtime_manifest,
    sample_sum,
)
from devcluster.hostoperator import install_crds
from hack import bench_scale_numbers as numbers
from trussium_operator.cmdline.kubeconfig import environment_read_once
from trussium_operator.cmdline.metadata_only import METADATA_ONLY, METADATA_ONLY_WATCH
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.controller.machinery.cache import Cache, Change, Store, identity_only
from trussium_operator.controller.machinery.informer import Informer
from trussium_operator.controller.machinery.kube import APPLY_PATCH, JSON, SECRETS, Kube, Resource
from trussium_operator.controller.runtime.kinds import (
    OWNED,
    RUNTIMES,
    render_managed_objects,
)

NAMESPACE = "bench"
FLOOR_NAMESPACE = "floor"
UNRELATED_NAMESPACES = 10
PODS_PER_NODE = 110  # what each kwok node offers (docs/local-control-plane.md)
BENCH_USER_AGENT = "trussium-bench-scale/1"
CONFIGMAPS = Resource("v1", "ConfigMap", "configmaps")
DEPLOYMENTS = OWNED["Deployment"]
DRAIN_SECONDS = 5.0  # after all Ready, before the idle window: the last status writes
POLL_SECONDS = 0.2
APPLY_CONCURRENCY = 16
Obj = dict[str, Any]


def load() -> float:
    """The 1-minute load average, as `uptime` prints it."""
    return round(os.getloadavg()[0], 2)


# --- the controller process, from /proc ---------------------------------------


def proc_status_kib(pid: int, field_name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field_name} for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of the process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def settled_rss_kib(pid: int, limit: float = 30.0) -> int:
    """RSS once it has stopped moving for three seconds (or after `limit` seconds)."""
    samples = [proc_status_kib(pid, "VmRSS")]
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and (len(samples) < 4 or len(set(samples[-4:])) > 1):
        await asyncio.sleep(1)
        samples.append(proc_status_kib(pid, "VmRSS"))
    return samples[-1]


# --- watching the cluster from this process --------------------------------------


def status_only(obj: Obj) -> Obj:
    """What the bench reads of a runtime or a Deployment: identity, generation, status."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "namespace", "generation") if k in meta}
    spec = {"replicas": (obj.get("spec") or {}).get("replicas")}
    return {"metadata": kept, "spec": spec, "status": obj.get("status") or {}}


def condition_true(obj: Obj, type_: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return any(x.get("type") == type_ and x.get("status") == "True" for x in conditions)


def generation_observed(obj: Obj) -> bool:
    generation = obj["metadata"].get("generation")
    return bool(generation) and (obj.get("status") or {}).get("observedGeneration") == generation


@dataclass
class Watches:
    """Informers on one namespace; the status latency is timed in their handlers."""

    kube: Kube
    namespace: str
    latency: numbers.StatusLatency = field(default_factory=numbers.StatusLatency)
    informers: dict[str, Informer] = field(default_factory=dict)

    def add(
        self, name: str, resource: Resource, *, full: bool, handler: Callable[[Change], None]
    ) -> None:
        self.informers[name] = Informer(
            self.kube,
            resource,
            handler,
            namespace=self.namespace,
            accept=(JSON, JSON) if full else (METADATA_ONLY, METADATA_ONLY_WATCH),
            cache=Cache(Store(status_only if full else identity_only)),
        )

    def store(self, name: str) -> Store:
        return self.informers[name].cache.store

    def on_deployment(self, change: Change) -> None:
        if change.new is not None and numbers.replica_counts(change.old) != (
            state := numbers.replica_counts(change.new)
        ):
            self.latency.deployment_changed(key_of(change.new), state, time.monotonic())

    def on_runtime(self, change: Change) -> None:
        if change.new is not None and (change.old or {}).get("status") != change.new["status"]:
            state = numbers.replica_counts(change.new)
            self.latency.runtime_changed(key_of(change.new), state, time.monotonic())

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator["Watches"]:
        tasks = [asyncio.create_task(i.run()) for i in self.informers.values()]
        try:
            for informer in self.informers.values():
                await asyncio.wait_for(informer.cache.synced.wait(), 120)
            yield self
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.contextmanager
def collections_paused() -> Iterator[None]:
    """What this process holds frozen while it timestamps: a full garbage collection
    walks every tracked object (110 to 150 ms at 90,000 objects, load 7), and an
    event arriving meanwhile is stamped that much late; frozen ones are skipped."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def key_of(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


class WaitTimeoutError(Exception):
    """Something the bench waits for did not happen in time."""


async def until(check: Callable[[], bool], what: str, limit: float) -> float:
    """Seconds until `check` holds (polled); WaitTimeoutError naming `what` after `limit`."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > limit:
            raise WaitTimeoutError(f"timed out after {limit:.0f}s waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)
    return time.monotonic() - began


# --- creating things --------------------------------------------------------------


async def connect(plane: ControlPlane) -> Kube:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(plane.kubeconfig), client_configuration=configuration
    )
    configuration.connection_pool_maxsize = 64
    # As the controller's client: no environment lookups in a thread per request, which
    # would delay this process's own timestamps.
    api = environment_read_once(configuration)
    api.user_agent = BENCH_USER_AGENT
    return Kube(api)


async def apply_all(kube: Kube, resource: Resource, items: list[Obj]) -> float:
    """Seconds to server-side apply `items`, APPLY_CONCURRENCY at a time.

    The requests `kubectl apply --server-side` sends (field manager `kubectl`),
    but not one after another: kubectl took 33 s for 100 runtimes at load 10,
    which would time kubectl rather than what follows it."""
    began = time.monotonic()
    calls = [
        functools.partial(
            kube.request,
            "PATCH",
            resource.path(item["metadata"]["namespace"], item["metadata"]["name"]),
            query={"fieldManager": "kubectl"},
            body=item,
            content_type=APPLY_PATCH,
        )
        for item in items
    ]
    await gather_limited(calls, APPLY_CONCURRENCY)
    return time.monotonic() - began


async def gather_limited(calls: Sequence[Callable[[], Awaitable[object]]], limit: int) -> None:
    semaphore = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[object]]) -> None:
        async with semaphore:
            await call()

    await asyncio.gather(*(one(call) for call in calls))


def unrelated_objects(start: int, stop: int) -> Iterator[tuple[Resource, str, Obj]]:
    """ConfigMaps start..stop-1 and a Secret for every fourth, spread over namespaces."""
    payload = "x" * 256
    for i in range(start, stop):
        namespace = f"unrelated-{i % UNRELATED_NAMESPACES}"
        meta = {"name": f"unrelated-{i:06d}", "labels": {"app": "unrelated"}}
        yield CONFIGMAPS, namespace, {"metadata": meta, "data": {"value": payload}}
        if i % 4 == 0:
            yield SECRETS, namespace, {"metadata": meta, "stringData": {"value": payload}}


async def create_unrelated(plane: ControlPlane, kube: Kube, start: int, stop: int) -> float:
    """Seconds to create ConfigMaps start..stop-1 (and their Secrets)."""
    if start == 0 and stop > 0:
        for i in range(UNRELATED_NAMESPACES):
            await asyncio.to_thread(plane.create_namespace, f"unrelated-{i}")
    began = time.monotonic()
    calls = [
        functools.partial(kube.request, "POST", resource.path(namespace), body=body)
        for resource, namespace, body in unrelated_objects(start, stop)
    ]
    await gather_limited(calls, APPLY_CONCURRENCY)
    return time.monotonic() - began


def runtime(i: int, replicas: int) -> Obj:
    return runtime_manifest(f"rt-{i:05d}", NAMESPACE, replicas=replicas)


# Every kind the controller applies for the benchmark's runtimes (no NetworkPolicy, no HPA).
MANAGED_KINDS = managed_kinds_of(runtime(0, 1))


def floor_deployment(i: int, replicas: int) -> Obj:
    """The Deployment the controller renders for runtime i, without the operator: in a
    namespace of its own, no owner, and that namespace's default ServiceAccount (nothing
    creates the runtime's)."""
    obj = apply_defaults(runtime(i, replicas)).object
    obj["metadata"] |= {"uid": "floor", "generation": 1}
    (deployment,) = (
        o
        for o in render_managed_objects(TrussiumRuntime.model_validate(obj))
        if o["kind"] == "Deployment"
    )
    deployment["metadata"].pop("ownerReferences", None)
    deployment["metadata"]["namespace"] = FLOOR_NAMESPACE
    deployment["spec"]["template"]["spec"].pop("serviceAccountName", None)
    return deployment


# --- measuring ------------------------------------------------------------------


@dataclass
class Options:
    runtimes: list[int]
    unrelated: list[int]
    replicas: int
    nodes: int
    idle_seconds: float
    latency_seconds: float
    trickle_rate: float
    timeout: float
    floor: bool


async def measure_floor(plane: ControlPlane, kube: Kube, options: Options) -> dict[int, Obj]:
    """Per N: the same Deployments applied directly, to all observed and all Ready."""
    results: dict[int, Obj] = {}
    await asyncio.to_thread(plane.create_namespace, FLOOR_NAMESPACE)
    watches = Watches(kube, FLOOR_NAMESPACE)
    watches.add("deployments", DEPLOYMENTS, full=True, handler=lambda _: None)
    async with watches.running():
        deployments = watches.store("deployments")

        def observed(count: int) -> bool:
            values = list(deployments.values())
            return len(values) == count and all(map(generation_observed, values))

        def ready(count: int) -> bool:
            values = list(deployments.values())
            return len(values) == count and all(
                numbers.replica_counts(d) == (d["spec"]["replicas"],) * 2 for d in values
            )

        for n_from, n_to in zip([0, *options.runtimes], options.runtimes, strict=False):
            items = [floor_deployment(i, options.replicas) for i in range(n_from, n_to)]
            began = time.monotonic()
            apply_seconds = await apply_all(kube, DEPLOYMENTS, items)
            await until(
                functools.partial(observed, n_to), f"{n_to} Deployments observed", options.timeout
            )
            observed_seconds, observed_load = time.monotonic() - began, load()
            await until(
                functools.partial(ready, n_to), f"{n_to} Deployments Ready", options.timeout
            )
            results[n_to] = {
                "apply_seconds": round(apply_seconds, 2),
                "observed_seconds": round(observed_seconds, 2),
                "ready_seconds": round(time.monotonic() - began, 2),
                "load": {"observed": observed_load, "ready": load()},
            }
            print(f"floor N={n_to}: {json.dumps(results[n_to])}", flush=True)
    return results


@dataclass
class OperatorRun:
    options: Options
    plane: ControlPlane
    kube: Kube
    controller: Controller
    watches: Watches
    windows: list[tuple[Obj, float, float, float]] = field(default_factory=list)
    trickled: int = 0  # spec changes made so far
    toggled: tuple[set[str], set[str]] = field(default_factory=lambda: (set(), set()))

    @property
    def pid(self) -> int:
        return self.controller.pid

    def sample(self) -> Obj:
        return {
            "rss_mib": round(proc_status_kib(self.pid, "VmRSS") / 1024, 1),
            "peak_rss_mib": round(proc_status_kib(self.pid, "VmHWM") / 1024, 1),
            "cpu_seconds": round(cpu_seconds(self.pid), 2),
        }

    def reconciled(self, count: int) -> bool:
        runtimes = list(self.watches.store("runtimes").values())
        if len(runtimes) != count or not all(map(generation_observed, runtimes)):
            return False
        names = {key_of(r) for r in runtimes}
        return all(
            names <= {key_of(o) for o in self.watches.store(kind).values()}
            for kind in MANAGED_KINDS
        )

    def ready(self, count: int) -> bool:
        runtimes = list(self.watches.store("runtimes").values())
        return len(runtimes) == count and all(condition_true(r, "Ready") for r in runtimes)

    async def unrelated_step(self, m_from: int, m_to: int) -> Obj:
        create_seconds = await create_unrelated(self.plane, self.kube, m_from, m_to)
        rss = await settled_rss_kib(self.pid)
        step = {
            "unrelated": m_to,
            "objects": m_to + math.ceil(m_to / 4),
            "create_seconds": round(create_seconds, 2),
            "rss_mib": round(rss / 1024, 1),
            "cpu_seconds": round(cpu_seconds(self.pid), 2),
            "load": {"settled": load()},
        }
        print(f"unrelated M={m_to}: {json.dumps(step)}", flush=True)
        return step

    async def runtime_step(self, n_from: int, n_to: int, m: int) -> Obj:
        options = self.options
        # The bench's own scrapes come before the CPU is read: they are not the controller's work.
        troubles_before = await asyncio.to_thread(self.troubles)
        reconciles_before = await asyncio.to_thread(self.reconciles)
        cpu_before = cpu_seconds(self.pid)
        wall_began, began = time.time(), time.monotonic()
        items = [runtime(i, options.replicas) for i in range(n_from, n_to)]
        apply_seconds = await apply_all(self.kube, RUNTIMES, items)
        await until(lambda: self.reconciled(n_to), f"{n_to} runtimes reconciled", options.timeout)
        reconciled_s, reconciled_load = time.monotonic() - began, load()
        await until(lambda: self.ready(n_to), f"{n_to} runtimes Ready", options.timeout)
        ready_s, ready_load = time.monotonic() - began, load()
        await asyncio.sleep(DRAIN_SECONDS)
        converge_cpu = cpu_seconds(self.pid) - cpu_before
        reconciles = await asyncio.to_thread(self.reconciles) - reconciles_before
        idle_from, idle_cpu_before = time.time(), cpu_seconds(self.pid)
        await asyncio.sleep(options.idle_seconds)
        idle_to = time.time()
        idle_cpu = cpu_seconds(self.pid) - idle_cpu_before
        memory = self.sample() | {"load": load()}
        latency = await self.status_latency(n_to)
        troubles_after = await asyncio.to_thread(self.troubles)
        step: Obj = {
            "runtimes": n_to,
            "unrelated": m,
            "added": n_to - n_from,
            "apply_seconds": round(apply_seconds, 2),
            "reconciled_seconds": round(reconciled_s, 2),
            "ready_seconds": round(ready_s, 2),
            "cpu_seconds_per_runtime": round(converge_cpu / (n_to - n_from), 4),
            "reconciles_per_runtime": round(reconciles / (n_to - n_from), 2),
            "idle_cpu_seconds": round(idle_cpu, 2),
            **{k: memory[k] for k in ("rss_mib", "peak_rss_mib", "cpu_seconds")},
            "status_latency": latency,
            # From the apply to the end of the trickle.
            "troubles": {k: troubles_after[k] - troubles_before[k] for k in troubles_after},
            "load": {
                "reconciled": reconciled_load,
                "ready": ready_load,
                "memory": memory["load"],
                "latency": latency.pop("load"),
            },
        }
        self.windows.append((step, wall_began, idle_from, idle_to))
        print(f"runtimes N={n_to}: {json.dumps(step)}", flush=True)
        return step

    async def status_latency(self, count: int) -> Obj:
        """A trickle of spec changes as users make them, two per runtime, one runtime
        after another: a new image tag (or back to the old), then one replica more
        (or back). Each starts a rollout or a scale, so the Deployment's status moves."""
        latency = self.watches.latency = numbers.StatusLatency(recording=True)
        changes = max(1, int(self.options.latency_seconds * self.options.trickle_rate))
        metrics_before = await asyncio.to_thread(self.queue_metrics)
        with collections_paused():
            await self.trickle(changes, count)
            latency.recording = False
            with contextlib.suppress(WaitTimeoutError):  # still unshown then: unpaired
                await until(lambda: not latency.unpaired, "the last status changes", 15)
        metrics_after = await asyncio.to_thread(self.queue_metrics)
        spent = {k: metrics_after[k] - metrics_before[k] for k in metrics_before}
        return latency.summary() | {
            "changes": changes,
            # Where the controller's share went: waiting in its queue, and reconciling.
            "controller_reconciles": int(spent["reconciles"]),
            "controller_queue_wait_ms_mean": mean_ms(spent["queue_wait"], spent["dequeued"]),
            "controller_reconcile_ms_mean": mean_ms(spent["reconciling"], spent["reconciles"]),
            "load": load(),
        }

    async def trickle(self, changes: int, count: int) -> None:
        began = time.monotonic()
        for i in range(changes):
            k = self.trickled + i
            target = f"rt-{k // 2 % count:05d}"
            toggled = self.toggled[k % 2]
            toggled ^= {target}
            spec: Obj = (
                {"replicas": self.options.replicas + (target in toggled)}
                if k % 2
                else {"image": {"tag": "1.0.1" if target in toggled else "1.0.0"}}
            )
            await self.kube.request(
                "PATCH",
                RUNTIMES.path(NAMESPACE, target),
                body={"spec": spec},
                content_type="application/merge-patch+json",
            )
            next_at = began + (i + 1) / self.options.trickle_rate
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        self.trickled += changes

    def troubles(self) -> dict[str, int]:
        """Totals so far of what goes wrong: failed reconciles, races retried (409, or a
        guarded patch whose test failed), rate-limited re-adds to the queue, and the
        controller's log lines at warning level or above."""
        read = functools.partial(sample_sum, self.controller.scrape())
        with self.controller.log_path.open(errors="replace") as log:
            logged = numbers.troubled_log_lines(log)
        return {
            "failed_reconciles": int(read("controller_runtime_reconcile_errors_total")),
            "races": int(read("controller_runtime_reconcile_total", result="requeue")),
            "queue_retries": int(read("workqueue_retries_total")),
            "warnings_logged": logged,
        }

    def reconciles(self) -> float:
        """Reconciles the controller has finished so far."""
        return sample_sum(
            self.controller.scrape(), "controller_runtime_reconcile_time_seconds_count"
        )

    def queue_metrics(self) -> dict[str, float]:
        """The controller's own workqueue and reconcile totals (its /metrics)."""
        read = functools.partial(sample_sum, self.controller.scrape())
        return {
            "queue_wait": read("workqueue_queue_duration_seconds_sum"),
            "dequeued": read("workqueue_queue_duration_seconds_count"),
            "reconciling": read("controller_runtime_reconcile_time_seconds_sum"),
            "reconciles": read("controller_runtime_reconcile_time_seconds_count"),
        }


async def measure(options: Options) -> Obj:
    """Everything, on one plane: the operator's steps, then the floor with the controller
    stopped (on a cluster as full as the operator left it)."""
    with (
        ControlPlane(Profile.CLUSTER, nodes=options.nodes) as plane,
        tempfile.TemporaryDirectory() as scratch,
    ):
        await asyncio.to_thread(install_crds, plane)
        await asyncio.to_thread(plane.create_namespace, NAMESPACE)
        kube = await connect(plane)
        try:
            results = await measure_operator(plane, kube, options, Path(scratch))
            if options.floor:
                floor = await measure_floor(plane, kube, options)
                for step in results["steps"]:
                    step["floor"] = floor[step["runtimes"]]
            return results
        finally:
            await kube.api.close()


async def measure_operator(plane: ControlPlane, kube: Kube, options: Options, scratch: Path) -> Obj:
    controller = Controller(plane, scratch / "controller.log", identity="bench")
    try:
        await asyncio.to_thread(controller.wait_ready)
        watches = Watches(kube, NAMESPACE)
        watches.add("runtimes", RUNTIMES, full=True, handler=watches.on_runtime)
        watches.add("Deployment", DEPLOYMENTS, full=True, handler=watches.on_deployment)
        for kind in MANAGED_KINDS:
            if kind != "Deployment":
                watches.add(kind, OWNED[kind], full=False, handler=lambda _: None)
        async with watches.running():
            run = OperatorRun(options, plane, kube, controller, watches)
            start = run.sample() | {"unrelated": 0, "objects": 0, "load": {"settled": load()}}
            start["rss_mib"] = round(await settled_rss_kib(run.pid) / 1024, 1)
            unrelated = [start]
            for m_from, m_to in zip([0, *options.unrelated], options.unrelated, strict=False):
                if m_to > m_from:
                    unrelated.append(await run.unrelated_step(m_from, m_to))
            m = options.unrelated[-1]
            before_runtimes = run.sample()
            steps = []
            for n_from, n_to in zip([0, *options.runtimes], options.runtimes, strict=False):
                steps.append(await run.runtime_step(n_from, n_to, m))
            entries = await asyncio.to_thread(controller_entries, plane.audit_log)
        for window in run.windows:
            add_request_counts(entries, *window)
        return {
            "steps": steps,
            "unrelated_steps": unrelated,
            "slopes": {
                "kib_per_runtime": rounded(
                    numbers.slope(
                        [(0, before_runtimes["rss_mib"] * 1024)]
                        + [(s["runtimes"], s["rss_mib"] * 1024) for s in steps]
                    )
                ),
                "kib_per_unrelated_object": rounded(
                    numbers.slope([(s["objects"], s["rss_mib"] * 1024) for s in unrelated])
                ),
            },
        }
    except BaseException:
        sys.stderr.write(f"--- controller log (tail) ---\n{controller.logs()}\n")
        raise
    finally:
        controller.stop()


def add_request_counts(
    entries: list[Obj], step: Obj, since: float, idle_from: float, idle_to: float
) -> None:
    """The controller's requests from the step's apply until its idle window (per added
    runtime), and in the idle window."""
    converge = numbers.request_counts(entries, since, idle_from)
    idle = numbers.request_counts(entries, idle_from, idle_to)
    leases = sum(n for key, n in converge.items() if key.endswith(":leases"))
    step["requests"] = dict(sorted(converge.items()))
    step["requests_per_runtime"] = numbers.per_unit(converge, step["added"])
    step["requests_per_runtime_total"] = round((sum(converge.values()) - leases) / step["added"], 2)
    step["idle_requests"] = dict(sorted(idle.items()))
    step["idle_writes"] = numbers.writes_of(idle, leases=True)
    step["idle_writes_not_leases"] = numbers.writes_of(idle, leases=False)


def mean_ms(total_seconds: float, count: float) -> float | None:
    return round(total_seconds / count * 1000, 1) if count else None


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def controller_entries(audit_log: Path) -> list[Obj]:
    """The controller's audit entries (its user agent), read once at the end."""
    entries = []
    for path in numbers.audit_files(audit_log):
        with path.open() as log:
            for line in log:
                if USER_AGENT_PREFIX in line:
                    entry = json.loads(line)
                    if str(entry.get("userAgent", "")).startswith(USER_AGENT_PREFIX):
                        entries.append(entry)
    return entries


# --- the command ---------------------------------------------------------------------


def counts(text: str) -> list[int]:
    values = [int(v.replace("_", "")) for v in text.split(",")]
    if values != sorted(set(values)) or values[0] < 0:
        raise argparse.ArgumentTypeError(f"want ascending counts like 100,1000: {text!r}")
    return values


def nodes_for(runtimes: int, replicas: int, floor: bool) -> int:
    """kwok nodes for every pod (the floor's too), with a fifth to spare for surges and the
    trickle's scale-ups."""
    pods = runtimes * (2 if floor else 1) * max(replicas, 1) * 1.2 + 10
    return max(3, math.ceil(pods / PODS_PER_NODE))


def parse(argv: list[str] | None) -> tuple[Options, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="python -m hack.bench_scale", description=__doc__)
    parser.add_argument("--runtimes", type=counts, default=counts("100,1000"), help="N steps")
    parser.add_argument(
        "--unrelated",
        type=counts,
        default=counts("0"),
        help="M steps: M ConfigMaps and M/4 Secrets, created before the runtimes",
    )
    parser.add_argument("--replicas", type=int, default=1, help="per runtime; 0: no pods")
    parser.add_argument("--nodes", type=int, help="kwok nodes (default: enough for the pods)")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--latency-seconds", type=float, default=60.0)
    parser.add_argument("--trickle-rate", type=float, default=2.0, help="spec changes per second")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per wait, seconds")
    parser.add_argument(
        "--no-floor", action="store_true", help="skip the floor (Deployments, no operator)"
    )
    parser.add_argument("--output", type=Path, help="write the results as JSON")
    parser.add_argument("--baseline", type=Path, help="an earlier --output: print ratios")
    args = parser.parse_args(argv)
    options = Options(
        runtimes=[n for n in args.runtimes if n > 0],
        unrelated=args.unrelated,
        replicas=args.replicas,
        nodes=args.nodes or nodes_for(max(args.runtimes), args.replicas, not args.no_floor),
        idle_seconds=args.idle_seconds,
        latency_seconds=args.latency_seconds,
        trickle_rate=args.trickle_rate,
        timeout=args.timeout,
        floor=not args.no_floor,
    )
    if not options.runtimes:
        parser.error("--runtimes needs at least one count above 0")
    return options, args


def table(results: Mapping[str, Any]) -> str:
    """The steps as rows; then memory against unrelated objects, slopes, request mixes."""
    head = (
        f"{'N':>6} {'M':>6} | {'apply':>6} {'reconc':>6} {'Ready':>6} | {'floor':>6} "
        f"{'fReady':>6} | {'req/rt':>6} {'CPUms/rt':>8} {'RSS MiB':>8} | {'idle wr':>7} | "
        f"{'lat p50':>7} {'p95':>7} {'p99':>7} {'n':>4} | load"
    )
    rows = [head, "-" * len(head)]
    for s in results["steps"]:
        floor = s.get("floor") or {}
        lat = s["status_latency"]
        rows.append(
            f"{s['runtimes']:>6} {s['unrelated']:>6} | {s['apply_seconds']:6.1f} "
            f"{s['reconciled_seconds']:6.1f} {s['ready_seconds']:6.1f} | "
            f"{fmt(floor.get('observed_seconds')):>6} {fmt(floor.get('ready_seconds')):>6} | "
            f"{s['requests_per_runtime_total']:6.2f} {s['cpu_seconds_per_runtime'] * 1000:8.1f} "
            f"{s['rss_mib']:8.1f} | {s['idle_writes_not_leases']:>7} | "
            f"{fmt(lat['p50_ms']):>7} {fmt(lat['p95_ms']):>7} {fmt(lat['p99_ms']):>7} "
            f"{lat['samples']:>4} | {s['load']['ready']} (ready), {s['load']['latency']} (lat)"
        )
    rows.append(
        "seconds from the step's apply; floor: the Deployments alone, no operator, all observed "
        "and all Ready; req/rt: controller requests per added runtime, Leases apart; idle wr: "
        "writes in the idle window other than Lease renewals; lat: status latency in ms"
    )
    for u in results["unrelated_steps"]:
        rows.append(
            f"M={u['unrelated']} ({u['objects']} unrelated objects), no runtimes: "
            f"RSS {u['rss_mib']:.1f} MiB (load {u['load']['settled']})"
        )
    slopes = results["slopes"]
    rows.append(
        f"slopes: {fmt(slopes['kib_per_runtime'])} KiB per runtime, "
        f"{fmt(slopes['kib_per_unrelated_object'])} KiB per unrelated object"
    )
    for s in results["steps"]:
        rows.append(f"N={s['runtimes']} requests per runtime: {s['requests_per_runtime']}")
    for s in results["steps"]:
        rows.append(f"N={s['runtimes']} troubles, apply to end of trickle: {s['troubles']}")
    return "\n".join(rows)


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


async def run(options: Options) -> Obj:
    results = await measure(options)
    return {
        "parameters": {
            "runtimes": options.runtimes,
            "unrelated": options.unrelated,
            "replicas": options.replicas,
            "nodes": options.nodes,
            "idle_seconds": options.idle_seconds,
            "latency_seconds": options.latency_seconds,
            "trickle_rate": options.trickle_rate,
        },
        "machine": {"cpus": os.cpu_count(), "started_load": list(os.getloadavg())},
        **results,
    }


def main(argv: list[str] | None = None) -> int:
    options, args = parse(argv)
    try:
        results = asyncio.run(run(options))
    except WaitTimeoutError as error:
        print(error, file=sys.stderr)
        return 1
    print(table(results))
    if args.output:
        args.output.write_text(json.dumps(results, indent=2) + "\n")
    if args.baseline:
        print(f"\nratios to {args.baseline} (below 1: better):")
        for name, ratio in numbers.ratios(results, json.loads(args.baseline.read_text())):
            print(f"  {name}: x{ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
