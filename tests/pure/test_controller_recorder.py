"""The events.k8s.io/v1 Event the controller posts for a decision."""

import re
from datetime import UTC, datetime

from trussium_operator.common.events import EventDecision
from trussium_operator.controller.runtime.recorder import event_body, event_name


def test_event_regards_the_runtime_with_microsecond_time_and_reporting_identity() -> None:
    runtime = {"metadata": {"name": "rt", "namespace": "ns", "uid": "u-1", "resourceVersion": "9"}}
    decision = EventDecision("Normal", "RuntimeReady", "ObserveRuntime", "1 of 1 replicas ready.")
    now = datetime(2026, 11, 29, 8, 0, 1, 5, tzinfo=UTC)
    body = event_body(runtime, decision, instance="operator-0", now=now)
    name = body["metadata"]["name"]
    assert body["metadata"]["namespace"] == "ns"
    # events.k8s.io validates the name as a DNS subdomain (a trailing-dot generateName fails).
    assert re.fullmatch(r"rt\.[0-9a-f]+", name)
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


RUNTIME = {"metadata": {"name": "rt", "namespace": "ns", "uid": "u-1", "resourceVersion": "9"}}
READY = EventDecision("Normal", "RuntimeReady", "ObserveRuntime", "1 of 1 replicas ready.")
FAILED = EventDecision("Warning", "ReconciliationFailed", "ReconcileRuntime", "500 boom")
T1 = datetime(2026, 11, 29, 8, 0, 1, tzinfo=UTC)
T2 = datetime(2026, 11, 29, 8, 0, 9, tzinfo=UTC)


def test_a_transition_reposted_after_a_restart_gets_the_same_name() -> None:
    """Same runtime version, same reason: the repost is a 409, not a duplicate event."""
    assert event_name(RUNTIME, READY, T1) == event_name(RUNTIME, READY, T2)


def test_a_later_transition_of_the_same_reason_gets_a_new_name() -> None:
    later = {"metadata": RUNTIME["metadata"] | {"resourceVersion": "12"}}
    assert event_name(later, READY, T1) != event_name(RUNTIME, READY, T1)
    other = EventDecision("Normal", "RuntimeProgressing", "ReconcileRuntime", "Rolling out.")
    assert event_name(RUNTIME, other, T1) != event_name(RUNTIME, READY, T1)


def test_every_reconcile_failure_is_its_own_event() -> None:
    assert event_name(RUNTIME, FAILED, T1) != event_name(RUNTIME, FAILED, T1)
