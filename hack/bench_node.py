"""`python -m hack.bench_node`: how fast the node profile brings up real containers.

Prints the node profile's startup time (until node-0 is Ready), then, with
the real controller running on the host, the time from `kubectl apply` of
a minimal TrussiumRuntime (the stand-in runtime image, imported into the
node's containerd) to its Ready condition, which needs the pod's container
started and its readiness probe passed: median of N runs, one runtime at a
time, each deleted (and its pod gone) before the next. Also the load average.
"""

import argparse
import functools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from devcluster import ControlPlane, Profile
from devcluster.components import locate, locate_node
from devcluster.controller_harness import Controller, runtime_manifest, wait_for
from devcluster.hostoperator import install_crds
from devcluster.node import build_image

NAMESPACE = "bench"
STANDIN = {"repository": "ghcr.io/trussiumhq/trussium", "tag": "0.9.0"}


def ready(plane: ControlPlane, name: str) -> bool:
    answer = plane.kubectl("get", "trussiumruntime", name, "-n", NAMESPACE, "-o", "json")
    conditions = (json.loads(answer.stdout).get("status") or {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def no_pods(plane: ControlPlane) -> bool:
    return not plane.kubectl("get", "pods", "-n", NAMESPACE, "-o", "name").stdout.strip()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m hack.bench_node", description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    locate(), locate_node()  # a first build must not count
    standin = build_image("standin")
    began = time.monotonic()
    with ControlPlane(Profile.NODE) as plane:
        print(f"node profile startup: {time.monotonic() - began:.1f}s")
        install_crds(plane)
        plane.node.import_image(standin)
        plane.create_namespace(NAMESPACE)
        log = Path(tempfile.mkdtemp(prefix="bench-node-")) / "controller.log"
        controller = Controller(plane, log, f"--watch-namespace={NAMESPACE}")
        try:
            controller.wait_ready()
            seconds = []
            for run in range(args.runs):
                name = f"bench-{run}"
                manifest = runtime_manifest(
                    name, NAMESPACE, image=STANDIN, runtime={"shutdownDrainTimeoutSeconds": 1}
                )
                start = time.monotonic()
                plane.kubectl("apply", "-f", "-", input=json.dumps(manifest))
                wait_for(functools.partial(ready, plane, name), f"{name} Ready", timeout=300)
                seconds.append(time.monotonic() - start)
                plane.kubectl("delete", "trussiumruntime", name, "-n", NAMESPACE)
                wait_for(lambda: no_pods(plane), "the pods to go", timeout=300)
        finally:
            controller.stop()
    shown = ", ".join(f"{s:.1f}" for s in seconds)
    print(
        f"minimal runtime, apply to Ready: median {statistics.median(seconds):.1f}s over "
        f"{len(seconds)} runs ({shown}); load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
