"""Autoscaling on load: the HPA's behavior and the in-flight requests target (ADR 0046)."""

import copy
from typing import Any

import pytest

from tests.pure.test_validation import VALID
from trussium_operator.common.api import IN_FLIGHT_REQUESTS_METRIC, TrussiumRuntime
from trussium_operator.common.parsing import schema_errors
from trussium_operator.common.validation import validate_runtime
from trussium_operator.controller.runtime.kinds import render_managed_objects

BASE_SPEC: dict[str, Any] = {
    "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.4.0"},
    "provider": {"type": "openai", "model": "gpt-4o-mini"},
    "resources": {"requests": {"cpu": "100m"}},
}
CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}
BEHAVIOR = {
    "scaleUp": {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ],
    },
    "scaleDown": {"stabilizationWindowSeconds": 600, "selectPolicy": "Disabled"},
}


def autoscaler(**autoscaling: Any) -> dict[str, Any]:
    runtime = TrussiumRuntime.model_validate(
        {
            "metadata": {"name": "demo", "namespace": "prod", "uid": "u", "generation": 1},
            "spec": {**BASE_SPEC, "autoscaling": {"enabled": True, **autoscaling}},
        }
    )
    (hpa,) = [o for o in render_managed_objects(runtime) if o["kind"] == "HorizontalPodAutoscaler"]
    return dict(hpa["spec"])


def test_without_the_new_fields_the_autoscaler_is_cpu_alone_without_behavior() -> None:
    spec = autoscaler()
    assert spec["metrics"] == [CPU]
    assert "behavior" not in spec


def test_in_flight_target_adds_a_pods_metric_beside_cpu() -> None:
    spec = autoscaler(inFlightRequests={"targetPerPod": 8})
    pods = {
        "type": "Pods",
        "pods": {
            "metric": {"name": "trussium_http_requests_active"},
            "target": {"type": "AverageValue", "averageValue": "8"},
        },
    }
    assert spec["metrics"] == [CPU, pods]
    assert IN_FLIGHT_REQUESTS_METRIC == "trussium_http_requests_active"


def test_the_pods_metric_takes_the_adapters_name() -> None:
    spec = autoscaler(inFlightRequests={"targetPerPod": 2, "metricName": "trussium_in_flight"})
    assert spec["metrics"][1]["pods"]["metric"] == {"name": "trussium_in_flight"}


def test_behavior_is_rendered_as_written() -> None:
    assert autoscaler(behavior=BEHAVIOR)["behavior"] == BEHAVIOR
    assert autoscaler(behavior={})["behavior"] == {}


def with_autoscaling(**autoscaling: Any) -> dict[str, Any]:
    obj = copy.deepcopy(VALID)
    obj["spec"]["autoscaling"] = {"enabled": True, **autoscaling}
    obj["spec"]["resources"] = {"requests": {"cpu": "100m"}}
    return obj


AT = "spec.autoscaling.behavior.scaleUp"


@pytest.mark.parametrize(
    ("autoscaling", "path", "fragment"),
    [
        (
            {"behavior": {"scaleUp": {"stabilizationWindowSeconds": 3601}}},
            f"{AT}.stabilizationWindowSeconds",
            "less than or equal to 3600",
        ),
        (
            {"behavior": {"scaleUp": {"stabilizationWindowSeconds": -1}}},
            f"{AT}.stabilizationWindowSeconds",
            "greater than or equal to 0",
        ),
        ({"behavior": {"scaleUp": {"selectPolicy": "Avg"}}}, f"{AT}.selectPolicy", "Avg"),
        ({"behavior": {"scaleUp": {"policies": []}}}, f"{AT}.policies", "at least 1"),
        (
            {"behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": 1}] * 6}}},
            f"{AT}.policies",
            "at most 5",
        ),
        (
            {"behavior": {"scaleUp": {"policies": [{"type": "Nodes", "value": 1}]}}},
            f"{AT}.policies[0].type",
            "Nodes",
        ),
        (
            {"behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": 0}]}}},
            f"{AT}.policies[0].value",
            "greater than or equal to 1",
        ),
        (
            {
                "behavior": {
                    "scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 1801}]}
                }
            },
            f"{AT}.policies[0].periodSeconds",
            "less than or equal to 1800",
        ),
        (
            {"behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": 1}]}}},
            f"{AT}.policies[0].periodSeconds",
            "Required value",
        ),
        (
            {"inFlightRequests": {"targetPerPod": 0}},
            "spec.autoscaling.inFlightRequests.targetPerPod",
            "greater than or equal to 1",
        ),
        (
            {"inFlightRequests": {}},
            "spec.autoscaling.inFlightRequests.targetPerPod",
            "Required value",
        ),
        (
            {"inFlightRequests": {"targetPerPod": 4, "metricName": "requests/active"}},
            "spec.autoscaling.inFlightRequests.metricName",
            "must be matching",
        ),
    ],
)
def test_bad_autoscaling_is_refused_at_its_field(
    autoscaling: dict[str, Any], path: str, fragment: str
) -> None:
    obj = with_autoscaling(**autoscaling)
    errors = {e.path: e.message for e in validate_runtime(obj).errors}
    assert fragment in errors[path], errors
    assert path in {e.path for e in schema_errors(obj)}


def test_the_bounds_themselves_are_accepted() -> None:
    behavior = {
        "scaleUp": {
            "stabilizationWindowSeconds": 3600,
            "policies": [{"type": "Percent", "value": 1, "periodSeconds": 1800}] * 5,
        },
        "scaleDown": {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 1}],
        },
    }
    obj = with_autoscaling(behavior=behavior, inFlightRequests={"targetPerPod": 1})
    assert validate_runtime(obj).errors == ()
