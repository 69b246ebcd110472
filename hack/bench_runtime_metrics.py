"""What the per-runtime series cost one /metrics scrape of the leader.

Builds N cached runtimes with realistic statuses, then times rendering the
exposition of a registry holding only the per-runtime collector (median of
several rounds), and prints milliseconds, bytes and series per scrape. The
controller serves /metrics on its event loop, so this is time its reconciles wait.

    .venv/bin/python -m hack.bench_runtime_metrics [--runtimes 1000,5000] [--rounds 7]
"""

import argparse
import statistics
import time
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from trussium_operator.controller.metrics import SERIES_PER_RUNTIME, RuntimeMetrics

IMAGE = "ghcr.io/trussiumhq/trussium"


def runtime(i: int) -> dict[str, Any]:
    condition = {"status": "True", "message": "2 of 2 replicas are ready.", "observedGeneration": 1}
    return {
        "metadata": {"namespace": f"team-{i % 50}", "name": f"runtime-{i}"},
        "status": {
            "readyReplicas": 2,
            "availableReplicas": 2,
            "desiredImage": f"{IMAGE}:1.{i % 7}.0",
            "currentImage": f"{IMAGE}:1.{i % 7}.0",
            "conditions": [
                condition | {"type": "Ready", "reason": "RuntimeReady"},
                condition | {"type": "Upgrading", "status": "False", "reason": "UpgradeComplete"},
            ],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtimes", default="1000,5000")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"{'runtimes':>8} {'series':>7} {'ms/scrape':>10} {'KiB':>8}")
    for count in (int(n) for n in args.runtimes.split(",")):
        runtimes = [runtime(i) for i in range(count)]
        registry = CollectorRegistry()
        registry.register(RuntimeMetrics(lambda r=runtimes: r, lambda: True))  # type: ignore[misc]
        times = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            text = generate_latest(registry)
            times.append(time.perf_counter() - started)
        series = count * SERIES_PER_RUNTIME
        print(
            f"{count:>8} {series:>7} {statistics.median(times) * 1000:>10.1f} "
            f"{len(text) / 1024:>8.0f}"
        )


if __name__ == "__main__":
    main()
