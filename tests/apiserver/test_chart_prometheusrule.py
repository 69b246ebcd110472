"""The optional PrometheusRule: valid Prometheus rules (expressions parsed with
Prometheus' grammar) that read only registered series (and the runtime's own, as
its PodMonitor labels them) and their own labels, pick the release's series (the
runtimes' traffic) with a configurable selector and never by `job` (which
relabeling renames), and are shaped by values."""

import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from devcluster import ControlPlane
from tests.support.chart import find, fullname, release_name, render
from tests.support.metric_registry import registered_series, runtime_series
from tests.support.promql import reads

pytestmark = pytest.mark.api

ALERTS = {
    "TrussiumWebhookDown",
    "TrussiumWebhookErrors",
    "TrussiumWebhookSlow",
    "TrussiumWebhookCertificateExpiry",
    "TrussiumWebhookOverloaded",
    "TrussiumControllerDown",
    "TrussiumControllerNoLeader",
    "TrussiumControllerGoLeaseUnreadable",
    "TrussiumControllerReconcileErrors",
    "TrussiumControllerQueueStuck",
    "TrussiumRuntimeNotReady",
    "TrussiumRuntimeUpgradeFailed",
    "TrussiumRuntimeErrors",
    "TrussiumRuntimeSaturated",
}
# Read from the runtimes' PodMonitors, scoped by prometheusRule.runtimeSelector.
RUNTIME_TRAFFIC = {"TrussiumRuntimeErrors", "TrussiumRuntimeSaturated"}
RUNTIME_SELECTOR = 'runtime_name!=""'
CRITICAL = {"TrussiumWebhookDown", "TrussiumControllerDown", "TrussiumControllerNoLeader"}
SERIES = registered_series() | runtime_series()
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
MATCHER = re.compile(r"\{([^}]*)\}")


def selector_labels(expr: str) -> set[str]:
    """Label names that every selector of `expr` matches on beyond the series' own."""
    found = reads(expr)
    extra = [labels - SERIES[name] for name, labels in found.matchers.items()]
    assert all(name in SERIES for name in found.matchers), expr
    for labels, names in found.groupings:
        assert labels <= {"instance"}.union(*(SERIES[name] for name in names)), expr
    assert len({frozenset(e) for e in extra}) == 1, f"selectors differ in scope: {expr}"
    return set(extra[0])


def rules(objects: list[dict[str, Any]], name: str) -> dict[str, dict[str, Any]]:
    (group,) = find(objects, "PrometheusRule", name)["spec"]["groups"]
    return {rule.get("alert") or rule["record"]: rule for rule in group["rules"]}


def test_rules_parse_and_select_the_releases_own_series(
    plane: ControlPlane, namespace: str
) -> None:
    release = release_name()
    name = fullname(release)
    objects = render(
        plane,
        release,
        namespace,
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "prometheusRule.runbookBaseURL=https://docs.example/operations",
        "--set",
        "prometheusRule.alertLabels.team=platform",
    )
    found = rules(objects, name)
    assert set(found) == ALERTS
    for alert, rule in found.items():
        parsed = promql_parser.parse(rule["expr"])
        assert parsed is not None, alert
        assert DURATION.match(rule["for"]), rule["for"]
        assert rule["labels"] == {
            "severity": "critical" if alert in CRITICAL else "warning",
            "team": "platform",
        }
        assert rule["annotations"]["summary"]
        assert rule["annotations"]["runbook_url"] == (
            f"https://docs.example/operations#{alert.lower()}"
        )
        traffic = alert in RUNTIME_TRAFFIC
        assert selector_labels(rule["expr"]) == (set() if traffic else {"namespace"}), alert
        scope = RUNTIME_SELECTOR if traffic else f'namespace="{namespace}"'
        assert all(scope in matchers for matchers in MATCHER.findall(rule["expr"])), alert
    assert "{{ $labels.webhook }}" in found["TrussiumWebhookSlow"]["annotations"]["description"]


def test_overrides_thresholds_and_placement(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    release = release_name()
    name = fullname(release)
    values = {
        "prometheusRule": {
            "enabled": True,
            "namespace": "monitoring",
            "labels": {"release": "kube-prometheus-stack"},
            "alerts": {
                "TrussiumWebhookSlow": {"seconds": 0.25, "for": "2m", "severity": "critical"},
                "TrussiumWebhookCertificateExpiry": {"days": 20},
                "TrussiumControllerReconcileErrors": {"enabled": False},
                "TrussiumRuntimeSaturated": {"inFlight": 8},
            },
            "runtimeSelector": 'cluster="eu-1",runtime_name!=""',
            "additionalRules": [
                {"record": "trussium:admissions:rate5m", "expr": "sum(rate(up[5m]))"}
            ],
        }
    }
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    objects = render(plane, release, namespace, "-f", str(path))
    rule_object = find(objects, "PrometheusRule", name)
    assert rule_object["metadata"]["namespace"] == "monitoring"
    assert rule_object["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    found = rules(objects, name)
    assert "TrussiumControllerReconcileErrors" not in found
    assert "trussium:admissions:rate5m" in found
    slow = found["TrussiumWebhookSlow"]
    assert slow["for"] == "2m"
    assert slow["labels"]["severity"] == "critical"
    assert slow["expr"].rstrip().endswith("> 0.25")
    assert "< 20 * 86400" in found["TrussiumWebhookCertificateExpiry"]["expr"]
    assert "runbook_url" not in slow["annotations"]
    saturated = found["TrussiumRuntimeSaturated"]["expr"]
    assert saturated.rstrip().endswith("> 8")
    assert 'trussium_http_requests_active{cluster="eu-1",runtime_name!=""}' in saturated


def test_no_alert_for_a_component_that_does_not_run_in_the_cluster_or_a_check_turned_off(
    plane: ControlPlane, namespace: str
) -> None:
    release = release_name()
    name = fullname(release)

    def alerts(*settings: str) -> set[str]:
        flags = [
            f for setting in ("prometheusRule.enabled=true", *settings) for f in ("--set", setting)
        ]
        return set(rules(render(plane, release, namespace, *flags), name))

    assert alerts(
        "webhook.urlOverride=https://127.0.0.1:9443", "controller.leaderElection.enabled=false"
    ) == {
        "TrussiumControllerDown",
        "TrussiumControllerGoLeaseUnreadable",
        "TrussiumControllerReconcileErrors",
        "TrussiumControllerQueueStuck",
        "TrussiumRuntimeNotReady",
        "TrussiumRuntimeUpgradeFailed",
        *RUNTIME_TRAFFIC,
    }
    # The runtimes' traffic alerts read the runtimes, wherever the controller runs.
    assert alerts("controller.replicas=0") - RUNTIME_TRAFFIC == {
        a for a in ALERTS if a.startswith("TrussiumWebhook")
    }
    assert alerts("controller.goOperatorExclusion.enabled=false") == ALERTS - {
        "TrussiumControllerGoLeaseUnreadable"
    }
    assert "PrometheusRule" not in {o["kind"] for o in render(plane, release, namespace)}


@pytest.mark.parametrize(
    ("selector", "labels"),
    [('cluster="eu-1",namespace=~"ops|ops-2"', {"cluster", "namespace"}), ("", set())],
)
def test_the_selector_scopes_every_alert_in_place_of_the_namespace(
    plane: ControlPlane, namespace: str, tmp_path: Path, selector: str, labels: set[str]
) -> None:
    """After relabeling (a `cluster` label, other namespaces), or for a Prometheus that
    sees one release only, the selector says which series are this release's; the
    runtimes' traffic alerts keep their own (`runtimeSelector`)."""
    release = release_name()
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"prometheusRule": {"enabled": True, "selector": selector}}))
    found = rules(render(plane, release, namespace, "-f", str(path)), fullname(release))
    assert set(found) == ALERTS
    for alert, rule in found.items():
        if alert in RUNTIME_TRAFFIC:
            assert all(RUNTIME_SELECTOR in m for m in MATCHER.findall(rule["expr"])), alert
            continue
        assert selector_labels(rule["expr"]) == labels, alert
        if selector:
            assert all(selector in m for m in MATCHER.findall(rule["expr"])), alert
