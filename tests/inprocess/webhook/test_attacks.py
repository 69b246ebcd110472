"""The attacks of hack/attacks.py on the real `trussium-webhook serve` (the chart's settings).

Each test starts a fresh server, lets one attack (hack/attacks.py, a process
of its own) take hold, as the server's own counters show, then sends
legitimate reviews on fresh TLS connections, as the API server does, while
sampling the server's RSS. Every legitimate review must be answered 200 and
the RSS must stay under 60% of the chart's 256 MiB memory limit. Latencies
are printed (run with -s), never asserted: hack/bench_attacks.py measures them.
"""

import asyncio
import re
import statistics
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devcluster.layout import free_port
from devcluster.polling import wait_for
from hack import attacks
from hack.bench_attacks import MEMORY_LIMIT_MIB, PeakRss
from hack.bench_webhook import review_body, start_server, wait_ready
from trussium_operator.webhook.certs_cli import main_certs

RSS_BOUND_MIB = MEMORY_LIMIT_MIB * 0.6
LEGIT_REVIEWS = 40
TAKE_HOLD_SECONDS = 60.0


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    ca_file: Path

    def counter(self, name: str, labels: str = "") -> float:
        """A counter of the server's /metrics (0 until first counted, or while the server
        is too busy to answer)."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
            ) as answer:
                text = answer.read().decode()
        except TimeoutError:
            return 0.0
        found = re.search(rf"^{name}{re.escape(labels)} (\S+)$", text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    assert main_certs(["generate", "--out", str(tmp_path), "--ip-address", "127.0.0.1"]) == 0
    port, health_port, metrics_port = free_port(), free_port(), free_port()
    process = start_server(
        tmp_path, port, health_port, tmp_path / "webhook.log", metrics_port=metrics_port
    )
    try:
        wait_ready(health_port, process)
        yield Server(process, port, metrics_port, tmp_path / "ca.crt")
    finally:
        process.terminate()
        process.wait(30)


def under_attack(server: Server, attack: str, took_hold: tuple[str, str, float]) -> None:
    """Run `attack` until the metric `took_hold` reaches its value, then check the targets."""
    peak = PeakRss(server.process.pid)
    attacker = attacks.start(attack, server.port)
    try:
        name, labels, value = took_hold
        wait_for(
            lambda: server.counter(name, labels) >= value,
            f"{attack}: {name}{labels} >= {value}",
            TAKE_HOLD_SECONDS,
        )
        answers = asyncio.run(legit_reviews(server))
        assert attacker.poll() is None, "the attack ran throughout"
    finally:
        attacks.stop(attacker)  # the attacker's connections all close at once: counted too
    rss = peak.stop()
    latencies = sorted(a.seconds * 1000 for a in answers)
    print(
        f"\n{attack}: peak RSS {rss:.0f} MiB; legit reviews p50 "
        f"{statistics.median(latencies):.0f} ms, max {latencies[-1]:.0f} ms"
    )
    assert [a.status for a in answers] == [200] * LEGIT_REVIEWS, "every legit review answered"
    assert rss < RSS_BOUND_MIB


async def legit_reviews(server: Server) -> list[attacks.Answer]:
    body = review_body()
    return [
        await attacks.legit_review(server.port, server.ca_file, body) for _ in range(LEGIT_REVIEWS)
    ]


DROPPED = "trussium_webhook_connections_dropped_total"
EVICTED = "trussium_webhook_connections_evicted_total"
MUTATING = f'{{webhook="{attacks.MUTATE_PATH}"}}'


def test_gzip_bodies_that_never_end_get_429_within_the_memory_budget(server: Server) -> None:
    # Every attacker past the budget has been answered 429 at least once.
    under_attack(server, "gzip-bodies", (DROPPED, '{reason="memory_budget"}', 64))


def test_plain_bodies_that_never_end_get_429_within_the_memory_budget(server: Server) -> None:
    under_attack(server, "plain-bodies", (DROPPED, '{reason="memory_budget"}', 256))


def test_connections_that_never_start_tls_make_room_for_the_api_server(server: Server) -> None:
    # 600 connections against a cap of 256: the idle ones are closed for newer ones.
    under_attack(server, "no-tls", (EVICTED, '{state="idle"}', 600))


def test_idle_tls_connections_make_room_for_the_api_server(server: Server) -> None:
    # The attack holds (about) as many connections as the cap allows; which one
    # makes room is test_slow_clients.py's (the one idle longest).
    under_attack(server, "idle-tls", ("process_open_fds", "", 256))


def test_reviews_of_a_million_tiny_objects_get_413_within_the_memory_budget(
    server: Server,
) -> None:
    # Waves of 1 to 6 whole reviews of 3.2 MB, each some 25 times that once decoded:
    # a first cycle of waves answered (a 413 each, unread), and they go on.
    waves = sum(range(1, attacks.TINY_OBJECTS_WAVES + 1))
    answered = ("controller_runtime_webhook_latency_seconds_count", MUTATING, waves)
    under_attack(server, "tiny-objects", answered)
