"""Every dashboard query and alert expression, evaluated by a real Prometheus that
scrapes a running operator (controller and webhook, the chart's RBAC; over HTTPS with
the token of a ServiceAccount bound to the chart's metrics-viewer role) while it
reconciles runtimes on kwok nodes: one Ready, one waiting for a missing Secret, one
whose upgrade a quota makes fail. The alerts name the right runtimes, the healthy
ones stay silent, and a deleted runtime's series end with it."""

import secrets
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    IMAGE,
    apply,
    fill_pod_quota,
    runtime_manifest,
    wait_condition,
    wait_for,
)
from devcluster.hostoperator import HostOperator, install_crds
from devcluster.prometheus import BINARY, MISSING, scraping
from hack.dashboard import load, queries
from tests.support.chart import find, fullname, render
from tests.support.promql import reads

OWN_PLANE = pytest.mark.own_plane(
    "kwok nodes (Pods of an image no registry serves turn Ready) and the operator as host "
    "processes that the API server calls on 127.0.0.1"
)
pytestmark = [
    pytest.mark.cluster,
    OWN_PLANE,
    pytest.mark.skipif(BINARY is None, reason=MISSING),
]

# Series this scenario cannot have: each exists only once something happens.
ABSENT_HERE = {
    # labelled by reason: created by the first dropped connection
    "trussium_webhook_connections_dropped_total",
    # labelled by state: created by the first connection closed at the cap
    "trussium_webhook_connections_evicted_total",
    # only with a client-side limit (--kube-api-qps above 0; the default is none)
    "rest_client_rate_limiter_duration_seconds_bucket",
    # one series per Go operator leader Lease found: there is none here
    "trussium_foreign_lease_held",
    # the runtimes' own series (the "Runtime traffic" row): no runtime process runs on
    # kwok nodes; tests/image/test_standin_serving.py reads them from a scraped stand-in
    "trussium_http_requests_total",
    "trussium_http_request_duration_seconds_bucket",
    "trussium_http_requests_active",
}
QUIET = (
    "TrussiumControllerDown",
    "TrussiumControllerNoLeader",
    "TrussiumControllerQueueStuck",
    "TrussiumControllerGoLeaseUnreadable",
    "TrussiumWebhookDown",
    "TrussiumWebhookErrors",
    "TrussiumWebhookSlow",
    "TrussiumWebhookCertificateExpiry",
    "TrussiumWebhookOverloaded",
)


def alert_rules(plane: ControlPlane, release: str, namespace: str) -> list[dict[str, Any]]:
    """The chart's PrometheusRule groups for an in-cluster release in `namespace`."""
    objects = render(plane, release, namespace, "--set", "prometheusRule.enabled=true")
    groups: list[dict[str, Any]] = find(objects, "PrometheusRule", fullname(release))["spec"][
        "groups"
    ]
    return groups


def names(result: list[dict[str, Any]]) -> set[str]:
    return {sample["metric"].get("runtime_name", "") for sample in result}


def test_dashboard_and_alerts_on_prometheus_scraping_a_running_operator(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    install_crds(plane)
    release = f"trussium-operator-{secrets.token_hex(3)}"
    groups = alert_rules(plane, release, release)
    alerts = {rule["alert"]: rule["expr"] for rule in groups[0]["rules"]}
    operator = HostOperator(plane, namespace=release, release=release, watch_namespace=namespace)
    try:
        with operator, scraping(operator, tmp_path / "prometheus", groups) as prom:
            apply(plane, runtime_manifest("steady", namespace))
            apply(plane, runtime_manifest("upgraded", namespace))
            for name in ("steady", "upgraded"):
                wait_condition(plane, name, namespace, "Ready", "True", "RuntimeReady", 120)
            fill_pod_quota(plane, namespace, 2)
            apply(
                plane,
                runtime_manifest(
                    "upgraded", namespace, image={"repository": IMAGE, "tag": "2.0.0"}
                ),
            )
            waiting = runtime_manifest("waiting", namespace)
            waiting["spec"]["provider"]["credentialsSecretRef"] = {"name": "absent", "key": "k"}
            apply(plane, waiting)
            wait_condition(plane, "upgraded", namespace, "Upgrading", "False", "UpgradeFailed")
            wait_condition(plane, "waiting", namespace, "Ready", "False", "ConfigurationInvalid")

            # The alert expressions, as Prometheus evaluates them (their `for` aside),
            # once every target was scraped a few times (a rate needs two samples).
            wait_for(
                lambda: prom.query("min(count_over_time(up[5m])) >= 3"),
                "three scrapes of each target",
            )
            # Scraped with the certificate verified against the webhook's CA, as the
            # chart's ServiceMonitor says: a scrape that fails verification is up 0.
            wait_for(lambda: len(prom.query("up == 1")) == 2, "both targets verified and up")
            wait_for(
                lambda: names(prom.query(alerts["TrussiumRuntimeUpgradeFailed"])) == {"upgraded"},
                "the failed upgrade in Prometheus",
            )
            wait_for(
                lambda: (
                    {"waiting", "upgraded"} <= names(prom.query(alerts["TrussiumRuntimeNotReady"]))
                ),
                "the runtimes that are not Ready in Prometheus",
            )
            assert "steady" not in names(prom.query(alerts["TrussiumRuntimeNotReady"]))
            # Silent while all is well. Waited for, not read once: one scrape that a
            # loaded machine answers late makes `absent()` true for that instant, which
            # the alerts' `for` (minutes) absorbs.
            wait_for(
                lambda: not [alert for alert in QUIET if prom.query(alerts[alert])],
                "the alerts of a healthy operator to be silent",
            )
            prom.query(alerts["TrussiumControllerReconcileErrors"])
            rules = prom.api("rules")["groups"][0]["rules"]
            assert {r["name"] for r in rules} == set(alerts)
            assert all(r["health"] == "ok" for r in rules), rules

            # Every dashboard query evaluates, and reads series the operator exposes.
            dashboard = list(queries(load()))
            # Each answers (an error fails with Prometheus' message), and with data
            # unless it reads a series this scenario cannot have.
            empty = [
                title
                for title, expr in dashboard
                if not prom.query(expr) and not set(reads(expr).matchers) & ABSENT_HERE
            ]
            assert empty == []
            read = set().union(*(reads(expr).matchers for _, expr in dashboard))
            missing = {name for name in read if not prom.series(name)}
            assert missing <= ABSENT_HERE, missing
            table = prom.query(
                "max by (runtime_namespace, runtime_name, desired_image, current_image) "
                f'(trussium_runtime_info{{runtime_namespace="{namespace}"}})'
            )
            # An empty label value is no label to Prometheus: "waiting" has no current image.
            images = {
                s["metric"]["runtime_name"]: s["metric"].get("current_image", "") for s in table
            }
            assert images == {
                "steady": f"{IMAGE}:1.0.0",
                "upgraded": f"{IMAGE}:2.0.0",  # the template's image; its pods are not up
                "waiting": "",
            }

            # A deleted runtime's series end with it (stale at the next scrape).
            plane.kubectl("delete", "truntime", "waiting", "-n", namespace)
            wait_for(
                lambda: not prom.query('trussium_runtime_ready{runtime_name="waiting"}'),
                "the deleted runtime's series to end",
            )
            assert prom.query('trussium_runtime_ready{runtime_name="steady"}')
    finally:
        plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=operator.render_wiring())
