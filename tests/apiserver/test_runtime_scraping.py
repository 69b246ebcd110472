"""A runtime that asks to be scraped (ADR 0047), on the control plane: while
prometheus-operator's PodMonitor API is not served it runs Ready without one and
without an error; once the CRD is installed its PodMonitor appears, with no
restart of the controller. Its NetworkPolicy, as stored, admits the named
scraper to the runtime's port only."""

import json
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    apply,
    get,
    must_get,
    patch_status,
    reasons,
    running_controller,
    runtime_manifest,
    scoped,
    wait_condition,
    wait_for,
)
from devcluster.hostoperator import install_crds
from tests.support.pod_monitor_crd import NAME, pod_monitor_crd
from trussium_operator.common import constants as c

pytestmark = pytest.mark.api
SCRAPER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
}
CLIENTS = {"namespaceSelector": {"matchLabels": {"team": "chat"}}}
MONITOR = {"enabled": True, "interval": "30s", "labels": {"release": "prometheus"}}
# How long the controller may take to see a CRD appear: its list is retried every
# 10 s, jittered (ADR 0018).
SERVED_SECONDS = 40


def mark_deployment_available(plane: ControlPlane, name: str, namespace: str) -> None:
    generation = must_get(plane, "deployment", name, namespace)["metadata"]["generation"]
    status = {
        "observedGeneration": generation,
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": 1,
        "availableReplicas": 1,
    }
    patch_status(plane.kubectl, "deployment", name, namespace, status)


def test_the_pod_monitor_waits_for_its_crd_and_the_policy_admits_the_scraper(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    install_crds(plane)
    plane.kubectl("delete", "crd", NAME, "--ignore-not-found", "--wait=true")
    name = "chat"
    spec = {
        "observability": {"monitor": MONITOR},
        "networkPolicy": {"enabled": True, "ingress": [CLIENTS], "scrapers": [SCRAPER]},
    }
    try:
        with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
            apply(plane, runtime_manifest(name, namespace, **spec))
            wait_for(lambda: get(plane, "deployment", name, namespace), "the Deployment")
            mark_deployment_available(plane, name, namespace)
            wait_condition(plane, name, namespace, "Ready", "True", "RuntimeReady")
            assert "ReconciliationFailed" not in reasons(plane, namespace, name)

            # The stored policy: clients and the scraper each on the runtime's port only.
            policy = must_get(plane, "networkpolicy", name, namespace)["spec"]
            port = [{"protocol": "TCP", "port": c.CONTAINER_PORT}]
            assert policy["ingress"] == [
                {"from": [CLIENTS], "ports": port},
                {"from": [SCRAPER], "ports": port},
            ]

            plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(pod_monitor_crd()))
            plane.kubectl("wait", "--for=condition=Established", f"crd/{NAME}", "--timeout=30s")
            monitor = wait_for(
                lambda: get(plane, "podmonitor", name, namespace),
                "the runtime's PodMonitor, once its CRD is served",
                timeout=SERVED_SECONDS,
            )
            labels = monitor["metadata"]["labels"]
            assert labels["release"] == "prometheus"
            assert labels["app.kubernetes.io/instance"] == name
            (owner,) = monitor["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"]) == ("TrussiumRuntime", name)
            (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
            assert (endpoint["port"], endpoint["path"], endpoint["interval"]) == (
                c.PORT_NAME,
                c.METRICS_PATH,
                "30s",
            )
            assert [r["targetLabel"] for r in endpoint["relabelings"]] == [
                "runtime_namespace",
                "runtime_name",
            ]
            selector = must_get(plane, "deployment", name, namespace)["spec"]["selector"]
            assert monitor["spec"]["selector"] == selector

            # Turned off, it is deleted; the runtime stays Ready throughout.
            apply(
                plane,
                runtime_manifest(
                    name, namespace, **{**spec, "observability": {"monitor": {"enabled": False}}}
                ),
            )
            wait_for(
                lambda: get(plane, "podmonitor", name, namespace) is None or None,
                "the PodMonitor deleted once the runtime no longer asks for it",
            )
            wait_condition(plane, name, namespace, "Ready", "True", "RuntimeReady")
            assert "ReconciliationFailed" not in reasons(plane, namespace, name)
    finally:
        plane.kubectl("delete", "crd", NAME, "--ignore-not-found", "--wait=false")
