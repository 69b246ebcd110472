"""The events.k8s.io/v1 Event the controller posts for a decision."""

import re
from datetime import UTC, datetime

from common.events import EventDecision
from controller.recorder import event_body


def test_event_regards_the_runtime_with_microsecond_time_and_reporting_identity() -> None:
    runtime = {"metadata": {"name": "rt", "namespace": "ns", "uid": "u-1", "resourceVersion": "9"}}
    decision = EventDecision("Normal", "RuntimeReady", "ObserveRuntime", "1 of 1 replicas ready.")
    now = datetime(2026, 11, 29, 8, 0, 1, 5, tzinfo=UTC)
    body = event_body(runtime, decision, instance="operator-0", now=now)
    name = body["metadata"]["name"]
    assert body["metadata"]["namespace"] == "ns"
    # events.k8s.io validates the name as a DNS subdomain (a trailing-dot generateName fails).
    assert re.fullmatch(r"rt\.[0-9a-f]+", name)
    assert event_body(runtime, decision, instance="operator-0", now=now)["metadata"]["name"] != name
    assert body["regarding"] == {
        "apiVersion": "runtime.trussium.io/v1alpha1",
        "kind": "TrussiumRuntime",
        "name": "rt",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "9",
    }
    assert body["eventTime"] == "2026-11-29T08:00:01.000005Z"
    assert (body["reportingController"], body["reportingInstance"]) == (
        "trussium-operator",
        "operator-0",
    )
    assert (body["type"], body["reason"], body["action"]) == (
        "Normal",
        "RuntimeReady",
        "ObserveRuntime",
    )
    assert body["note"] == "1 of 1 replicas ready."
