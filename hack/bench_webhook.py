"""Admission latency and throughput of one webhook process over TLS on loopback.

Starts `trussium-webhook serve` (files mode, a fresh certificate) pinned to
one core, sends validating AdmissionReviews of the production sample from
this process (on another core when there is one), and prints the median and
99th-percentile latency and the throughput. Bounded by --requests and
--max-seconds. With --baseline, compares against an earlier --output file
and exits 1 when the p99 latency regressed by more than --max-regression.

    .venv/bin/python -m hack.bench_webhook --requests 3000 --concurrency 8
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
    cores = sorted(os.sched_getaffinity(0))
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
                str(cores[0]),
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--output", type=Path, help="write the result as JSON")
    parser.add_argument("--baseline", type=Path, help="an earlier --output to compare with")
    parser.add_argument("--max-regression", type=float, default=0.25)
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) > 1:
        os.sched_setaffinity(0, set(cores[1:]))  # keep the server's core to itself
    with tempfile.TemporaryDirectory(prefix="trussium-bench-") as scratch:
        cert_dir = Path(scratch) / "certs"
        if main_certs(["generate", "--out", str(cert_dir), "--ip-address", "127.0.0.1"]) != 0:
            return 1
        port, health_port = free_port(), free_port()
        server = start_server(cert_dir, port, health_port, Path(scratch) / "webhook.log")
        try:
            wait_ready(health_port, server)
            url = f"https://127.0.0.1:{port}/validate-trussiumruntime"
            ca_file = cert_dir / "ca.crt"
            asyncio.run(fire(url, ca_file, args.warmup, args.concurrency, args.max_seconds))
            latencies, elapsed = asyncio.run(
                fire(url, ca_file, args.requests, args.concurrency, args.max_seconds)
            )
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    result = summarise(latencies, elapsed, args.concurrency)
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
