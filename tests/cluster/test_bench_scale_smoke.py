"""A short run of the scale benchmark (`hack.bench_scale`), as documented: it
completes, and its JSON holds every number. No timing is asserted: the numbers
are for people, on a known load (docs/benchmarks.md, "Scale")."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

OWN_PLANE = pytest.mark.own_plane("a control plane of its own (the scale benchmark starts one)")
pytestmark = [pytest.mark.cluster, OWN_PLANE]

STEP_NUMBERS = (
    "apply_seconds",
    "reconciled_seconds",
    "ready_seconds",
    "requests_per_runtime_total",
    "cpu_seconds_per_runtime",
    "idle_cpu_seconds",
    "rss_mib",
    "peak_rss_mib",
    "cpu_seconds",
    "idle_writes",
    "idle_writes_not_leases",
)
LOADS = ("reconciled", "ready", "memory", "latency")
FLOOR_NUMBERS = ("apply_seconds", "observed_seconds", "ready_seconds")
LATENCY = (
    "samples",
    "changes",
    "already_shown",
    "unpaired",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "controller_reconciles",
    "controller_queue_wait_ms_mean",
    "controller_reconcile_ms_mean",
)


def test_a_short_run_reports_every_number(tmp_path: Path) -> None:
    output = tmp_path / "scale.json"
    argv = [
        sys.executable,
        "-m",
        "hack.bench_scale",
        "--runtimes=20",
        "--unrelated=0,50",
        "--idle-seconds=3",
        "--latency-seconds=4",
        f"--output={output}",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    results = json.loads(output.read_text())
    [step] = results["steps"]
    assert (step["runtimes"], step["unrelated"]) == (20, 50)
    for name in STEP_NUMBERS:
        assert isinstance(step[name], int | float), name
    assert all(isinstance(step["load"][name], float) for name in LOADS)
    assert all(isinstance(step["floor"][name], float) for name in FLOOR_NUMBERS)
    # Every runtime got its five managed objects applied at least once.
    for resource in ("configmaps", "serviceaccounts", "services", "deployments"):
        assert step["requests_per_runtime"][f"patch:{resource}"] >= 1, resource
    latency = step["status_latency"]
    assert set(LATENCY) <= latency.keys()
    assert latency["changes"] > 0
    assert latency["controller_reconciles"] > 0  # the trickle's changes were reconciled
    # The trickle moved Deployment statuses, and the watcher saw it.
    assert latency["samples"] + latency["unpaired"] + latency["already_shown"] > 0
    # 20 runtimes on a healthy plane: nothing failed, nothing was logged as trouble.
    assert step["troubles"]["failed_reconciles"] == 0, step["troubles"]
    assert step["troubles"]["warnings_logged"] == 0, step["troubles"]
    assert {"races", "queue_retries"} <= step["troubles"].keys()
    assert [u["unrelated"] for u in results["unrelated_steps"]] == [0, 50]
    assert isinstance(results["slopes"]["kib_per_runtime"], float)
    assert isinstance(results["slopes"]["kib_per_unrelated_object"], float)
    assert "N=20" in done.stdout  # the table
