"""The chart's alert expressions mean what their runbooks say, evaluated by a real
Prometheus over two synthetic controller targets, a leader and a standby, whose
exposition each step rewrites: a standby's full queue is no stuck queue, the
leader's is, and so is a reconcile running past the threshold; a runtime is not
Ready whichever replica exports it."""

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
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = owner.text.encode()
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


def controller(lease: str, leader: bool, depth: int, running: float, ready: int) -> str:
    """One controller replica's exposition: no reconcile finishes (a constant count)."""
    return "\n".join(
        [
            f'leader_election_master_status{{name="{lease}"}} {int(leader)}',
            f'workqueue_depth{{{QUEUE},priority=""}} {depth}',
            f"workqueue_work_duration_seconds_count{{{QUEUE}}} 10",
            f"workqueue_longest_running_processor_seconds{{{QUEUE}}} {running}",
            'controller_runtime_max_concurrent_reconciles{controller="trussiumruntime"} 4',
            f'trussium_runtime_ready{{runtime_namespace="team",runtime_name="chat"}} {ready}',
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
