"""The autoscaler on load on a real API server: stored as rendered, and refused where the
API server refuses it (ADR 0046)."""

import copy
import json
from typing import Any

import pytest

from tests.conftest import Kubectl
from tests.pure.test_validation import VALID
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.validation import validate_runtime
from trussium_operator.controller.runtime.kinds import render_managed_objects

pytestmark = pytest.mark.api

AUTOSCALING: dict[str, Any] = {
    "enabled": True,
    "minReplicas": 2,
    "maxReplicas": 6,
    "inFlightRequests": {"targetPerPod": 8},
    "behavior": {
        "scaleUp": {
            "stabilizationWindowSeconds": 30,
            "selectPolicy": "Min",
            "policies": [
                {"type": "Pods", "value": 2, "periodSeconds": 60},
                {"type": "Percent", "value": 50, "periodSeconds": 60},
            ],
        },
        "scaleDown": {"stabilizationWindowSeconds": 900},
    },
}


def render(namespace: str, autoscaling: dict[str, Any]) -> dict[str, Any]:
    runtime = TrussiumRuntime.model_validate(
        {
            "metadata": {"name": "demo", "namespace": namespace, "uid": "0d6c6b2e-1"},
            "spec": {
                "image": {"repository": "ghcr.io/trussium/runtime", "tag": "1.4.0"},
                "provider": {"type": "openai", "model": "gpt-4o-mini"},
                "resources": {"requests": {"cpu": "100m"}},
                "autoscaling": autoscaling,
            },
        }
    )
    (hpa,) = [o for o in render_managed_objects(runtime) if o["kind"] == "HorizontalPodAutoscaler"]
    return hpa


def apply(kubectl: Kubectl, obj: dict[str, Any], *extra: str, check: bool = True) -> Any:
    return kubectl(
        "apply",
        "--server-side",
        "--field-manager=trussium-operator",
        *extra,
        "-f",
        "-",
        input=json.dumps(obj),
        check=check,
    )


def stored(kubectl: Kubectl, namespace: str) -> dict[str, Any]:
    found = kubectl("get", "-n", namespace, "hpa.autoscaling", "demo", "-o", "json")
    live: dict[str, Any] = json.loads(found.stdout)
    return live


def test_the_autoscaler_on_load_is_stored_as_rendered(kubectl: Kubectl, namespace: str) -> None:
    hpa = render(namespace, AUTOSCALING)
    apply(kubectl, hpa)
    live = stored(kubectl, namespace)
    assert live["spec"]["metrics"] == hpa["spec"]["metrics"]
    assert live["spec"]["behavior"]["scaleUp"] == hpa["spec"]["behavior"]["scaleUp"]
    # What the runtime leaves unset the API server fills with its defaults.
    scale_down = live["spec"]["behavior"]["scaleDown"]
    assert scale_down["stabilizationWindowSeconds"] == 900
    assert scale_down["selectPolicy"] == "Max"
    assert scale_down["policies"]

    apply(kubectl, render(namespace, AUTOSCALING))
    assert (
        stored(kubectl, namespace)["metadata"]["resourceVersion"]
        == (live["metadata"]["resourceVersion"])
    )


RULES = "behavior.scaleUp"


@pytest.mark.parametrize(
    "scale_up",
    [
        {"stabilizationWindowSeconds": 3600},
        {"stabilizationWindowSeconds": 3601},
        {"stabilizationWindowSeconds": 0},
        {"stabilizationWindowSeconds": -1},
        {"selectPolicy": "Disabled"},
        {"selectPolicy": "Average"},
        {"policies": []},
        {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 1800}]},
        {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 1801}]},
        {"policies": [{"type": "Percent", "value": 1, "periodSeconds": 1}]},
        {"policies": [{"type": "Percent", "value": 1, "periodSeconds": 0}]},
        {"policies": [{"type": "Pods", "value": 0, "periodSeconds": 15}]},
        {"policies": [{"type": "Nodes", "value": 1, "periodSeconds": 15}]},
    ],
)
def test_the_webhook_refuses_a_behavior_where_the_api_server_does(
    scale_up: dict[str, Any], kubectl: Kubectl, namespace: str
) -> None:
    """The same behavior in a runtime and, rendered, in an HPA: refused by both or neither."""
    autoscaling = {"enabled": True, "behavior": {"scaleUp": scale_up}}
    obj = copy.deepcopy(VALID)
    obj["spec"] |= {"autoscaling": autoscaling, "resources": {"requests": {"cpu": "1"}}}
    webhook_allows = validate_runtime(obj).allowed
    if webhook_allows:
        hpa = render(namespace, autoscaling)
    else:
        # Render what the runtime would have asked for, bypassing the models' bounds.
        hpa = render(namespace, {"enabled": True})
        hpa["spec"]["behavior"] = {"scaleUp": scale_up}
    answer = apply(kubectl, hpa, "--dry-run=server", check=False)
    assert (answer.returncode == 0) == webhook_allows, answer.stderr
    if not webhook_allows:
        assert f"spec.{RULES}" in answer.stderr
