"""The costliest runtime reviews: event-loop time per review, in process and through the server.

The candidates (ADR 0027): the issue's attack, a schema-valid runtime of
1,000 nodeSelectorTerms x 60 expressions (about 3 MB), and the widest runtime
the bounds admit, every list and map of the CRD schema at its bound (built
from the schema itself, so a new field is covered), with short strings and
with strings long enough to fill the request, each as a CREATE and as an
UPDATE of itself (an UPDATE with errors parses the old object too). Every
review goes to both runtime hooks, as the API server sends it.

In process: the median over --rounds of decoding, deciding and encoding
each review in each hook (the work the event loop does for one webhook call). Through the server:
`trussium-webhook serve` on one core over TLS, each review posted --rounds
times while --load clients send the production sample without pause; prints
the median worst-case latency and the p99 of the legitimate reviews.
`--server-source DIR` runs the server from another checkout (e.g. main) to
compare before and after on the same inputs.

    .venv/bin/python -m hack.bench_worst_review
    .venv/bin/python -m hack.bench_worst_review --server-source /tmp/main --skip-in-process
"""

import argparse
import asyncio
import json
import os
import signal
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from devcluster.layout import free_port
from hack.bench_webhook import review_body, start_server, wait_ready
from trussium_operator.common import admission
from trussium_operator.common.constants import MUTATE_RUNTIME_PATH, VALIDATE_RUNTIME_PATH
from trussium_operator.common.schema import openapi_schema
from trussium_operator.webhook.app import AdmissionSettings, Hooks
from trussium_operator.webhook.certs_cli import main_certs

# What the API server sends at most (its request limit is 3 MiB); the review wraps it.
MAX_OBJECT_BYTES = 3 * 1024 * 1024 - 64 * 1024
HOOKS = (MUTATE_RUNTIME_PATH, VALIDATE_RUNTIME_PATH)
# Values the schema constrains beyond types (patterns, CEL rules), kept valid.
FIXED: dict[str, Any] = {
    "image": {"repository": "ghcr.io/trussiumhq/trussium", "tag": "1.4.2"},
    "provider": {
        "type": "openai",
        "model": "gpt-4o-mini",
        "baseURL": "http://models.example:8080/v1",
        "credentialsSecretRef": {"name": "provider", "key": "api-key"},
    },
    "scratch": {"sizeLimit": "1Gi"},
}


def attack_runtime(terms: int = 1000, expressions: int = 60) -> dict[str, Any]:
    """The issue's attack: schema-valid under the Go CRD, about 3 MB."""
    term = {
        "matchExpressions": [
            {"key": f"k{j}", "operator": "In", "values": ["a"]} for j in range(expressions)
        ]
    }
    required = {"nodeSelectorTerms": [term] * terms}
    return runtime(
        {
            "scheduling": {
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
                }
            }
        }
    )


def runtime(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "metadata": {"name": "widest", "namespace": "bench"},
        "spec": spec | {key: value for key, value in FIXED.items() if key not in spec},
    }


def widest(schema: dict[str, Any], text: Callable[[int], str], counter: list[int]) -> Any:
    """A value of `schema` with every list and map at its bound (one entry if unbounded)."""
    counter[0] += 1
    if "enum" in schema:
        return schema["enum"][-1]
    if schema.get("x-kubernetes-int-or-string"):
        return "1"
    kind = schema.get("type")
    if kind == "object" and "properties" in schema:
        return {key: widest(sub, text, counter) for key, sub in schema["properties"].items()}
    if kind == "object" and "additionalProperties" in schema:
        entries = schema.get("maxProperties", 1)
        return {
            f"example.com/{text(counter[0] + i)}": widest(
                schema["additionalProperties"], text, counter
            )
            for i in range(entries)
        }
    if kind == "array":
        return [widest(schema["items"], text, counter) for _ in range(schema.get("maxItems", 1))]
    if kind == "string":
        return text(counter[0])
    if kind == "integer":
        return max(schema.get("minimum", 1), 1)
    return True if kind == "boolean" else {}


def widest_runtime(text_length: int) -> dict[str, Any]:
    def text(n: int) -> str:
        return f"v{n}-" + "x" * max(0, text_length - len(str(n)) - 3)

    spec = widest(openapi_schema()["properties"]["spec"], text, [0])
    spec["imagePullSecrets"] = [{"name": f"pull-{i}"} for i in range(len(spec["imagePullSecrets"]))]
    spec["resources"]["claims"] = [
        {"name": f"claim-{i}"} for i in range(len(spec["resources"]["claims"]))
    ]
    spec["autoscaling"] |= {"minReplicas": 1, "maxReplicas": 2}
    return runtime(spec | FIXED)


def filling_text_length() -> int:
    """The string length that brings the widest runtime near the request limit."""
    small = len(json.dumps(widest_runtime(8)))
    strings = len(json.dumps(widest_runtime(9))) - small
    return 8 + (MAX_OBJECT_BYTES - small) // max(strings, 1)


def review(obj: dict[str, Any], update: bool) -> bytes:
    kind = {"group": "runtime.trussium.io", "version": "v1alpha1", "kind": "TrussiumRuntime"}
    request = {
        "uid": "worst",
        "kind": kind,
        "operation": "UPDATE" if update else "CREATE",
        "namespace": "bench",
        "name": obj["metadata"]["name"],
        "userInfo": {"username": "bench"},
        "object": obj,
        "oldObject": obj if update else None,
        "dryRun": True,
    }
    document = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(document).encode()


def cases() -> dict[str, bytes]:
    long_text = filling_text_length()
    found = {"attack 1000x60 (CREATE)": review(attack_runtime(), update=False)}
    for label, obj in (
        ("widest, short strings", widest_runtime(12)),
        (f"widest, {long_text}-char strings", widest_runtime(long_text)),
    ):
        for update in (False, True):
            found[f"{label} ({'UPDATE' if update else 'CREATE'})"] = review(obj, update)
    return found


def in_process_ms(body: bytes, rounds: int) -> dict[str, float]:
    """Median event-loop time of one review in each hook: decode, decide, encode."""
    hooks = Hooks(AdmissionSettings(operator_username="operator"))
    decide = {
        MUTATE_RUNTIME_PATH: hooks.mutate_runtime,
        VALIDATE_RUNTIME_PATH: hooks.validate_runtime,
    }
    loop = asyncio.new_event_loop()
    samples: dict[str, list[float]] = {path: [] for path in HOOKS}
    try:
        for _ in range(rounds):
            for path in HOOKS:
                began = time.perf_counter()
                answer = loop.run_until_complete(decide[path](admission.decode_review(body)))
                json.dumps(answer)
                samples[path].append((time.perf_counter() - began) * 1000)
    finally:
        loop.close()
    return {path: statistics.median(taken) for path, taken in samples.items()}


def decode_ms(body: bytes, rounds: int) -> float:
    """The yardstick: one `json.loads` of the body, which no review can avoid."""
    samples = []
    for _ in range(rounds):
        began = time.perf_counter()
        json.loads(body)
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


async def through_server(
    base: str, ca_file: Path, bodies: dict[str, bytes], rounds: int, load: int
) -> tuple[dict[str, float], list[float]]:
    """Median latency of each case (both hooks), and the legitimate reviews' latencies."""
    context = ssl.create_default_context(cafile=str(ca_file))
    legit = review_body()
    legit_latencies: list[float] = []
    stop = asyncio.Event()
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=context, limit=load + 2), timeout=timeout
    ) as session:

        async def post(path: str, body: bytes) -> float:
            sent = time.perf_counter()
            async with session.post(base + path, data=body) as answer:
                await answer.read()
                if answer.status != 200:
                    raise SystemExit(f"{path}: HTTP {answer.status}")
            return (time.perf_counter() - sent) * 1000

        async def legitimate() -> None:
            while not stop.is_set():
                legit_latencies.append(await post(VALIDATE_RUNTIME_PATH, legit))

        background = [asyncio.create_task(legitimate()) for _ in range(load)]
        medians = {}
        try:
            for label, body in bodies.items():
                samples = []
                for _ in range(rounds):
                    samples.append(sum([await post(path, body) for path in HOOKS]))
                medians[label] = statistics.median(samples)
        finally:
            stop.set()
            await asyncio.gather(*background)
    return medians, legit_latencies


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")


def serve_and_measure(
    bodies: dict[str, bytes], rounds: int, load: int, source: Path | None
) -> tuple[dict[str, float], list[float]]:
    with tempfile.TemporaryDirectory(prefix="trussium-worst-") as scratch:
        cert_dir = Path(scratch) / "certs"
        if main_certs(["generate", "--out", str(cert_dir), "--ip-address", "127.0.0.1"]) != 0:
            raise SystemExit("cannot generate a certificate")
        port, health_port = free_port(), free_port()
        flags = [f"--max-request-bytes={16 * 1024 * 1024}"]
        server = start_server(
            cert_dir, port, health_port, Path(scratch) / "webhook.log", *flags, source=source
        )
        try:
            wait_ready(health_port, server)
            return asyncio.run(
                through_server(
                    f"https://127.0.0.1:{port}", cert_dir / "ca.crt", bodies, rounds, load
                )
            )
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--load", type=int, default=4, help="clients sending legitimate reviews")
    parser.add_argument("--server-source", type=Path, help="run the server from this checkout")
    parser.add_argument("--skip-in-process", action="store_true")
    args = parser.parse_args(argv)
    bodies = cases()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if not args.skip_in_process:
        print("in process (this checkout), median ms in each hook; json.loads of the body alone:")
        print(f"  {'review':<42} {'size':>8}  {'mutate':>8}  {'validate':>8}  {'decode':>8}")
        for label, body in bodies.items():
            took, decode = in_process_ms(body, args.rounds), decode_ms(body, args.rounds)
            print(
                f"  {label:<42} {len(body) / 1e6:5.2f} MB  {took[MUTATE_RUNTIME_PATH]:8.1f}  "
                f"{took[VALIDATE_RUNTIME_PATH]:8.1f}  {decode:8.1f}"
            )
    medians, legit = serve_and_measure(bodies, args.rounds, args.load, args.server_source)
    where = args.server_source or "this checkout"
    print(f"through the server ({where}), median ms of both hooks, {args.load} clients of load:")
    for label, median in medians.items():
        print(f"  {label:<42} {median:8.1f} ms")
    print(f"  legitimate reviews meanwhile: {len(legit)}, p99 {p99(legit):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
