"""A runtime scales up on its in-flight requests: the operator's HPA, kube-controller-manager's
HPA controller and a custom metrics API reached through the API server's aggregator.

The metrics API is a stand-in (tests/support/custom_metrics.py) reporting 20
in-flight requests on every runtime Pod; with a target of 5 per Pod the HPA
asks for 4 times the Pods. No resource metrics API runs here, so the CPU
metric beside it cannot be read: the HPA still scales up on the metric it
can read, as it does whenever the other metrics would not scale down.
"""

from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.controller_harness import (
    Obj,
    apply,
    get,
    must_get,
    running_controller,
    runtime_manifest,
    scoped,
    wait_for,
)
from devcluster.hostoperator import install_crds
from tests.support.custom_metrics import (
    GROUP,
    VERSION,
    api_service,
    pods_json_names,
    serving_custom_metrics,
)
from trussium_operator.common.api import IN_FLIGHT_REQUESTS_METRIC

pytestmark = pytest.mark.cluster
SERVICE = "custom-metrics"
IN_FLIGHT_PER_POD = "20"
TARGET_PER_POD = 5
MAX_REPLICAS = 4
AVAILABLE_TIMEOUT_SECONDS = 30.0
SCALED_TIMEOUT_SECONDS = 60.0


def available(plane: ControlPlane) -> bool:
    registration = get(plane, "apiservice", f"{VERSION}.{GROUP}", "") or {}
    conditions = registration.get("status", {}).get("conditions", [])
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


def pods_metric_read(plane: ControlPlane, namespace: str) -> str | None:
    """The average the HPA last read of its Pods metric, from its status."""
    hpa = must_get(plane, "horizontalpodautoscaler", "rt", namespace)
    for metric in hpa.get("status", {}).get("currentMetrics") or ():
        if metric["type"] == "Pods":
            return str(metric["pods"]["current"]["averageValue"])
    return None


def test_the_runtime_scales_up_on_in_flight_requests_per_pod(
    plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    install_crds(plane)

    def list_pods(in_namespace: str, selector: str) -> list[str]:
        found = plane.kubectl("get", "pods", "-n", in_namespace, "-l", selector, "-o", "json")
        return pods_json_names(found.stdout)

    with serving_custom_metrics(
        SERVICE, namespace, IN_FLIGHT_REQUESTS_METRIC, IN_FLIGHT_PER_POD, list_pods
    ) as server:
        try:
            for obj in api_service(SERVICE, namespace, server):
                apply(plane, obj)
            wait_for(
                lambda: available(plane) or None,
                "the custom metrics APIService Available",
                timeout=AVAILABLE_TIMEOUT_SECONDS,
            )
            autoscaling: Obj = {
                "enabled": True,
                "minReplicas": 1,
                "maxReplicas": MAX_REPLICAS,
                "inFlightRequests": {"targetPerPod": TARGET_PER_POD},
                "behavior": {
                    "scaleUp": {"policies": [{"type": "Pods", "value": 8, "periodSeconds": 15}]},
                    "scaleDown": {"selectPolicy": "Disabled"},
                },
            }
            runtime = runtime_manifest(
                "rt",
                namespace,
                autoscaling=autoscaling,
                resources={"requests": {"cpu": "100m"}},
            )
            with running_controller(plane, tmp_path / "controller.log", *scoped(namespace)):
                apply(plane, runtime)
                wait_for(
                    lambda: (
                        (get(plane, "deployment", "rt", namespace) or {})
                        .get("spec", {})
                        .get("replicas")
                        == MAX_REPLICAS
                        or None
                    ),
                    f"the autoscaler scaling the runtime to {MAX_REPLICAS}",
                    timeout=SCALED_TIMEOUT_SECONDS,
                )
                # The HPA writes its status after the scale: what it read, per Pod.
                wait_for(
                    lambda: pods_metric_read(plane, namespace) == IN_FLIGHT_PER_POD or None,
                    "the HPA's status showing the in-flight requests it read",
                )
                wait_for(
                    lambda: (
                        (get(plane, "trussiumruntime", "rt", namespace) or {})
                        .get("status", {})
                        .get("desiredReplicas")
                        == MAX_REPLICAS
                        or None
                    ),
                    "the runtime's status showing the autoscaler's count",
                )
        finally:
            plane.kubectl(
                "delete", "apiservice", f"{VERSION}.{GROUP}", "--ignore-not-found", "--wait=false"
            )
