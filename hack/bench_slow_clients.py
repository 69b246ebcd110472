"""What slow clients cost one webhook process, and how long it keeps them.

Starts `trussium-webhook serve` (files mode, as in hack.bench_webhook), opens
--connections TLS connections that each send half a request head and then
nothing, and prints the server's RSS before and after (KiB per connection),
then how many of them the server still holds once --header-timeout has
passed (it should be zero).

    .venv/bin/python -m hack.bench_slow_clients --connections 300
"""

import argparse
import asyncio
import contextlib
import ssl
import tempfile
import time
from pathlib import Path

from devcluster.layout import free_port
from hack.bench_webhook import start_server, wait_ready
from trussium_operator.webhook.certs_cli import main_certs

HALF_A_HEAD = b"POST /validate-trussiumruntime HTTP/1.1\r\nHost: bench\r\nX-Slow: "
MARGIN_SECONDS = 10.0
# Time for the server to take in what was sent before its memory is read.
SETTLE_SECONDS = 2.0


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit("no VmRSS")


async def closed(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while await reader.read(4096):
            pass


async def measure(
    port: int, pid: int, tls: ssl.SSLContext, count: int, header_timeout: float
) -> None:
    before = rss_kib(pid)
    readers, writers = [], []  # a writer left to the garbage collector closes its connection
    opened = time.monotonic()
    for _ in range(count):
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=tls, server_hostname="127.0.0.1"
        )
        writer.write(HALF_A_HEAD)
        await writer.drain()
        readers.append(reader)
        writers.append(writer)
    await asyncio.sleep(SETTLE_SECONDS)
    held_rss = rss_kib(pid)
    print(
        f"{count} half-sent TLS requests: server RSS {before / 1024:.1f} -> "
        f"{held_rss / 1024:.1f} MiB, {(held_rss - before) / count:.0f} KiB each"
    )
    waits = [asyncio.create_task(closed(reader)) for reader in readers]
    remaining = header_timeout + MARGIN_SECONDS - (time.monotonic() - opened)
    _, pending = await asyncio.wait(waits, timeout=max(remaining, 0))
    print(
        f"held after the {header_timeout:g} s header timeout (+{MARGIN_SECONDS:g} s): "
        f"{len(pending)} of {count}; {time.monotonic() - opened:.1f} s after the first opened"
    )
    for task in pending:
        task.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=30.0,
        help="long enough to open every connection before the first is closed",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        assert main_certs(["generate", "--out", str(folder), "--ip-address", "127.0.0.1"]) == 0
        port, health_port = free_port(), free_port()
        server = start_server(
            folder,
            port,
            health_port,
            folder / "webhook.log",
            f"--header-timeout={args.header_timeout}",
            f"--max-connections={args.connections + 10}",
        )
        try:
            wait_ready(health_port, server)
            tls = ssl.create_default_context(cafile=str(folder / "ca.crt"))
            asyncio.run(measure(port, server.pid, tls, args.connections, args.header_timeout))
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
