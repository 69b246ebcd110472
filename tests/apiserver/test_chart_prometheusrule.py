"""The optional PrometheusRule: valid Prometheus rules (expressions parsed with
Prometheus' grammar), aimed at the series the chart's own Services expose,
and shaped by values."""

import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client import REGISTRY, CollectorRegistry

import controller.machinery.metrics  # noqa: F401  (registers the controller's metrics in REGISTRY)
from devcluster import ControlPlane
from tests.support.chart import find, fullname, release_name, render
from webhook.metrics import WebhookMetrics

pytestmark = pytest.mark.api

ALERTS = {
    "TrussiumWebhookDown",
    "TrussiumWebhookErrors",
    "TrussiumWebhookSlow",
    "TrussiumWebhookCertificateExpiry",
    "TrussiumControllerDown",
    "TrussiumControllerNoLeader",
    "TrussiumControllerReconcileErrors",
}


def exposed_names(registry: CollectorRegistry) -> set[str]:
    """The series names a registry's metrics are scraped under."""
    suffixes = {
        "counter": ("_total",),
        "histogram": ("_bucket", "_sum", "_count"),
        "gauge": ("",),
    }
    return {
        family.name + suffix
        for family in registry.collect()
        for suffix in suffixes.get(family.type, ("",))
    }


# What the two programs expose, read from their registries, plus Prometheus' own `up`.
METRICS = {"up"} | exposed_names(WebhookMetrics().registry) | exposed_names(REGISTRY)
SELECTOR = re.compile(r"([a-z_]+)\{([^}]*)\}")
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


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
    services = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
    for alert, rule in found.items():
        parsed = promql_parser.parse(rule["expr"])
        assert parsed is not None, alert
        assert DURATION.match(rule["for"]), rule["for"]
        assert rule["labels"] == {
            "severity": "critical" if alert.endswith(("Down", "NoLeader")) else "warning",
            "team": "platform",
        }
        assert rule["annotations"]["summary"]
        assert rule["annotations"]["runbook_url"] == (
            f"https://docs.example/operations#{alert.lower()}"
        )
        for metric, matchers in SELECTOR.findall(rule["expr"]):
            assert metric in METRICS, f"{alert} uses {metric}"
            job = re.search(r'job="([^"]+)"', matchers)
            assert job is not None, f"{alert}: {metric} is not scoped to a job"
            assert job.group(1) in services, "jobs are the chart's Service names"
            assert f'namespace="{namespace}"' in matchers
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
            },
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


def test_no_alert_for_a_component_that_does_not_run_in_the_cluster(
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
        "webhook.urlOverride=https://127.0.0.1:9443",
        "--set",
        "controller.leaderElection.enabled=false",
    )
    assert set(rules(objects, name)) == {
        "TrussiumControllerDown",
        "TrussiumControllerReconcileErrors",
    }
    without_controller = render(
        plane,
        release,
        namespace,
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "controller.replicas=0",
    )
    assert not any(a.startswith("TrussiumController") for a in rules(without_controller, name))
    assert "PrometheusRule" not in {o["kind"] for o in render(plane, release, namespace)}
