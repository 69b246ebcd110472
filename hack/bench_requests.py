"""`python -m hack.bench_requests`: the CPU a runtime's requests cost the controller, alone.

The floor under the controller's CPU per runtime: a client process on the
controller's own transport (`Kube`, on uvloop as `trussium-controller run`,
or on asyncio's loop) that does nothing but what a new runtime's reconcile
sends and reads. It watches the runtimes and the managed kinds as the
controller does (JSON decoded, nothing cached), and for each runtime that
appears sends the controller's requests: an ownership GET of each managed
object (404), its server-side apply, two status writes and an Event
before each. Everything it sends is rendered and decided before the clock
starts, so the process CPU it prints per runtime is the transport's: aiohttp,
TLS, the event loop and the JSON, with no parse, render, digest, cache or
status work. The plane is the `cluster` profile with kwok nodes, as for
`hack.bench_scale`: the Deployment and PodDisruptionBudget controllers
update the objects' status, and those watch events are read too. The clock
stops once every runtime's requests are answered, every Deployment is
available and every PodDisruptionBudget counts its pod healthy.

Each round is a cold client process on a fresh namespace, the loops in
alternation; prints each round, the medians, and the load.

    .venv/bin/python -m hack.bench_requests [--runtimes 1000] [--rounds 3] [--output F]
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvloop

from devcluster import ControlPlane, Profile
from devcluster.controller_harness import runtime_manifest
from devcluster.hostoperator import install_crds
from hack.bench_scale import apply_all, connect, nodes_for
from trussium_operator.cmdline.kubeconfig import new_api_client
from trussium_operator.common import constants as c
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.defaulting import apply_defaults
from trussium_operator.common.events import EventDecision, decide_events
from trussium_operator.common.render import RenderContext
from trussium_operator.common.status import Outcome, compute_status
from trussium_operator.controller.machinery.kube import (
    APPLY_PATCH,
    EVENTS,
    ApiError,
    Kube,
    Resource,
)
from trussium_operator.controller.runtime.kinds import RUNTIMES, enabled_kinds
from trussium_operator.controller.runtime.recorder import event_body

WORKERS = 4  # the controller's concurrent reconciles (`controller.manager`)
CLIENT_TIMEOUT_SECONDS = 900.0
READY_LINE = "watching"
Obj = dict[str, Any]


def load() -> float:
    return os.getloadavg()[0]


# --- the client: one cold process per round -------------------------------------------


@dataclass(frozen=True)
class Planned:
    """What one runtime's reconcile sends, decided before the clock starts."""

    objects: list[tuple[Resource, Obj]]
    statuses: tuple[Obj, Obj]
    events: tuple[list[EventDecision], list[EventDecision]]


def plan(name: str, namespace: str) -> Planned:
    manifest = runtime_manifest(name, namespace)
    runtime = TrussiumRuntime.model_validate(apply_defaults(manifest).object)
    context = RenderContext(runtime)
    objects = [(kind.resource, kind.manifest(context)) for kind in enabled_kinds(runtime)]
    deployment = next(obj for _, obj in objects if obj["kind"] == "Deployment")
    available = deployment | {
        "metadata": deployment["metadata"] | {"generation": 1},
        "status": {
            "observedGeneration": 1,
            "replicas": 1,
            "updatedReplicas": 1,
            "readyReplicas": 1,
            "availableReplicas": 1,
            "conditions": [{"type": "Available", "status": "True"}],
        },
    }
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    first = compute_status(runtime, deployment=None, service=None, outcome=Outcome(), now=now)
    second = compute_status(runtime, deployment=available, service=None, outcome=Outcome(), now=now)
    return Planned(
        objects, (first, second), (decide_events(None, first), decide_events(first, second))
    )


class Client:
    """The controller with its work taken out: its watches, its requests, its concurrency."""

    def __init__(self, kube: Kube, namespace: str, planned: dict[str, Planned]) -> None:
        self.kube = kube
        self.namespace = namespace
        self.planned = planned
        self.queue: asyncio.Queue[Obj] = asyncio.Queue()
        self.requests: Counter[str] = Counter()
        self.events = 0
        self.done = 0
        self.finished = asyncio.Event()
        # Deployments available, PodDisruptionBudgets with their pod healthy.
        self.settled: dict[str, set[str]] = {"Deployment": set(), "PodDisruptionBudget": set()}

    async def request(self, method: str, path: str, **options: Any) -> Obj:
        self.requests[method] += 1
        return await self.kube.request(method, path, **options)

    async def listed(self, path: str, query: dict[str, Any]) -> Obj:
        """The first list, once a new CRD's storage is ready (until then: 429)."""
        for _ in range(120):
            try:
                return await self.kube.request("GET", path, query=query)
            except ApiError as error:
                if error.status != 429:
                    raise
            await asyncio.sleep(0.5)
        raise TimeoutError(f"{path}: still 429 after 60 s")

    async def watch(self, resource: Resource, selector: str | None, opened: asyncio.Event) -> None:
        query: dict[str, Any] = {"labelSelector": selector} if selector else {}
        path = resource.path(self.namespace)
        listed = await self.listed(path, query)
        query |= {
            "resourceVersion": listed["metadata"]["resourceVersion"],
            "allowWatchBookmarks": "true",
            "timeoutSeconds": int(CLIENT_TIMEOUT_SECONDS) + 60,  # outlasts the round
        }
        async for event in self.kube.watch(path, query, opened=opened.set):
            if event["type"] == "BOOKMARK":
                continue
            self.events += 1
            obj = event["object"]
            if resource is RUNTIMES and event["type"] == "ADDED":
                self.queue.put_nowait(obj)
            elif resource.kind in self.settled and _settled(obj):
                self.settled[resource.kind].add(obj["metadata"]["name"])

    async def work(self) -> None:
        while True:
            obj = await self.queue.get()
            await self.reconcile(obj)
            self.done += 1
            if self.done == len(self.planned):
                self.finished.set()

    async def reconcile(self, obj: Obj) -> None:
        meta = obj["metadata"]
        planned = self.planned[meta["name"]]
        for resource, _ in planned.objects:
            try:
                await self.request("GET", resource.path(self.namespace, meta["name"]))
            except ApiError as error:  # the expected answer: not found
                if not error.not_found:
                    raise
        for resource, rendered in planned.objects:
            reference = rendered["metadata"]["ownerReferences"][0] | {"uid": meta["uid"]}
            body = rendered | {"metadata": rendered["metadata"] | {"ownerReferences": [reference]}}
            await self.request(
                "PATCH",
                resource.path(self.namespace, meta["name"]),
                query={"fieldManager": c.FIELD_MANAGER, "force": "true"},
                body=body,
                content_type=APPLY_PATCH,
            )
        version = meta["resourceVersion"]
        for status, decisions in zip(planned.statuses, planned.events, strict=True):
            for decision in decisions:
                event = event_body(obj, decision, instance="bench", now=datetime.now(UTC))
                await self.request("POST", EVENTS.path(self.namespace), body=event)
            written = await self.request(
                "PUT",
                RUNTIMES.path(self.namespace, meta["name"]) + "/status",
                body={
                    "apiVersion": c.API_VERSION,
                    "kind": c.KIND,
                    "metadata": {
                        "name": meta["name"],
                        "namespace": self.namespace,
                        "resourceVersion": version,
                    },
                    "status": status,
                },
            )
            version = written["metadata"]["resourceVersion"]


async def client(namespace: str, count: int) -> Obj:
    planned = {name: plan(name, namespace) for name in (runtime_name(i) for i in range(count))}
    kinds = {resource.kind: resource for resource, _ in next(iter(planned.values())).objects}
    api = await new_api_client(None)
    kube = Kube(api)
    bench = Client(kube, namespace, planned)
    watched = [(RUNTIMES, None)] + [(r, c.MANAGED_SELECTOR) for r in kinds.values()]
    opened = [asyncio.Event() for _ in watched]
    tasks = [
        asyncio.create_task(bench.watch(resource, selector, flag))
        for (resource, selector), flag in zip(watched, opened, strict=True)
    ]
    tasks += [asyncio.create_task(bench.work()) for _ in range(WORKERS)]
    try:
        await _opened(opened, tasks)
        cpu, wall = time.process_time(), time.monotonic()
        print(READY_LINE, flush=True)
        await asyncio.wait_for(bench.finished.wait(), CLIENT_TIMEOUT_SECONDS)
        while any(len(names) < count for names in bench.settled.values()):
            if time.monotonic() - wall > CLIENT_TIMEOUT_SECONDS:
                raise TimeoutError(f"settled: { {k: len(v) for k, v in bench.settled.items()} }")
            await asyncio.sleep(0.05)
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await api.close()
    return {
        "cpu_ms_per_runtime": round(1000 * cpu / count, 2),
        "requests_per_runtime": round(sum(bench.requests.values()) / count, 2),
        "requests_by_verb": dict(bench.requests),
        "watch_events_per_runtime": round(bench.events / count, 2),
        "wall_seconds": round(wall, 1),
    }


def _settled(obj: Obj) -> bool:
    """The last status update of the runtime's Deployment or PodDisruptionBudget."""
    status = obj.get("status") or {}
    if obj["kind"] == "Deployment":
        return bool(status.get("availableReplicas") == obj["spec"].get("replicas", 1))
    return bool(status.get("currentHealthy", 0) >= 1)


async def _opened(flags: list[asyncio.Event], tasks: list[asyncio.Task[None]]) -> None:
    """Until every watch is open; a watch's failure is raised, not waited out."""
    every = asyncio.ensure_future(asyncio.gather(*(flag.wait() for flag in flags)))
    running: list[asyncio.Future[Any]] = [every, *tasks]
    done, _ = await asyncio.wait(running, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if every not in done:
        every.cancel()
        for task in done:
            task.result()
        raise TimeoutError("the watches did not open within 60 s")


def runtime_name(i: int) -> str:
    return f"rt-{i:05d}"


# --- the bench: a plane, the rounds ---------------------------------------------------


def start_client(
    plane: ControlPlane, namespace: str, count: int, loop: str
) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "hack.bench_requests", "--client", namespace]
    argv += ["--runtimes", str(count), "--loop", loop]
    environment = os.environ | {"KUBECONFIG": str(plane.kubeconfig)}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=environment)


async def one_round(plane: ControlPlane, namespace: str, count: int, loop: str) -> Obj:
    await asyncio.to_thread(plane.create_namespace, namespace)
    process = start_client(plane, namespace, count, loop)
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 120)
        if line.strip() != READY_LINE:
            raise RuntimeError(f"client did not start: {line!r}")
        kube = await connect(plane)
        try:
            manifests = [runtime_manifest(runtime_name(i), namespace) for i in range(count)]
            await apply_all(kube, RUNTIMES, manifests)
        finally:
            await kube.api.close()
        out, _ = await asyncio.to_thread(process.communicate, timeout=CLIENT_TIMEOUT_SECONDS)
        if process.returncode:
            raise RuntimeError(f"client exited {process.returncode}")
        result: Obj = json.loads(out.strip().splitlines()[-1])
        return result | {"loop": loop, "load": round(load(), 2)}
    finally:
        if process.poll() is None:
            process.kill()


async def bench(count: int, rounds: int, loops: list[str]) -> list[Obj]:
    results = []
    # Every round's pods stay: room for them all.
    nodes = nodes_for(count * rounds * len(loops), replicas=1, floor=False)
    with ControlPlane(Profile.CLUSTER, nodes=nodes) as plane:
        await asyncio.to_thread(install_crds, plane)
        for i in range(rounds):
            for loop in loops:
                result = await one_round(plane, f"floor-{i}-{loop}", count, loop)
                print(json.dumps(result), flush=True)
                results.append(result)
    return results


def summary(results: list[Obj], loops: list[str]) -> Obj:
    by_loop = {}
    for loop in loops:
        mine = [r for r in results if r["loop"] == loop]
        by_loop[loop] = {
            key: statistics.median(r[key] for r in mine)
            for key in ("cpu_ms_per_runtime", "requests_per_runtime", "watch_events_per_runtime")
        }
    return by_loop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), action="append")
    parser.add_argument("--output", type=Path, help="save the numbers as JSON")
    parser.add_argument("--client", metavar="NAMESPACE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    loops = args.loop or ["uvloop", "asyncio"]
    if args.client:
        factory = uvloop.new_event_loop if loops[0] == "uvloop" else None
        with asyncio.Runner(loop_factory=factory) as runner:
            print(json.dumps(runner.run(client(args.client, args.runtimes))), flush=True)
        return 0
    before = os.getloadavg()
    results = asyncio.run(bench(args.runtimes, args.rounds, loops))
    medians = summary(results, loops)
    print(
        f"{args.runtimes} runtimes, {args.rounds} rounds; load before {before}, after "
        f"{os.getloadavg()}"
    )
    for loop, numbers in medians.items():
        print(f"{loop:8} median " + "  ".join(f"{k} {v}" for k, v in numbers.items()))
    if args.output:
        args.output.write_text(json.dumps({"rounds": results, "medians": medians}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
