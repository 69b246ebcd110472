"""The chart's alert expressions mean what their runbooks say, evaluated by a real
Prometheus over synthetic targets whose exposition each step rewrites: a
standby's full queue is no stuck queue, the leader's is, and so is a reconcile
running past the threshold; a runtime is not Ready whichever replica exports it;
a webhook is overloaded while it keeps evicting connections or refusing bodies
for its memory budget, not for clients that merely go away."""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import wait_for
from devcluster.layout import HOST
from devcluster.prometheus import BINARY, MISSING, Prometheus
from tests.support.chart import find, fullname, release_name, render

pytestmark = [pytest.mark.api, pytest.mark.skipif(BINARY is None, reason=MISSING)]
QUEUE = 'controller="trussiumruntime",name="trussiumruntime"'


class Exposition:
    """A /metrics endpoint whose text the test sets."""

    def __init__(self) -> None:
        self.text = ""
        self.scrapes = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                # $SCRAPES: a counter that grows with every scrape.
                owner.scrapes += 1
                body = owner.text.replace("$SCRAPES", str(owner.scrapes)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.port = self.server.server_address[1]


@contextmanager
def serving(count: int) -> Iterator[list[Exposition]]:
    targets = [Exposition() for _ in range(count)]
    threads = [threading.Thread(target=t.server.serve_forever, daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    try:
        yield targets
    finally:
        for target in targets:
            target.server.shutdown()
            target.server.server_close()


def controller(
    lease: str, leader: bool, depth: int, running: float, ready: int, lease_unreadable: int = 0
) -> str:
    """One controller replica's exposition: no reconcile finishes (a constant count)."""
    return "\n".join(
        [
            f'leader_election_master_status{{name="{lease}"}} {int(leader)}',
            f'workqueue_depth{{{QUEUE},priority=""}} {depth}',
            f"workqueue_work_duration_seconds_count{{{QUEUE}}} 10",
            f"workqueue_longest_running_processor_seconds{{{QUEUE}}} {running}",
            'controller_runtime_max_concurrent_reconciles{controller="trussiumruntime"} 4',
            f'trussium_runtime_ready{{runtime_namespace="team",runtime_name="chat"}} {ready}',
            f"trussium_foreign_lease_unreadable {lease_unreadable}",
            "",
        ]
    )


def test_stuck_queue_and_not_ready_alerts_on_a_leader_and_a_standby(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    release = release_name()
    lease = fullname(release)
    objects = render(plane, release, namespace, "--set", "prometheusRule.enabled=true")
    (group,) = find(objects, "PrometheusRule", lease)["spec"]["groups"]
    alerts = {rule["alert"]: rule["expr"] for rule in group["rules"]}
    with serving(2) as (leader, standby):
        targets = {"leader": leader.port, "standby": standby.port}
        with Prometheus(tmp_path, targets, {"namespace": namespace}) as prom:

            def settle(leader_text: str, standby_text: str) -> None:
                leader.text, standby.text = leader_text, standby_text
                started = time.time()
                # Both targets scraped since the change (and a rate has two samples).
                wait_for(
                    lambda: prom.query(f"min(timestamp(up)) > {started + 1}"),
                    "two scrapes of the new exposition",
                )

            def firing(alert: str) -> bool:
                return bool(prom.query(alerts[alert]))

            # A standby's queue fills and waits: not stuck. Everything Ready.
            settle(controller(lease, True, 0, 0, 1), controller(lease, False, 7, 0, 1))
            assert not firing("TrussiumControllerQueueStuck")
            assert not firing("TrussiumRuntimeNotReady")
            # The leader's queue holds keys and no reconcile finishes: stuck.
            settle(controller(lease, True, 3, 0, 1), controller(lease, False, 7, 0, 1))
            assert firing("TrussiumControllerQueueStuck")
            # A reconcile running past the threshold (300 s): stuck, whatever the depth.
            settle(controller(lease, True, 0, 301, 1), controller(lease, False, 0, 0, 1))
            assert firing("TrussiumControllerQueueStuck")
            # One replica reports the runtime not Ready: the alert names it once.
            settle(controller(lease, True, 0, 0, 0), controller(lease, False, 0, 0, 1))
            (sample,) = prom.query(alerts["TrussiumRuntimeNotReady"])
            assert sample["metric"] == {"runtime_namespace": "team", "runtime_name": "chat"}
            # No leader at all: the no-leader alert fires.
            settle(controller(lease, False, 0, 0, 1), controller(lease, False, 0, 0, 1))
            assert firing("TrussiumControllerNoLeader")
            assert not firing("TrussiumControllerQueueStuck")
            # One replica cannot read the Go operator's Lease.
            assert not firing("TrussiumControllerGoLeaseUnreadable")
            settle(controller(lease, True, 0, 0, 1, 1), controller(lease, False, 0, 0, 1))
            assert firing("TrussiumControllerGoLeaseUnreadable")


def webhook(evicted: str, dropped: dict[str, str]) -> str:
    """One webhook replica's connection counters ("$SCRAPES": growing)."""
    lines = [f'trussium_webhook_connections_evicted_total{{state="idle"}} {evicted}']
    lines += [
        f'trussium_webhook_connections_dropped_total{{reason="{reason}"}} {count}'
        for reason, count in dropped.items()
    ]
    return "\n".join([*lines, ""])


QUIET_WEBHOOK = webhook("4", {"memory_budget": "2", "client_gone": "9"})


@pytest.mark.parametrize(
    ("first", "second", "fires"),
    [
        (QUIET_WEBHOOK, QUIET_WEBHOOK, False),  # counters that stopped growing
        (QUIET_WEBHOOK, webhook("4", {"client_gone": "$SCRAPES"}), False),  # clients gone
        (QUIET_WEBHOOK, webhook("$SCRAPES", {}), True),  # connections evicted at the cap
        (webhook("4", {"memory_budget": "$SCRAPES"}), QUIET_WEBHOOK, True),  # 429s
    ],
    ids=["still", "clients-gone", "evictions", "memory-budget"],
)
def test_the_overloaded_alert_fires_on_evictions_and_budget_refusals_only(
    plane: ControlPlane, namespace: str, tmp_path: Path, first: str, second: str, fires: bool
) -> None:
    release = release_name()
    objects = render(plane, release, namespace, "--set", "prometheusRule.enabled=true")
    (group,) = find(objects, "PrometheusRule", fullname(release))["spec"]["groups"]
    (expr,) = [r["expr"] for r in group["rules"] if r["alert"] == "TrussiumWebhookOverloaded"]
    with serving(2) as targets:
        targets[0].text, targets[1].text = first, second
        ports = {"webhook-0": targets[0].port, "webhook-1": targets[1].port}
        with Prometheus(tmp_path, ports, {"namespace": namespace}) as prom:
            # Three samples of each replica: a rate that grows shows by then.
            wait_for(
                lambda: prom.query("count(count_over_time(up[5m]) >= 3) == 2"),
                "three scrapes of both replicas",
            )
            assert bool(prom.query(expr)) is fires
