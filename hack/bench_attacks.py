"""The webhook's memory and a legitimate client's latency under each attack of hack/attacks.py.

For each attack (hack/attacks.py) and each of --rounds rounds: starts a fresh
`trussium-webhook serve` with the chart's settings (files mode, pinned to one
core as in hack.bench_webhook), lets the attack (a process of its own) run
for --warmup seconds, then for --seconds sends one legitimate review every
--interval seconds, each on a fresh verified TLS connection as the API server
would, while sampling the server's RSS every 50 ms. Prints per attack the
medians over rounds of the peak RSS, the legitimate p50/p99 latency and the
share of legitimate reviews not answered 200, with the load average.
--server-repo runs another checkout's server (e.g. main's, for the numbers
before a change).

    .venv/bin/python -m hack.bench_attacks --rounds 3
"""

import argparse
import asyncio
import math
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from devcluster.layout import free_port
from hack import attacks
from hack.bench_webhook import REPO, review_body, start_server, wait_ready
from trussium_operator.webhook.certs_cli import main_certs

MEMORY_LIMIT_MIB = 256  # the chart's resources.limits.memory
SAMPLE_SECONDS = 0.05


class PeakRss:
    """The highest RSS of a process, sampled from a thread until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak_kib, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_kib = max(self.peak_kib, attacks.rss_kib(self.pid))
            except (OSError, RuntimeError):
                return
            time.sleep(SAMPLE_SECONDS)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_kib / 1024


def median(values: tuple[float, ...]) -> float:
    """Over the rounds that have the number (no legit review answered: none)."""
    present = [v for v in values if not math.isnan(v)]
    return statistics.median(present) if present else math.nan


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


async def legit_load(
    port: int, ca_file: Path, seconds: float, interval: float
) -> list[attacks.Answer]:
    body = review_body()
    answers: list[attacks.Answer] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answers.append(await attacks.legit_review(port, ca_file, body))
        await asyncio.sleep(interval)
    return answers


def one_round(
    attack: str | None, folder: Path, args: argparse.Namespace
) -> tuple[float, float, float, float]:
    """Peak RSS (MiB), legit p50 and p99 (ms), share of legit reviews not answered 200."""
    port, health_port = free_port(), free_port()
    server = start_server(
        folder, port, health_port, folder / "webhook.log", source=args.server_repo
    )
    try:
        wait_ready(health_port, server)
        peak = PeakRss(server.pid)
        attacker = attacks.start(attack, port) if attack else None
        try:
            time.sleep(args.warmup)
            answers = asyncio.run(legit_load(port, folder / "ca.crt", args.seconds, args.interval))
        finally:
            if attacker is not None:
                attacks.stop(attacker)
        rss = peak.stop()
    finally:
        server.terminate()
        server.wait(30)
    latencies = [a.seconds for a in answers if a.status == 200]
    failed = sum(1 for a in answers if a.status != 200) / max(len(answers), 1)
    if not latencies:
        return rss, float("nan"), float("nan"), failed
    return rss, percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--attack", action="append", choices=sorted(attacks.ATTACKS))
    parser.add_argument("--server-repo", type=Path, default=REPO)
    args = parser.parse_args()
    chosen: list[str | None] = [None, *(args.attack or attacks.ATTACKS)]
    print(
        f"server: {args.server_repo}; {args.rounds} rounds, medians; target RSS < "
        f"{MEMORY_LIMIT_MIB * 0.6:.0f} MiB (60% of {MEMORY_LIMIT_MIB} MiB), legit p99 < 100 ms"
    )
    print(f"{'attack':<14} {'peak RSS MiB':>12} {'p50 ms':>8} {'p99 ms':>8} {'failed':>7}  load")
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        assert main_certs(["generate", "--out", str(folder), "--ip-address", "127.0.0.1"]) == 0
        for attack in chosen:
            rounds = [one_round(attack, folder, args) for _ in range(args.rounds)]
            rss, p50, p99, failed = (
                statistics.median(column) for column in zip(*rounds, strict=True)
            )
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            row = f"{attack or 'none':<14} {rss:>12.0f} {p50:>8.1f} {p99:>8.1f} {failed:>7.1%}"
            print(f"{row}  {load}", flush=True)


if __name__ == "__main__":
    main()
