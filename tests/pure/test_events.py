"""The Events of docs/contract.md section 8: only on transitions, in a stable order."""

from typing import Any

import pytest

from trussium_operator.common.events import EventDecision, decide_events

A = "ghcr.io/trussium/runtime:1.4.0"
B = "ghcr.io/trussium/runtime:1.5.0"
STEADY = {
    "ConfigurationValid": ("True", "ReferencesResolved"),
    "Progressing": ("False", "ReconciliationComplete"),
    "Available": ("True", "RuntimeAvailable"),
    "Ready": ("True", "RuntimeReady"),
    "Degraded": ("False", "AsExpected"),
    "Upgrading": ("False", "NoUpgrade"),
}


def status(last: str = A, desired: str = A, **changes: tuple[str, str]) -> dict[str, Any]:
    states = STEADY | changes
    return {
        "desiredImage": desired,
        "lastSuccessfulImage": last,
        "conditions": [
            {
                "type": type_,
                "status": state,
                "reason": reason,
                "message": f"{type_} is {reason}.",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
            for type_, (state, reason) in states.items()
        ],
    }


def summary(decisions: list[EventDecision]) -> list[tuple[str, str, str]]:
    return [(d.type, d.reason, d.action) for d in decisions]


def test_nothing_changed_nothing_emitted() -> None:
    assert decide_events(status(), status()) == []


def test_a_new_message_alone_emits_nothing() -> None:
    new = status()
    new["conditions"][3]["message"] = "3 of 3 replicas are ready."
    new["conditions"][3]["lastTransitionTime"] = "2026-01-02T00:00:00Z"
    assert decide_events(status(), new) == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            status(),
            status(ConfigurationValid=("False", "SecretNotFound")),
            [("Warning", "ConfigurationInvalid", "ValidateConfiguration")],
        ),
        (
            status(ConfigurationValid=("False", "SecretNotFound")),
            status(ConfigurationValid=("False", "ReferenceCheckFailed")),
            [("Warning", "ConfigurationInvalid", "ValidateConfiguration")],
        ),
        (status(ConfigurationValid=("False", "SecretNotFound")), status(), []),
        (
            status(),
            status(Degraded=("True", "ReplicaFailure")),
            [("Warning", "RuntimeDegraded", "ObserveRuntime")],
        ),
        (
            status(Degraded=("True", "ReplicaFailure")),
            status(Degraded=("True", "ProgressDeadlineExceeded")),
            [("Warning", "RuntimeDegraded", "ObserveRuntime")],
        ),
        (
            status(Degraded=("True", "ReplicaFailure")),
            status(),
            [("Normal", "RuntimeRecovered", "ObserveRuntime")],
        ),
        (
            status(),
            status(Progressing=("True", "DeploymentProgressing")),
            [("Normal", "RuntimeProgressing", "ReconcileRuntime")],
        ),
        (
            status(Progressing=("True", "DeploymentGenerationPending")),
            status(Progressing=("True", "DeploymentProgressing")),
            [("Normal", "RuntimeProgressing", "ReconcileRuntime")],
        ),
        (status(Progressing=("True", "DeploymentProgressing")), status(), []),
        (
            status(Ready=("False", "RuntimeNotReady")),
            status(),
            [("Normal", "RuntimeReady", "ObserveRuntime")],
        ),
        (
            status(Ready=("False", "RuntimeNotReady")),
            status(Ready=("True", "ScaledToZero")),
            [("Normal", "RuntimeScaledToZero", "ObserveRuntime")],
        ),
        (status(), status(Ready=("False", "RuntimeNotReady")), []),
        (status(), status(Available=("False", "RuntimeUnavailable")), []),
    ],
    ids=[
        "configuration-invalid",
        "configuration-invalid-new-reason",
        "configuration-valid-again",
        "degraded",
        "degraded-new-reason",
        "recovered",
        "progressing",
        "progressing-new-reason",
        "progressing-stopped",
        "ready",
        "scaled-to-zero",
        "not-ready",
        "unavailable",
    ],
)
def test_condition_transitions(
    old: dict[str, Any], new: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    assert summary(decide_events(old, new)) == expected


def test_notes_are_the_condition_messages() -> None:
    [decision] = decide_events(status(), status(Degraded=("True", "ReplicaFailure")))
    assert decision.note == "Degraded is ReplicaFailure."


@pytest.mark.parametrize(
    ("old", "upgrading", "expected"),
    [
        (
            ("False", "NoUpgrade"),
            ("True", "UpgradeInProgress"),
            ("Normal", "RuntimeUpgradeStarted"),
        ),
        (
            ("True", "UpgradeInProgress"),
            ("False", "UpgradeComplete"),
            ("Normal", "RuntimeUpgradeCompleted"),
        ),
        (
            ("True", "UpgradeInProgress"),
            ("False", "UpgradeFailed"),
            ("Warning", "RuntimeUpgradeFailed"),
        ),
    ],
    ids=["started", "completed", "failed"],
)
def test_upgrade_events_name_both_images(
    old: tuple[str, str], upgrading: tuple[str, str], expected: tuple[str, str]
) -> None:
    decisions = decide_events(
        status(A, B, Upgrading=old),
        status(B if "Complete" in upgrading[1] else A, B, Upgrading=upgrading),
    )
    [event] = [d for d in decisions if d.action == "UpgradeRuntime"]
    assert (event.type, event.reason) == expected
    assert A in event.note
    assert B in event.note


def test_no_upgrade_event_on_initial_provisioning() -> None:
    first = decide_events(None, status(A, A, Upgrading=("True", "UpgradeInProgress")))
    assert [d for d in first if d.action == "UpgradeRuntime"] == []
    initial = status("", A, Upgrading=("True", "UpgradeInProgress"))
    assert decide_events(status("", A), initial) == []


def test_no_upgrade_event_when_the_images_are_the_same() -> None:
    new = status(A, A, Upgrading=("False", "UpgradeComplete"))
    assert decide_events(status(A, A), new) == []


def test_no_upgrade_event_without_a_change_of_reason() -> None:
    running = status(A, B, Upgrading=("True", "UpgradeInProgress"))
    assert decide_events(running, running) == []


def test_reverting_an_upgrade_emits_no_upgrade_event() -> None:
    failed = status(A, B, Upgrading=("False", "UpgradeFailed"))
    assert decide_events(failed, status(A, A)) == []


def test_a_failed_reconcile_always_emits_a_warning_last() -> None:
    decisions = decide_events(status(), status(), failure="the server rejected the Deployment")
    assert summary(decisions) == [("Warning", "ReconciliationFailed", "ReconcileRuntime")]
    assert "the server rejected the Deployment" in decisions[0].note
    broken = status(
        Progressing=("False", "ReconciliationFailed"),
        Ready=("False", "ReconciliationFailed"),
        Degraded=("True", "ReconciliationFailed"),
    )
    assert summary(decide_events(status(), broken, failure="boom")) == [
        ("Warning", "RuntimeDegraded", "ObserveRuntime"),
        ("Warning", "ReconciliationFailed", "ReconcileRuntime"),
    ]


def test_first_status_of_a_new_runtime() -> None:
    new = status(
        "",
        A,
        Progressing=("True", "DeploymentProgressing"),
        Available=("False", "RuntimeUnavailable"),
        Ready=("False", "RuntimeNotReady"),
    )
    assert summary(decide_events(None, new)) == [
        ("Normal", "RuntimeProgressing", "ReconcileRuntime")
    ]


def test_events_follow_the_table_order() -> None:
    old = status(A, A, Ready=("True", "RuntimeReady"), Degraded=("True", "ReplicaFailure"))
    new = status(
        A,
        B,
        ConfigurationValid=("False", "SecretNotFound"),
        Progressing=("True", "DeploymentProgressing"),
        Upgrading=("True", "UpgradeInProgress"),
        Degraded=("True", "ConfigurationInvalid"),
    )
    assert [d.reason for d in decide_events(old, new, failure="x")] == [
        "ConfigurationInvalid",
        "RuntimeDegraded",
        "RuntimeProgressing",
        "RuntimeUpgradeStarted",
        "ReconciliationFailed",
    ]


def test_notes_fit_in_an_event() -> None:
    [decision] = decide_events(status(), status(), failure="é" * 2000)
    assert len(decision.note.encode()) <= 1024
    assert decision.note.endswith("...")
