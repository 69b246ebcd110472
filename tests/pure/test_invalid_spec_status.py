"""The status of a stored runtime our rules reject (common.status.invalid_spec_status)."""

from typing import Any

import pytest

from trussium_operator.common.events import decide_events
from trussium_operator.common.k8s_validation import FieldError
from trussium_operator.common.status import MAX_LISTED_ERRORS, invalid_spec_status, status_differs

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:05:00Z"
IMAGE = "ghcr.io/trussium/runtime:1.4.0"
ERRORS = (
    FieldError("spec.provider.baseURL", "must be an absolute http or https URL with a host"),
    FieldError("spec.resources.claims[0].name", "Required value"),
)
UPGRADING = {
    "type": "Upgrading",
    "status": "False",
    "reason": "UpgradeComplete",
    "message": "The upgrade from a to b completed.",
    "observedGeneration": 2,
    "lastTransitionTime": T0,
}
READY = {
    "type": "Ready",
    "status": "True",
    "reason": "RuntimeReady",
    "message": "2 of 2 replicas are ready.",
    "observedGeneration": 2,
    "lastTransitionTime": T0,
}
PREVIOUS = {
    "observedGeneration": 2,
    "readyReplicas": 2,
    "availableReplicas": 2,
    "desiredImage": IMAGE,
    "currentImage": IMAGE,
    "lastSuccessfulImage": IMAGE,
    "conditions": [READY, UPGRADING],
}
DEPLOYMENT = {
    "metadata": {"name": "demo", "generation": 4},
    "spec": {
        "replicas": 2,
        "template": {"spec": {"containers": [{"name": "trussium", "image": IMAGE}]}},
    },
    "status": {"observedGeneration": 4, "readyReplicas": 2, "availableReplicas": 2},
}
SERVICE = {"metadata": {"name": "demo"}, "spec": {"ports": [{"name": "http", "port": 9000}]}}


def stored(spec: Any = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": "demo", "namespace": "prod", "generation": 3},
        "spec": {"replicas": 2, "provider": {"baseURL": "localhost:11434"}}
        if spec is None
        else spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_a_running_runtime_reports_its_spec_invalid_and_keeps_what_it_observed() -> None:
    status = invalid_spec_status(
        stored(status=PREVIOUS), ERRORS, deployment=DEPLOYMENT, service=SERVICE, now=T1
    )
    assert conditions(status) == {
        "ConfigurationValid": ("False", "InvalidSpec"),
        "Progressing": ("False", "ConfigurationInvalid"),
        "Available": ("True", "RuntimeAvailable"),
        "Ready": ("False", "ConfigurationInvalid"),
        "Degraded": ("True", "ConfigurationInvalid"),
        "Upgrading": ("False", "UpgradeComplete"),
    }
    assert all(c["observedGeneration"] == 3 for c in status["conditions"])
    assert status["observedGeneration"] == 3
    upgrading = next(c for c in status["conditions"] if c["type"] == "Upgrading")
    assert upgrading["lastTransitionTime"] == T0, "Upgrading is left as it was"
    assert (status["readyReplicas"], status["availableReplicas"]) == (2, 2)
    assert status["desiredReplicas"] == 2, "the Deployment's count"
    assert status["desiredImage"] == status["lastSuccessfulImage"] == IMAGE
    assert status["endpoint"] == "http://demo.prod.svc.cluster.local:9000"
    valid = next(c for c in status["conditions"] if c["type"] == "ConfigurationValid")
    for error in ERRORS:
        assert f"{error.path}: {error.message}" in valid["message"]


@pytest.mark.parametrize(
    ("spec", "deployment", "available", "desired"),
    [
        ({"replicas": 0}, None, ("False", "ScaledToZero"), 0),
        ({"replicas": 3}, None, ("False", "RuntimeUnavailable"), 3),
        ("not an object", None, ("False", "RuntimeUnavailable"), 1),
        ({"replicas": "two"}, DEPLOYMENT, ("True", "RuntimeAvailable"), 2),
    ],
    ids=["spec-zero", "spec-three", "unparseable-spec", "deployment-wins"],
)
def test_availability_comes_from_what_runs_else_the_raw_spec(
    spec: Any, deployment: dict[str, Any] | None, available: tuple[str, str], desired: int
) -> None:
    status = invalid_spec_status(stored(spec), ERRORS, deployment=deployment, service=None, now=T1)
    assert conditions(status)["Available"] == available
    assert status["desiredReplicas"] == desired, "the count availability was judged on"
    assert "Upgrading" not in conditions(status), "no Upgrading invented for a new runtime"
    assert "endpoint" not in status
    assert "desiredImage" not in status


def test_one_warning_per_transition_and_nothing_when_unchanged() -> None:
    first = invalid_spec_status(
        stored(status=PREVIOUS), ERRORS, deployment=DEPLOYMENT, service=SERVICE, now=T1
    )
    decided = [(d.type, d.reason) for d in decide_events(PREVIOUS, first)]
    assert decided == [("Warning", "ConfigurationInvalid"), ("Warning", "RuntimeDegraded")]
    again = invalid_spec_status(
        stored(status=first), ERRORS, deployment=DEPLOYMENT, service=SERVICE, now=T1
    )
    assert not status_differs(first, again)
    assert decide_events(first, again) == []


def test_a_long_error_list_is_cut_with_a_count() -> None:
    errors = tuple(FieldError(f"spec.x[{i}]", "bad") for i in range(MAX_LISTED_ERRORS + 5))
    status = invalid_spec_status(stored(), errors, deployment=None, service=None, now=T1)
    message = next(c for c in status["conditions"] if c["type"] == "ConfigurationValid")["message"]
    assert f"spec.x[{MAX_LISTED_ERRORS - 1}]" in message
    assert f"spec.x[{MAX_LISTED_ERRORS}]" not in message
    assert "and 5 more" in message
