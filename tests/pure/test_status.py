"""The status of docs/contract.md sections 3, 6 and 7, from what a reconcile observed."""

import copy
from typing import Any

import pytest

from tests.support.deployments import DEADLINE, IMAGE, QUOTA, deployment
from trussium_operator.common.api import TrussiumRuntime
from trussium_operator.common.status import Outcome, compute_status, status_differs

NEW_IMAGE = "ghcr.io/trussium/runtime:1.5.0"
T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:05:00Z"


def runtime(
    *, status: dict[str, Any] | None = None, tag: str = "1.4.0", **spec: Any
) -> TrussiumRuntime:
    return TrussiumRuntime.model_validate(
        {
            "metadata": {"name": "demo", "namespace": "prod", "uid": "u", "generation": 3},
            "spec": {
                "image": {"repository": "ghcr.io/trussium/runtime", "tag": tag},
                "provider": {"type": "openai", "model": "m"},
                **spec,
            },
            "status": status,
        }
    )


SUCCESS = Outcome()
SERVICE = {"metadata": {"name": "demo"}, "spec": {"ports": [{"name": "http", "port": 8080}]}}


def status(
    rt: TrussiumRuntime | None = None,
    observed: dict[str, Any] | None = None,
    outcome: Outcome = SUCCESS,
    *,
    service: dict[str, Any] | None = SERVICE,
    now: str = T1,
) -> dict[str, Any]:
    return compute_status(
        rt or runtime(), deployment=observed, service=service, outcome=outcome, now=now
    )


def conditions(result: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in result["conditions"]}


def condition(result: dict[str, Any], type_: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in result["conditions"] if c["type"] == type_)
    return found


MISSING = Outcome(missing_secrets=("openai-key",))
CHECK_FAILED = Outcome(reference_check_error="secrets is forbidden")
APPLY_FAILED = Outcome(reconcile_error="the server rejected the Deployment")
CONFLICT = Outcome(conflicts=('Service "demo" already exists and is not this runtime\'s.',))
HEALTHY = ("False", "AsExpected")
RESOLVED = ("True", "ReferencesResolved")


@pytest.mark.parametrize(
    ("rt", "observed", "outcome", "expected"),
    [
        (
            runtime(),
            deployment(1),
            MISSING,
            {
                "ConfigurationValid": ("False", "SecretNotFound"),
                "Progressing": ("False", "ConfigurationInvalid"),
                "Available": ("True", "RuntimeAvailable"),
                "Ready": ("False", "ConfigurationInvalid"),
                "Degraded": ("True", "ConfigurationInvalid"),
            },
        ),
        (
            runtime(replicas=0),
            None,
            MISSING,
            {
                "ConfigurationValid": ("False", "SecretNotFound"),
                "Progressing": ("False", "ConfigurationInvalid"),
                "Available": ("False", "ScaledToZero"),
                "Ready": ("False", "ConfigurationInvalid"),
                "Degraded": ("True", "ConfigurationInvalid"),
            },
        ),
        (
            runtime(),
            deployment(1, availableReplicas=0),
            CHECK_FAILED,
            {
                "ConfigurationValid": ("False", "ReferenceCheckFailed"),
                "Progressing": ("False", "ReconciliationFailed"),
                "Available": ("False", "RuntimeUnavailable"),
                "Ready": ("False", "ReconciliationFailed"),
                "Degraded": ("True", "ReconciliationFailed"),
            },
        ),
        (
            runtime(),
            deployment(2),
            APPLY_FAILED,
            {
                "ConfigurationValid": RESOLVED,
                "Progressing": ("False", "ReconciliationFailed"),
                "Available": ("True", "RuntimeAvailable"),
                "Ready": ("False", "ReconciliationFailed"),
                "Degraded": ("True", "ReconciliationFailed"),
            },
        ),
        (
            runtime(),
            deployment(2),
            CONFLICT,
            {
                "ConfigurationValid": RESOLVED,
                "Progressing": ("False", "ResourceConflict"),
                "Available": ("True", "RuntimeAvailable"),
                "Ready": ("False", "ResourceConflict"),
                "Degraded": ("True", "ResourceConflict"),
            },
        ),
        (
            runtime(),
            None,
            Outcome(),
            {
                "ConfigurationValid": RESOLVED,
                "Progressing": ("True", "DeploymentProgressing"),
                "Available": ("False", "RuntimeUnavailable"),
                "Ready": ("False", "RuntimeNotReady"),
                "Degraded": HEALTHY,
            },
        ),
        (
            runtime(replicas=0),
            deployment(0),
            Outcome(),
            {
                "ConfigurationValid": RESOLVED,
                "Progressing": ("False", "ScaledToZero"),
                "Available": ("False", "ScaledToZero"),
                "Ready": ("True", "ScaledToZero"),
                "Degraded": HEALTHY,
            },
        ),
        (
            runtime(replicas=0),
            deployment(0, readyReplicas=1, availableReplicas=1),
            Outcome(),
            {
                "ConfigurationValid": RESOLVED,
                "Progressing": ("True", "DeploymentGenerationPending"),
                "Available": ("False", "RuntimeUnavailable"),
                "Ready": ("False", "RuntimeNotReady"),
                "Degraded": HEALTHY,
            },
        ),
        (
            runtime(replicas=0),
            deployment(0, observed=4),
            Outcome(),
            {
                "ConfigurationValid": RESOLVED,
                "Progressing": ("True", "DeploymentGenerationPending"),
                "Available": ("False", "RuntimeUnavailable"),
                "Ready": ("False", "RuntimeNotReady"),
                "Degraded": HEALTHY,
            },
        ),
        (
            runtime(replicas=2),
            deployment(2, conditions=(DEADLINE, QUOTA)),
            Outcome(),
            {
                "ConfigurationValid": RESOLVED,
                "Progressing": ("False", "DeploymentFailed"),
                "Available": ("True", "RuntimeAvailable"),
                "Ready": ("False", "DeploymentFailed"),
                "Degraded": ("True", "ProgressDeadlineExceeded"),
            },
        ),
        (
            runtime(replicas=2),
            deployment(2, availableReplicas=0, conditions=(QUOTA,)),
            Outcome(),
            {
                "ConfigurationValid": RESOLVED,
                "Progressing": ("False", "DeploymentFailed"),
                "Available": ("False", "RuntimeUnavailable"),
                "Ready": ("False", "DeploymentFailed"),
                "Degraded": ("True", "ReplicaFailure"),
            },
        ),
        (
            runtime(replicas=2),
            deployment(2),
            Outcome(),
            {
                "ConfigurationValid": RESOLVED,
                "Progressing": ("False", "ReconciliationComplete"),
                "Available": ("True", "RuntimeAvailable"),
                "Ready": ("True", "RuntimeReady"),
                "Degraded": HEALTHY,
            },
        ),
        (
            runtime(replicas=2),
            deployment(2, observed=4),
            Outcome(),
            {
                "ConfigurationValid": RESOLVED,
                "Progressing": ("True", "DeploymentGenerationPending"),
                "Available": ("True", "RuntimeAvailable"),
                "Ready": ("False", "RuntimeNotReady"),
                "Degraded": HEALTHY,
            },
        ),
        (
            runtime(replicas=2),
            deployment(2, readyReplicas=1, availableReplicas=0),
            Outcome(),
            {
                "ConfigurationValid": RESOLVED,
                "Progressing": ("True", "DeploymentProgressing"),
                "Available": ("False", "RuntimeUnavailable"),
                "Ready": ("False", "RuntimeNotReady"),
                "Degraded": HEALTHY,
            },
        ),
    ],
    ids=[
        "secret-missing",
        "secret-missing-scaled-to-zero",
        "secret-check-failed",
        "apply-failed",
        "name-held-by-another-object",
        "no-deployment",
        "zero-scaled-down",
        "zero-pods-still-ready",
        "zero-not-observed",
        "failed-deadline-first",
        "failed-replica-failure",
        "ready",
        "generation-pending",
        "progressing",
    ],
)
def test_condition_table_first_match(
    rt: TrussiumRuntime,
    observed: dict[str, Any] | None,
    outcome: Outcome,
    expected: dict[str, tuple[str, str]],
) -> None:
    found = conditions(status(rt, observed, outcome))
    assert {type_: found[type_] for type_ in expected} == expected


def test_missing_secret_row_uses_spec_replicas_even_with_an_autoscaler() -> None:
    rt = runtime(replicas=0, autoscaling={"enabled": True}, resources={"requests": {"cpu": "1"}})
    assert conditions(status(rt, deployment(3), MISSING))["Available"] == ("False", "ScaledToZero")


def test_all_six_conditions_carry_the_generation() -> None:
    result = status(runtime(), deployment(1))
    assert [c["type"] for c in result["conditions"]] == [
        "ConfigurationValid",
        "Progressing",
        "Available",
        "Ready",
        "Degraded",
        "Upgrading",
    ]
    for found in result["conditions"]:
        assert found["observedGeneration"] == 3
        assert found["lastTransitionTime"] == T1
        assert found["message"].endswith(".")


def test_messages_are_plain_sentences_with_the_facts() -> None:
    result = status(runtime(replicas=3), deployment(3, readyReplicas=1))
    assert condition(result, "Ready")["message"] == "1 of 3 replicas are ready."
    failed = status(runtime(), deployment(1, conditions=(DEADLINE,)))
    assert condition(failed, "Progressing")["message"] == DEADLINE["message"]
    assert condition(failed, "Degraded")["message"] == DEADLINE["message"]
    missing = status(runtime(), None, Outcome(missing_secrets=("a-key", "registry")))
    message = condition(missing, "ConfigurationValid")["message"]
    assert '"a-key"' in message
    assert '"registry"' in message
    assert "prod" in message
    apply = status(runtime(), None, APPLY_FAILED)
    assert "the server rejected the Deployment" in condition(apply, "Degraded")["message"]


def test_unchecked_references_keep_the_contract_reason_and_say_they_were_not_checked() -> None:
    """An install without Secret rights (ADR 0028): the reason stays ReferencesResolved,
    so nothing built on the contract's strings breaks; the message tells the truth."""
    unchecked = Outcome(unchecked_secrets=("a-key", "registry"))
    result = status(runtime(), deployment(1, readyReplicas=1, availableReplicas=1), unchecked)
    valid = condition(result, "ConfigurationValid")
    assert (valid["status"], valid["reason"]) == ("True", "ReferencesResolved")
    assert "not checked" in valid["message"]
    assert '"a-key", "registry"' in valid["message"]
    assert condition(result, "Ready")["reason"] == "RuntimeReady"
    checked = condition(status(runtime(), None), "ConfigurationValid")
    assert checked["message"] == "All referenced Secrets exist."


def test_a_failure_without_a_message_still_explains_itself() -> None:
    silent = {key: value for key, value in QUOTA.items() if key != "message"}
    result = status(runtime(), deployment(1, conditions=(silent,)))
    assert "ReplicaFailure" in condition(result, "Ready")["message"]


def test_status_fields_come_from_the_observed_objects() -> None:
    rt = runtime(replicas=3, tag="1.5.0", status={"lastSuccessfulImage": IMAGE})
    result = status(rt, deployment(3, readyReplicas=2, availableReplicas=1))
    assert {key: value for key, value in result.items() if key != "conditions"} == {
        "observedGeneration": 3,
        "readyReplicas": 2,
        "availableReplicas": 1,
        "desiredReplicas": 3,
        "desiredImage": NEW_IMAGE,
        "currentImage": IMAGE,
        "lastSuccessfulImage": IMAGE,
        "endpoint": "http://demo.prod.svc.cluster.local:8080",
    }


def test_zero_and_empty_fields_are_omitted_as_the_go_operator_omits_them() -> None:
    result = status(runtime(), None, service=None)
    for field in ("readyReplicas", "availableReplicas", "currentImage", "endpoint"):
        assert field not in result
    assert "lastSuccessfulImage" not in result
    assert result["desiredImage"] == IMAGE
    assert result["desiredReplicas"] == 1, "not a count read back: the spec's, written"
    assert result["observedGeneration"] == runtime().metadata.generation


@pytest.mark.parametrize(
    ("containers", "image"),
    [
        ([{"name": "sidecar", "image": "proxy:1"}, {"name": "trussium", "image": IMAGE}], IMAGE),
        ([{"name": "other", "image": "x:1"}, {"name": "sidecar", "image": "y:1"}], "x:1"),
    ],
    ids=["named-container", "first-container"],
)
def test_current_image(containers: list[dict[str, str]], image: str) -> None:
    assert status(runtime(), deployment(1, containers=containers))["currentImage"] == image


def test_endpoint_falls_back_to_the_spec_port() -> None:
    service = {"metadata": {"name": "demo"}, "spec": {}}
    endpoint = status(runtime(service={"port": 9100}), None, service=service)["endpoint"]
    assert endpoint == "http://demo.prod.svc.cluster.local:9100"


def test_transition_time_is_kept_unless_the_status_flips() -> None:
    first = status(runtime(replicas=2), deployment(2, readyReplicas=1), now=T0)
    # Ready stays False with a new message; Progressing flips to False.
    rt = runtime(replicas=2, status=first)
    second = status(rt, deployment(2, readyReplicas=2, availableReplicas=1), now=T1)
    assert condition(second, "Ready")["message"] == "2 of 2 replicas are ready."
    assert condition(second, "Ready")["lastTransitionTime"] == T0
    third = status(runtime(replicas=2, status=second), deployment(2), now=T1)
    assert condition(third, "Ready")["lastTransitionTime"] == T1
    assert condition(third, "Degraded")["lastTransitionTime"] == T0


def test_reason_change_alone_keeps_the_transition_time() -> None:
    first = status(runtime(), None, MISSING, now=T0)
    second = status(runtime(status=first), None, CHECK_FAILED, now=T1)
    assert condition(second, "ConfigurationValid")["reason"] == "ReferenceCheckFailed"
    assert condition(second, "ConfigurationValid")["lastTransitionTime"] == T0


def test_scale_to_zero_is_a_complete_rollout() -> None:
    result = status(runtime(replicas=0), deployment(0))
    assert result["lastSuccessfulImage"] == IMAGE
    assert condition(result, "Ready")["status"] == "True"
    assert result["desiredReplicas"] == 0, "written, unlike the other zero counts"


def test_autoscaler_owns_the_replica_count() -> None:
    rt = runtime(
        replicas=1,
        autoscaling={"enabled": True, "minReplicas": 1, "maxReplicas": 8},
        resources={"requests": {"cpu": "100m"}},
    )
    result = status(rt, deployment(5))
    assert conditions(result)["Ready"] == ("True", "RuntimeReady")
    assert condition(result, "Ready")["message"] == "5 of 5 replicas are ready."
    assert result["desiredReplicas"] == 5
    assert result["lastSuccessfulImage"] == IMAGE


AUTOSCALED = {
    "replicas": 1,
    "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 8},
    "resources": {"requests": {"cpu": "100m"}},
}


@pytest.mark.parametrize(
    ("spec", "observed", "outcome", "desired"),
    [
        ({"replicas": 3}, deployment(3), SUCCESS, 3),
        ({"replicas": 3}, deployment(5), SUCCESS, 3),  # a hand scale the next apply undoes
        ({"replicas": 3}, None, SUCCESS, 3),
        ({"replicas": 0}, None, SUCCESS, 0),
        (AUTOSCALED, deployment(6, readyReplicas=4), SUCCESS, 6),
        (AUTOSCALED, None, SUCCESS, 2),  # before the Deployment: created at minReplicas
        (AUTOSCALED, deployment(6), MISSING, 6),
        (AUTOSCALED, deployment(6), CHECK_FAILED, 6),
        (AUTOSCALED, deployment(6), Outcome(reconcile_error="boom"), 6),
    ],
    ids=[
        "spec",
        "spec-over-a-hand-scale",
        "spec-without-deployment",
        "spec-zero",
        "autoscaler",
        "autoscaler-before-deployment",
        "autoscaler-missing-secret",
        "autoscaler-check-failed",
        "autoscaler-reconcile-failed",
    ],
)
def test_desired_replicas_is_the_count_the_conditions_are_judged_against(
    spec: dict[str, Any], observed: dict[str, Any] | None, outcome: Outcome, desired: int
) -> None:
    """status.desiredReplicas is D of docs/contract.md section 6, the count the Target
    column shows: the autoscaler's with autoscaling, whatever spec.replicas says."""
    result = status(runtime(**spec), observed, outcome)
    assert result["desiredReplicas"] == desired
    if outcome == SUCCESS and desired:
        assert condition(result, "Ready")["message"].endswith(f" of {desired} replicas are ready.")


def test_upgrade_path_end_to_end() -> None:
    """Initial rollout, upgrade in progress, upgrade complete, then a config-only rollout."""
    initial = status(runtime(), deployment(1), now=T0)
    assert initial["lastSuccessfulImage"] == IMAGE
    assert conditions(initial)["Upgrading"] == ("False", "NoUpgrade")

    upgrading = status(
        runtime(tag="1.5.0", status=initial), deployment(1, image=NEW_IMAGE, updatedReplicas=0)
    )
    assert conditions(upgrading)["Upgrading"] == ("True", "UpgradeInProgress")
    assert upgrading["lastSuccessfulImage"] == IMAGE

    done = status(runtime(tag="1.5.0", status=upgrading), deployment(1, image=NEW_IMAGE))
    assert conditions(done)["Upgrading"] == ("False", "UpgradeComplete")
    assert done["lastSuccessfulImage"] == NEW_IMAGE

    config_rollout = status(
        runtime(tag="1.5.0", status=done), deployment(1, image=NEW_IMAGE, observed=4)
    )
    assert condition(config_rollout, "Upgrading") == condition(done, "Upgrading")


def test_failed_upgrade_then_revert() -> None:
    before = status(runtime(), deployment(1), now=T0)
    failed = status(
        runtime(tag="1.5.0", status=before),
        deployment(1, image=NEW_IMAGE, conditions=(DEADLINE,)),
    )
    assert conditions(failed)["Upgrading"] == ("False", "UpgradeFailed")
    assert conditions(failed)["Degraded"] == ("True", "ProgressDeadlineExceeded")
    assert failed["lastSuccessfulImage"] == IMAGE
    reverted = status(runtime(status=failed), deployment(1, image=IMAGE, observed=4))
    assert conditions(reverted)["Upgrading"] == ("False", "NoUpgrade")
    assert NEW_IMAGE in condition(reverted, "Upgrading")["message"]


def test_an_unchanged_reconcile_produces_no_difference() -> None:
    first = status(runtime(replicas=2), deployment(2), now=T0)
    second = status(runtime(replicas=2, status=first), deployment(2), now=T1)
    assert second == first
    assert not status_differs(first, second)


def test_status_differs_ignores_condition_order_and_transition_times() -> None:
    new = status(runtime(), deployment(1), now=T1)
    old = copy.deepcopy(new)
    old["conditions"].reverse()
    for found in old["conditions"]:
        found["lastTransitionTime"] = T0
    assert not status_differs(old, new)


def edited(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    result = copy.deepcopy(base)
    result.update(changes)
    return result


BASE = status(runtime(), deployment(1))


@pytest.mark.parametrize(
    "old",
    [
        None,
        {},
        edited(BASE, readyReplicas=0),
        edited(BASE, desiredReplicas=2),
        edited(BASE, observedGeneration=2),
        edited(BASE, endpoint=""),
        edited(BASE, lastSuccessfulImage=""),
        edited(BASE, conditions=BASE["conditions"][:-1]),
        edited(
            BASE,
            conditions=[{**BASE["conditions"][0], "message": "stale"}, *BASE["conditions"][1:]],
        ),
        edited(
            BASE,
            conditions=[
                {**BASE["conditions"][0], "observedGeneration": 2},
                *BASE["conditions"][1:],
            ],
        ),
        edited(
            BASE, conditions=[{**BASE["conditions"][0], "status": "False"}, *BASE["conditions"][1:]]
        ),
    ],
    ids=[
        "no-status",
        "empty-status",
        "replicas",
        "desired-replicas",
        "observed-generation",
        "endpoint",
        "last-successful-image",
        "missing-condition",
        "message",
        "condition-generation",
        "condition-status",
    ],
)
def test_status_differs_on_any_visible_change(old: dict[str, Any] | None) -> None:
    assert status_differs(old, BASE)


def test_status_differs_treats_absent_fields_as_their_defaults() -> None:
    new = status(runtime(), None, service=None)
    old = {key: value for key, value in new.items() if value not in ("", 0)}
    assert not status_differs(old, new)


def test_a_status_without_desired_replicas_is_written_once() -> None:
    """A status the Go operator or an older release wrote lacks the field: one write adds
    it (at 0 too, where the other zero counts stay absent), then nothing changes."""
    new = status(runtime(replicas=0), deployment(0))
    old = {key: value for key, value in new.items() if key != "desiredReplicas"}
    assert status_differs(old, new)
    again = status(runtime(replicas=0, status=new), deployment(0))
    assert again == new
    assert not status_differs(new, again)
