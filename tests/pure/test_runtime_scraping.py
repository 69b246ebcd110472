"""Scraping the runtime, opt-in per runtime (ADR 0047): a PodMonitor only when the
runtime asks for one, its series labelled with the runtime, and the NetworkPolicy
admitting the named scrapers to the runtime's port only. A runtime that asks for
neither renders what it rendered before."""

import copy
from typing import Any

import pytest

from trussium_operator.common import constants
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.validation import validate_runtime
from trussium_operator.controller.runtime.kinds import (
    MANAGED_KINDS,
    disabled_kinds,
    render_managed_objects,
)

BASE_SPEC: dict[str, Any] = {
    "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.4.0"},
    "provider": {"type": "ollama", "model": "llama3.2", "baseURL": "http://ollama:11434/v1"},
}
PROMETHEUS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
}
POLICY = {"enabled": True, "ingress": [{"namespaceSelector": {}}]}


def manifest(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "metadata": {"name": "chat", "namespace": "team", "uid": "u-1", "generation": 1},
        "spec": {**copy.deepcopy(BASE_SPEC), **spec},
    }


def objects(**spec: Any) -> dict[str, dict[str, Any]]:
    runtime = TrussiumRuntime.model_validate(manifest(**spec))
    return {obj["kind"]: obj for obj in render_managed_objects(runtime)}


def errors(**spec: Any) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in validate_runtime(manifest(**spec)).errors]


def test_a_runtime_that_does_not_opt_in_has_no_pod_monitor() -> None:
    for observability in (None, {"metrics": True}, {"monitor": {"enabled": False}}):
        spec = {"observability": observability} if observability else {}
        runtime = TrussiumRuntime.model_validate(manifest(**spec))
        assert "PodMonitor" not in objects(**spec)
        assert "PodMonitor" in [k.kind for k in disabled_kinds(runtime)]


def test_the_pod_monitor_scrapes_the_runtimes_pods_labelled_with_the_runtime() -> None:
    monitor = {"enabled": True, "interval": "15s", "labels": {"release": "prometheus"}}
    found = objects(observability={"monitor": monitor})
    pod_monitor = found["PodMonitor"]
    assert pod_monitor["apiVersion"] == "monitoring.coreos.com/v1"
    meta = pod_monitor["metadata"]
    assert (meta["name"], meta["namespace"]) == ("chat", "team")
    assert meta["labels"]["release"] == "prometheus"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "trussium-operator"
    assert [(o["kind"], o["name"], o["controller"]) for o in meta["ownerReferences"]] == [
        ("TrussiumRuntime", "chat", True)
    ]
    # The Pods the Deployment runs, on the container's named port.
    pods = found["Deployment"]["spec"]["template"]
    assert pod_monitor["spec"]["selector"] == found["Deployment"]["spec"]["selector"]
    assert (
        pod_monitor["spec"]["selector"]["matchLabels"].items() <= pods["metadata"]["labels"].items()
    )
    (endpoint,) = pod_monitor["spec"]["podMetricsEndpoints"]
    (port,) = pods["spec"]["containers"][0]["ports"]
    assert (endpoint["port"], endpoint["path"], endpoint["interval"]) == (
        port["name"],
        "/metrics",
        "15s",
    )
    assert endpoint["relabelings"] == [
        {"sourceLabels": ["__meta_kubernetes_namespace"], "targetLabel": "runtime_namespace"},
        {
            "sourceLabels": ["__meta_kubernetes_pod_label_app_kubernetes_io_instance"],
            "targetLabel": "runtime_name",
        },
    ]
    assert (
        "interval"
        not in objects(observability={"monitor": {"enabled": True}})["PodMonitor"]["spec"][
            "podMetricsEndpoints"
        ][0]
    )


def test_the_pod_monitor_is_an_optional_kind_applied_last() -> None:
    (kind,) = [k for k in MANAGED_KINDS if k.kind == "PodMonitor"]
    assert kind.optional
    assert kind.resource.plural == "podmonitors"
    assert MANAGED_KINDS[-1] is kind
    assert [k for k in MANAGED_KINDS if k.optional] == [kind]


@pytest.mark.parametrize(
    ("interval", "valid"),
    [
        *[("30s", True), ("1m30s", True), ("500ms", True), ("2h", True)],
        *[("30", False), ("1s1m", False), ("30 s", False), ("-1s", False)],
    ],
)
def test_the_interval_is_a_prometheus_duration(interval: str, valid: bool) -> None:
    found = errors(observability={"monitor": {"enabled": True, "interval": interval}})
    assert (found == []) is valid, found


def test_a_monitor_needs_the_runtimes_metrics() -> None:
    message = "monitor.enabled needs the runtime's metrics: remove metrics: false"
    off = {"metrics": False, "monitor": {"enabled": True}}
    assert errors(observability=off) == [("spec.observability", message)]
    assert errors(observability={"metrics": False, "monitor": {"enabled": False}}) == []
    assert errors(observability={"metrics": True, "monitor": {"enabled": True}}) == []


def test_the_monitors_labels_are_label_shaped_and_not_the_operators() -> None:
    reserved = {"app.kubernetes.io/instance": "other", "release": "prometheus"}
    assert errors(observability={"monitor": {"enabled": True, "labels": reserved}}) == [
        (
            "spec.observability.monitor.labels[app.kubernetes.io/instance]",
            "label app.kubernetes.io/instance is set by the operator and cannot be overridden; "
            "remove it",
        )
    ]
    bad = errors(observability={"monitor": {"enabled": True, "labels": {"a b": "c"}}})
    assert [path for path, _ in bad] == ["spec.observability.monitor.labels[a b]"]


def test_the_network_policy_admits_the_scrapers_to_the_runtimes_port_only() -> None:
    before = objects(networkPolicy=POLICY)["NetworkPolicy"]
    policy = objects(networkPolicy=POLICY | {"scrapers": [PROMETHEUS, {"namespaceSelector": {}}]})
    rules = policy["NetworkPolicy"]["spec"]["ingress"]
    assert rules[:-1] == before["spec"]["ingress"]
    assert rules[-1] == {
        "from": [PROMETHEUS, {"namespaceSelector": {}}],
        "ports": [{"protocol": "TCP", "port": constants.CONTAINER_PORT}],
    }
    # Scrapers name who may scrape while a policy is on; they turn none on.
    assert "NetworkPolicy" not in objects(networkPolicy={"scrapers": [PROMETHEUS]})


def test_the_scrapers_selectors_are_checked() -> None:
    bad = {"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}
    found = errors(networkPolicy=POLICY | {"scrapers": [bad]})
    assert [path for path, _ in found] == [
        "spec.networkPolicy.scrapers[0].namespaceSelector.matchExpressions[0].values"
    ]
