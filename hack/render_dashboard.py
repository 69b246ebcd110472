"""Draw the chart's Grafana dashboard against a running operator: docs/images/dashboard.png.

Grafana is in neither Debian nor PyPI, so this is our rendering of the dashboard,
not Grafana's: it starts the local control plane (cluster profile), the operator's
two programs as `HostOperator` runs them, and a real Prometheus (Debian's
`prometheus`) scraping both; runs runtimes through several states for a few
minutes (Ready, autoscaled, scaled to zero, an upgrade that completes, one held in
progress, one that fails, one waiting for its Secret) with admission traffic
alongside; then evaluates every panel's own PromQL (Grafana's variables expanded as
Grafana expands them) and draws the panels at their grid places
(hack/dashboard_drawing.py).

    python -m hack.render_dashboard [--minutes 10] [--output docs/images/dashboard.png]

About 2 minutes of setup plus the window; one control plane, so not beside tests.
"""

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devcluster import ControlPlane, Profile
from devcluster.controller_harness import (
    IMAGE,
    apply,
    fill_pod_quota,
    runtime_manifest,
    wait_condition,
)
from devcluster.hostoperator import HostOperator, install_crds
from devcluster.prometheus import BINARY, MISSING, Prometheus, scraping
from hack.dashboard import expand, load
from hack.dashboard_drawing import Line, Result, Window, draw, legend, rate_interval, table_of

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "docs" / "images" / "dashboard.png"
SCRAPE_SECONDS = 5
STEP_SECONDS = 5.0
TRAFFIC_SECONDS = 15.0
READY_SECONDS = 180.0
TEAM_A, TEAM_B = "team-a", "team-b"
CPU = {"requests": {"cpu": "100m"}}
NEW_TAG = {"repository": IMAGE, "tag": "1.1.0"}


class Scenario:
    """Runtimes in several states on a control plane, and admission traffic."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._sent = 0

    def say(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    def provision(self) -> None:
        for namespace in (TEAM_A, TEAM_B):
            self.plane.create_namespace(namespace)
        apply(self.plane, runtime_manifest("chat", TEAM_A, replicas=2))
        autoscaling = {"enabled": True, "minReplicas": 2, "maxReplicas": 4}
        apply(self.plane, runtime_manifest("embed", TEAM_A, autoscaling=autoscaling, resources=CPU))
        apply(self.plane, runtime_manifest("batch", TEAM_A, replicas=0))
        apply(self.plane, runtime_manifest("rag", TEAM_A))
        apply(self.plane, runtime_manifest("summarize", TEAM_B))
        for name, namespace in (("chat", TEAM_A), ("embed", TEAM_A), ("rag", TEAM_A)):
            wait_condition(
                self.plane, name, namespace, "Ready", "True", "RuntimeReady", READY_SECONDS
            )
        wait_condition(
            self.plane, "summarize", TEAM_B, "Ready", "True", "RuntimeReady", READY_SECONDS
        )
        wait_condition(self.plane, "batch", TEAM_A, "Ready", "True", "ScaledToZero", READY_SECONDS)
        self.say("provisioned: chat (2), embed (autoscaled 2-4), batch (0), rag, summarize")

    def break_team_b(self) -> None:
        """A runtime waiting for a Secret, and an upgrade a pod quota makes fail."""
        waiting = runtime_manifest("translate", TEAM_B)
        waiting["spec"]["provider"]["credentialsSecretRef"] = {"name": "absent", "key": "k"}
        apply(self.plane, waiting)
        fill_pod_quota(self.plane, TEAM_B, 1)
        apply(self.plane, runtime_manifest("summarize", TEAM_B, image=NEW_TAG))
        wait_condition(self.plane, "summarize", TEAM_B, "Upgrading", "False", "UpgradeFailed")
        self.say("team-b: translate waits for its Secret; summarize's upgrade failed (quota)")

    def upgrade_chat(self) -> None:
        apply(self.plane, runtime_manifest("chat", TEAM_A, replicas=2, image=NEW_TAG))
        wait_condition(
            self.plane, "chat", TEAM_A, "Upgrading", "False", "UpgradeComplete", READY_SECONDS
        )
        self.say("chat upgraded to 1.1.0")

    def hold_rag_upgrade(self) -> None:
        """New pods no node can take: the upgrade stays in progress, the old pod serves."""
        scheduling = {"nodeSelector": {"pool": "gpu"}}
        apply(
            self.plane,
            runtime_manifest("rag", TEAM_A, image=NEW_TAG, scheduling=scheduling),
        )
        wait_condition(self.plane, "rag", TEAM_A, "Upgrading", "True", "UpgradeInProgress")
        self.say("rag's upgrade is in progress (its new pod cannot be scheduled)")

    def scale_embed(self) -> None:
        autoscaling = {"enabled": True, "minReplicas": 3, "maxReplicas": 4}
        apply(self.plane, runtime_manifest("embed", TEAM_A, autoscaling=autoscaling, resources=CPU))
        self.say("embed: the autoscaler's minimum raised to 3")

    def admissions(self) -> None:
        """Server-side dry runs: a valid runtime, one the webhook denies, a label on a
        managed Deployment (allowed) and a change to its spec (denied)."""
        self._sent += 1
        dry = ("--dry-run=server",)
        valid = runtime_manifest("draft", TEAM_A)
        denied = runtime_manifest("draft", TEAM_A, autoscaling={"enabled": True})
        for body in (valid, denied):
            self.plane.kubectl("apply", *dry, "-f", "-", input=json.dumps(body), check=False)
        self.plane.kubectl(
            "label", "deployment", "chat", "-n", TEAM_A, f"probe={self._sent}", "--overwrite",
            *dry, check=False,
        )  # fmt: skip
        self.plane.kubectl(
            "patch", "deployment", "chat", "-n", TEAM_A, "-p", '{"spec":{"minReadySeconds":5}}',
            *dry, check=False,
        )  # fmt: skip


def run(scenario: Scenario, minutes: float) -> tuple[float, float]:
    """The timeline: each step at its share of the window, admissions throughout.
    Returns the window (start, end), as unix times."""
    start = time.time()
    end = start + 60 * minutes
    steps: list[tuple[float, Callable[[], None]]] = [
        (0.0, scenario.provision),
        (0.25, scenario.break_team_b),
        (0.45, scenario.upgrade_chat),
        (0.6, scenario.hold_rag_upgrade),
        (0.7, scenario.scale_embed),
    ]
    traffic = start
    while time.time() < end:
        if steps and time.time() >= start + steps[0][0] * (end - start):
            steps.pop(0)[1]()
        if time.time() >= traffic:
            scenario.admissions()
            traffic += TRAFFIC_SECONDS
        time.sleep(0.5)
    for _, step in steps:  # a slow machine: whatever did not fit, before the picture
        step()
    return start, max(end, time.time())


def collect(prometheus: Prometheus, dashboard: dict[str, Any], window: Window) -> dict[int, Result]:
    """Every panel's result, from its own queries: range queries over the window for
    time series, instant queries at its end for stats and tables."""
    variables = {
        "$runtime_namespace": ".*",  # the variable's "All"
        "$__rate_interval": f"{rate_interval(window.step, SCRAPE_SECONDS):.0f}s",
    }

    def instant(expr: str) -> list[dict[str, Any]]:
        data = prometheus.api("query", query=expand(expr, variables), time=str(window.end))
        result: list[dict[str, Any]] = data["result"]
        return result

    results: dict[int, Result] = {}
    for panel in dashboard["panels"]:
        targets = panel.get("targets", ())
        if panel["type"] == "timeseries":
            lines = []
            for target in targets:
                expr = expand(target["expr"], variables)
                for series in prometheus.query_range(expr, window.start, window.end, window.step):
                    points = tuple((float(t), float(v)) for t, v in series["values"])
                    lines.append(
                        Line(legend(target.get("legendFormat", ""), series["metric"]), points)
                    )
            results[panel["id"]] = tuple(lines)
        elif panel["type"] == "stat":
            values = [float(s["value"][1]) for t in targets for s in instant(t["expr"])]
            results[panel["id"]] = values[0] if values else None
        elif panel["type"] == "table":
            frames = [
                [
                    # Grafana's columns: the labels in name order, then the value.
                    {
                        **dict(sorted(s["metric"].items())),
                        f"Value #{t['refId']}": _cell(s["value"][1]),
                    }
                    for s in sorted(instant(t["expr"]), key=lambda s: sorted(s["metric"].items()))
                ]
                for t in targets
            ]
            results[panel["id"]] = table_of(panel, frames)
    return results


def _cell(value: str) -> str:
    number = float(value)
    return str(int(number)) if number == int(number) else value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.render_dashboard", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0, help="the window drawn")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    if BINARY is None:
        print(MISSING, file=sys.stderr)
        return 2
    dashboard = load()
    with ControlPlane(Profile.CLUSTER) as plane:
        install_crds(plane)
        operator = HostOperator(plane)
        directory = plane.directory / "prometheus"
        with operator, scraping(operator, directory, scrape_interval=f"{SCRAPE_SECONDS}s") as prom:
            start, end = run(Scenario(plane), args.minutes)
            window = Window(start, end, STEP_SECONDS)
            results = collect(prom, dashboard, window)
            version = prom.api("status/buildinfo")["version"]
    note = (
        f"Drawn by hack/render_dashboard.py: each panel's own PromQL, evaluated by Prometheus "
        f"{version} scraping the operator on a local control plane, placed by its gridPos. "
        "Not a Grafana screenshot."
    )
    draw(dashboard, results, window, note, args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
