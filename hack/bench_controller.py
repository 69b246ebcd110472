"""`python -m hack.bench_controller`: the controller's cost on a local cluster.

Applies N TrussiumRuntimes at once on the cluster profile, and prints the
time from `kubectl apply` to all Ready, the controller's API requests by
verb during that and during an idle period (from the audit log, by the
controller's user agent), and its memory after the idle period (VmRSS)
and at its peak (VmHWM).
"""

import argparse
import json
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devcluster import ControlPlane, Profile
from devcluster.controller_harness import (
    Controller,
    audit_entries,
    runtime_manifest,
)
from devcluster.hostoperator import install_crds

NAMESPACE = "bench"


def all_ready(plane: ControlPlane, count: int) -> bool:
    answer = plane.kubectl("get", "trussiumruntimes", "-n", NAMESPACE, "-o", "json")
    ready = 0
    for item in json.loads(answer.stdout)["items"]:
        for condition in (item.get("status") or {}).get("conditions") or ():
            if condition["type"] == "Ready" and condition["status"] == "True":
                ready += 1
    return ready == count


def by_verb(entries: list[dict[str, Any]]) -> str:
    """Counts per verb:resource, e.g. `patch:deployments=100`."""
    counts = Counter(
        f"{e.get('verb')}:{(e.get('objectRef') or {}).get('resource', '?')}" for e in entries
    )
    total = sum(counts.values())
    return f"{total} total; " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))


def memory_mib(pid: int, field: str) -> float:
    """`VmHWM` (peak) or `VmRSS` (now) of a process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m hack.bench_controller", description=__doc__)
    parser.add_argument("--runtimes", type=int, default=100)
    parser.add_argument("--idle-seconds", type=int, default=60)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument(
        "--controller-arg",
        action="append",
        default=[],
        help="a `trussium-controller run` flag, e.g. --controller-arg=--workers=8 (repeatable)",
    )
    args = parser.parse_args()
    with ControlPlane(Profile.CLUSTER) as plane, tempfile.TemporaryDirectory() as scratch:
        install_crds(plane)
        plane.create_namespace(NAMESPACE)
        controller = Controller(
            plane, Path(scratch) / "controller.log", *args.controller_arg, identity="bench"
        )
        try:
            controller.wait_ready()
            items = [runtime_manifest(f"rt-{i:03d}", NAMESPACE) for i in range(args.runtimes)]
            started_at = datetime.now(UTC)
            began = time.monotonic()
            # In lists of 100: one kubectl for a thousand can outlast its timeout under load.
            for first in range(0, len(items), 100):
                manifests = {
                    "apiVersion": "v1",
                    "kind": "List",
                    "items": items[first : first + 100],
                }
                plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(manifests))
            while not all_ready(plane, args.runtimes):
                if time.monotonic() - began > args.timeout:
                    raise SystemExit(f"not all Ready within {args.timeout:.0f}s")
                time.sleep(1)
            elapsed = time.monotonic() - began
            ready_at = datetime.now(UTC)
            time.sleep(5)  # let the last status updates drain before measuring idle
            idle_from = datetime.now(UTC)
            time.sleep(args.idle_seconds)
            idle_to = datetime.now(UTC)
            print(f"runtimes: {args.runtimes} {' '.join(args.controller_arg)}")
            print(f"apply -> all Ready: {elapsed:.1f}s")
            print(f"requests until Ready: {by_verb(audit_entries(plane, started_at, ready_at))}")
            idle = audit_entries(plane, idle_from, idle_to)
            print(f"requests during {args.idle_seconds}s idle: {by_verb(idle)}")
            rss, peak = (memory_mib(controller.pid, field) for field in ("VmRSS", "VmHWM"))
            print(f"memory after the idle period (VmRSS): {rss:.1f} MiB")
            print(f"peak memory (VmHWM): {peak:.1f} MiB")
        finally:
            controller.stop()


if __name__ == "__main__":
    main()
