"""Admission latency, throughput and start-up memory of one webhook process over TLS
on loopback.

Starts `trussium-webhook serve` (files mode, a fresh certificate) pinned to
one core, reads its resident memory once it is ready, sends validating
AdmissionReviews of the production sample from this process (kept off the
server's core when there is another), and prints the median and
99th-percentile latency, the throughput, and the CPU time per review of the
server and of this client. Bounded by --requests and --max-seconds. With
--baseline-source DIR, another checkout's code (e.g. the previous release)
is run by the same interpreter in alternation, --rounds times, and the
medians of both and their ratios are printed with the load average. With
--baseline, compares against an earlier --output file and exits 1 when the
p99 latency regressed by more than --max-regression.

    .venv/bin/python -m hack.bench_webhook --requests 3000 --concurrency 4 \
        [--baseline-source DIR --rounds 5]
"""

import argparse
import asyncio
import json
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from devcluster.layout import free_port
from trussium_operator.webhook.certs_cli import main_certs

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "tests" / "samples" / "valid" / "production.yaml"
READY_TIMEOUT = 30.0
# The server's core, read before `main` moves this process (the client) off it.
SERVER_CORE = min(os.sched_getaffinity(0))


def review_body() -> bytes:
    obj = next(d for d in yaml.safe_load_all(SAMPLE.read_text()) if d["kind"] == "TrussiumRuntime")
    obj["metadata"]["namespace"] = "bench"
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "bench",
                "kind": {
                    "group": "runtime.trussium.io",
                    "version": "v1alpha1",
                    "kind": "TrussiumRuntime",
                },
                "operation": "CREATE",
                "namespace": "bench",
                "name": obj["metadata"]["name"],
                "userInfo": {"username": "bench"},
                "object": obj,
            },
        }
    ).encode()


def start_server(
    cert_dir: Path,
    port: int,
    health_port: int,
    log: Path,
    *flags: str,
    source: Path | None = None,
    metrics_port: int | None = None,
) -> subprocess.Popen[bytes]:
    """The webhook pinned to the first core, its /metrics in plain HTTP on `metrics_port`
    (else none); `source`: run another checkout's code."""
    metrics = (
        [f"--metrics-bind-address=127.0.0.1:{metrics_port}", "--metrics-secure=false"]
        if metrics_port
        else ["--metrics-bind-address=0"]
    )
    # Files mode: no API server, so no access reviews of Secret references; a variable,
    # which another checkout's code ignores if it predates them.
    env = os.environ | {"KUBECONFIG": os.devnull, "TRUSSIUM_AUTHORIZE_SECRET_REFERENCES": "false"}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    with log.open("wb") as log_file:
        return subprocess.Popen(
            [
                "taskset",
                "-c",
                str(SERVER_CORE),
                sys.executable,
                "-m",
                "trussium_operator.webhook.cli",
                "serve",
                f"--cert-dir={cert_dir}",
                f"--bind-address=127.0.0.1:{port}",
                f"--health-bind-address=127.0.0.1:{health_port}",
                *metrics,
                "--operator-username=bench",
                "--shutdown-delay=0",
                "--log-level=warning",
                *flags,
            ],
            cwd=source or REPO,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
        )


def wait_ready(health_port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"webhook exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("webhook not ready")


async def fire(
    url: str, ca_file: Path, requests: int, concurrency: int, max_seconds: float
) -> tuple[list[float], float]:
    context = ssl.create_default_context(cafile=str(ca_file))
    body = review_body()
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + max_seconds
    remaining = iter(range(requests))
    connector = aiohttp.TCPConnector(ssl=context, limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            for _ in remaining:
                if time.perf_counter() > deadline:
                    return
                sent = time.perf_counter()
                async with session.post(url, data=body) as answer:
                    verdict = await answer.json()
                    if answer.status != 200 or not verdict["response"]["allowed"]:
                        raise SystemExit(f"unexpected answer: {answer.status} {verdict}")
                latencies.append(time.perf_counter() - sent)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, time.perf_counter() - started


def summarise(latencies: list[float], elapsed: float, concurrency: int) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "requests": len(ordered),
        "concurrency": concurrency,
        "median_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
        "throughput_rps": round(len(ordered) / elapsed, 1),
    }


def compare(result: dict[str, Any], baseline: dict[str, Any], max_regression: float) -> bool:
    """Print the change per measure; False when p99 regressed beyond `max_regression`."""
    for key in ("median_ms", "p99_ms", "throughput_rps"):
        change = (result[key] - baseline[key]) / baseline[key] if baseline[key] else 0.0
        print(f"{key}: {baseline[key]} -> {result[key]} ({change:+.1%})")
    return bool(result["p99_ms"] <= baseline["p99_ms"] * (1 + max_regression))


def rss_mib(pid: int) -> float:
    """Resident memory of `pid` (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """CPU time `pid` has used, user and system (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(args: argparse.Namespace, scratch: Path, source: Path | None) -> dict[str, Any]:
    """One server of `source`'s code (None: this checkout) under load: the summary, its
    resident memory once ready and the CPU time it spent per review (which, unlike the
    latency, a busy machine barely changes)."""
    cert_dir = scratch / "certs"
    generate = ["generate", "--out", str(cert_dir), "--ip-address", "127.0.0.1"]
    if not cert_dir.exists() and main_certs(generate) != 0:
        raise SystemExit("cannot make the certificates")
    port, health_port = free_port(), free_port()
    server = start_server(cert_dir, port, health_port, scratch / "webhook.log", source=source)
    try:
        wait_ready(health_port, server)
        started_mib = rss_mib(server.pid)
        url = f"https://127.0.0.1:{port}/validate-trussiumruntime"
        ca_file = cert_dir / "ca.crt"
        asyncio.run(fire(url, ca_file, args.warmup, args.concurrency, args.max_seconds))
        cpu_before, client_before = cpu_seconds(server.pid), time.process_time()
        latencies, elapsed = asyncio.run(
            fire(url, ca_file, args.requests, args.concurrency, args.max_seconds)
        )
        cpu_ms = (cpu_seconds(server.pid) - cpu_before) / len(latencies) * 1000
        client_ms = (time.process_time() - client_before) / len(latencies) * 1000
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    return summarise(latencies, elapsed, args.concurrency) | {
        "rss_started_mib": started_mib,
        "cpu_ms_per_review": round(cpu_ms, 3),
        # The load's own cost: it must stay well under a core's worth to measure the server.
        "client_cpu_ms_per_review": round(client_ms, 3),
    }


MEASURES = (
    "median_ms",
    "p99_ms",
    "throughput_rps",
    "rss_started_mib",
    "cpu_ms_per_review",
    "client_cpu_ms_per_review",
)


def compare_sources(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """This checkout and --baseline-source in alternation; medians and baseline/this ratios."""
    runs: dict[str, list[dict[str, Any]]] = {"this checkout": [], "baseline": []}
    load_before = os.getloadavg()
    for _ in range(args.rounds):
        runs["this checkout"].append(measure(args, scratch, REPO))
        runs["baseline"].append(measure(args, scratch, args.baseline_source))
    load_after = os.getloadavg()
    medians = {
        name: {key: statistics.median(run[key] for run in results) for key in MEASURES}
        for name, results in runs.items()
    }
    ratios = {key: medians["baseline"][key] / medians["this checkout"][key] for key in MEASURES}
    print(f"{args.rounds} rounds of {args.requests} reviews at concurrency {args.concurrency}")
    print(f"load average (1, 5, 15 min): before {load_before}, after {load_after}")
    for name, median in medians.items():
        print(f"{name:14} " + "  ".join(f"{key} {median[key]:.3f}" for key in MEASURES))
    print("baseline / this checkout: " + "  ".join(f"{k} x{v:.2f}" for k, v in ratios.items()))
    return {"load": [load_before, load_after], "medians": medians, "ratios": ratios, "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--output", type=Path, help="write the result as JSON")
    parser.add_argument("--baseline", type=Path, help="an earlier --output to compare with")
    parser.add_argument("--max-regression", type=float, default=0.25)
    parser.add_argument(
        "--baseline-source", type=Path, metavar="DIR", help="another checkout to run alongside"
    )
    parser.add_argument("--rounds", type=int, default=5, help="with --baseline-source")
    args = parser.parse_args()
    others = os.sched_getaffinity(0) - {SERVER_CORE}
    if others:
        os.sched_setaffinity(0, others)  # keep the server's core to itself
    with tempfile.TemporaryDirectory(prefix="trussium-bench-") as scratch:
        if args.baseline_source:
            source = args.baseline_source.resolve()
            if not (source / "trussium_operator").is_dir():
                raise SystemExit(f"--baseline-source {source}: not a checkout of this project")
            args.baseline_source = source
            compared = compare_sources(args, Path(scratch))
            if args.output:
                args.output.write_text(json.dumps(compared) + "\n")
            return 0
        result = measure(args, Path(scratch), None)
    print(json.dumps(result))
    if args.output:
        args.output.write_text(json.dumps(result) + "\n")
    if args.baseline:
        return (
            0 if compare(result, json.loads(args.baseline.read_text()), args.max_regression) else 1
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
