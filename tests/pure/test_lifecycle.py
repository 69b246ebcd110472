"""The rollout state and the upgrade lifecycle of docs/contract.md section 6."""

from typing import Any

import pytest

from tests.support.deployments import DEADLINE, IMAGE, QUOTA, deployment
from trussium_operator.common.api import TrussiumRuntimeSpec
from trussium_operator.common.conditions import ConditionState
from trussium_operator.common.lifecycle import (
    Rollout,
    RolloutPhase,
    desired_replicas,
    rollout_of,
    upgrade_of,
)

OLD = IMAGE
NEW = "ghcr.io/trussium/runtime:1.5.0"
COMPLETE = Rollout(RolloutPhase.COMPLETE)
PROGRESSING = Rollout(RolloutPhase.PROGRESSING)


@pytest.mark.parametrize(
    ("observed", "desired", "rollout"),
    [
        (None, 1, PROGRESSING),
        (deployment(3), 3, COMPLETE),
        (deployment(3, observed=1), 3, PROGRESSING),
        (deployment(3, updatedReplicas=2), 3, PROGRESSING),
        (deployment(3, readyReplicas=2), 3, PROGRESSING),
        (deployment(3, availableReplicas=2), 3, PROGRESSING),
        (deployment(3, unavailableReplicas=1), 3, PROGRESSING),
        (deployment(3, replicas=4), 3, PROGRESSING),  # surge pod still there
        (deployment(0), 0, COMPLETE),
        ({"metadata": {"generation": 1}, "status": {"observedGeneration": 1}}, 0, COMPLETE),
        (deployment(0, replicas=1), 0, PROGRESSING),
        (deployment(0, unavailableReplicas=1), 0, PROGRESSING),
        (deployment(0, observed=1), 0, PROGRESSING),
        (
            deployment(3, conditions=(DEADLINE,)),
            3,
            Rollout(RolloutPhase.FAILED, "ProgressDeadlineExceeded", DEADLINE["message"]),
        ),
        (
            deployment(3, conditions=(QUOTA,)),
            3,
            Rollout(RolloutPhase.FAILED, "ReplicaFailure", QUOTA["message"]),
        ),
        (
            deployment(3, conditions=(QUOTA, DEADLINE)),
            3,
            Rollout(RolloutPhase.FAILED, "ProgressDeadlineExceeded", DEADLINE["message"]),
        ),
        (
            deployment(1, observed=1, conditions=(DEADLINE,)),
            1,
            Rollout(RolloutPhase.FAILED, "ProgressDeadlineExceeded", DEADLINE["message"]),
        ),
        (deployment(3, conditions=({**QUOTA, "status": "False"},)), 3, COMPLETE),
        (
            deployment(3, conditions=({**DEADLINE, "reason": "NewReplicaSetAvailable"},)),
            3,
            COMPLETE,
        ),
    ],
    ids=[
        "no-deployment",
        "complete",
        "generation-not-observed",
        "not-all-updated",
        "not-all-ready",
        "not-all-available",
        "some-unavailable",
        "extra-replicas",
        "zero-complete",
        "zero-counts-absent",
        "zero-pod-left",
        "zero-unavailable-left",
        "zero-generation-not-observed",
        "deadline-exceeded",
        "replica-failure",
        "deadline-before-replica-failure",
        "failure-even-before-observed",
        "replica-failure-false",
        "progressing-false-other-reason",
    ],
)
def test_rollout_state(observed: dict[str, Any] | None, desired: int, rollout: Rollout) -> None:
    assert rollout_of(observed, desired) == rollout


def spec(**fields: Any) -> TrussiumRuntimeSpec:
    return TrussiumRuntimeSpec.model_validate(
        {"image": {"repository": "r", "tag": "1"}, "provider": {"type": "openai", "model": "m"}}
        | fields
    )


@pytest.mark.parametrize(
    ("fields", "live", "desired"),
    [
        ({}, None, 1),
        ({"replicas": 4}, {"spec": {"replicas": 9}}, 4),
        ({"replicas": 0}, None, 0),
        ({"autoscaling": {"enabled": True, "minReplicas": 2}}, None, 2),
        ({"autoscaling": {"enabled": True, "minReplicas": 2}}, {"spec": {"replicas": 6}}, 6),
        ({"autoscaling": {"enabled": False}, "replicas": 3}, {"spec": {"replicas": 6}}, 3),
    ],
)
def test_desired_replicas(
    fields: dict[str, Any], live: dict[str, Any] | None, desired: int
) -> None:
    assert desired_replicas(spec(**fields), live) == desired


def upgrading(reason: str, message: str = "", status: str = "False") -> dict[str, Any]:
    return {
        "type": "Upgrading",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def previous(last: str, desired: str = "", *conditions: dict[str, Any]) -> dict[str, Any]:
    return {"lastSuccessfulImage": last, "desiredImage": desired, "conditions": list(conditions)}


FAILED = Rollout(RolloutPhase.FAILED, "ProgressDeadlineExceeded", "timed out progressing")


def test_initial_rollout_in_progress_is_not_an_upgrade() -> None:
    upgrade = upgrade_of(None, desired_image=NEW, current_image=NEW, rollout=PROGRESSING)
    assert upgrade.last_successful_image == ""
    assert (upgrade.condition.status, upgrade.condition.reason) == ("False", "NoUpgrade")


def test_initial_rollout_that_completes_records_the_image() -> None:
    upgrade = upgrade_of(previous(""), desired_image=NEW, current_image=NEW, rollout=COMPLETE)
    assert upgrade.last_successful_image == NEW
    assert upgrade.condition.reason == "NoUpgrade"


def test_initial_rollout_complete_on_a_stale_template_records_nothing() -> None:
    upgrade = upgrade_of(previous(""), desired_image=NEW, current_image=OLD, rollout=COMPLETE)
    assert upgrade.last_successful_image == ""


def test_initial_rollout_that_fails_is_still_not_an_upgrade() -> None:
    upgrade = upgrade_of(previous(""), desired_image=NEW, current_image=NEW, rollout=FAILED)
    assert upgrade.last_successful_image == ""
    assert upgrade.condition.reason == "NoUpgrade"


@pytest.mark.parametrize(
    ("current", "rollout"),
    [(OLD, PROGRESSING), (NEW, PROGRESSING), (OLD, COMPLETE)],
    ids=["template-not-updated", "rolling", "old-pods-complete"],
)
def test_upgrade_in_progress(current: str, rollout: Rollout) -> None:
    upgrade = upgrade_of(
        previous(OLD, OLD), desired_image=NEW, current_image=current, rollout=rollout
    )
    assert upgrade.last_successful_image == OLD
    assert upgrade.condition == ConditionState(
        "True", "UpgradeInProgress", f"Upgrading from {OLD} to {NEW}."
    )


def test_upgrade_complete_moves_the_last_successful_image() -> None:
    upgrade = upgrade_of(
        previous(OLD, NEW, upgrading("UpgradeInProgress", status="True")),
        desired_image=NEW,
        current_image=NEW,
        rollout=COMPLETE,
    )
    assert upgrade.last_successful_image == NEW
    assert upgrade.condition == ConditionState(
        "False", "UpgradeComplete", f"The upgrade from {OLD} to {NEW} completed."
    )


@pytest.mark.parametrize(
    "rollout",
    [FAILED, Rollout(RolloutPhase.FAILED, "ReplicaFailure", "exceeded quota")],
    ids=["deadline", "replica-failure"],
)
def test_failed_upgrade_keeps_the_last_successful_image(rollout: Rollout) -> None:
    upgrade = upgrade_of(previous(OLD, NEW), desired_image=NEW, current_image=NEW, rollout=rollout)
    assert upgrade.last_successful_image == OLD
    assert upgrade.condition.status == "False"
    assert upgrade.condition.reason == "UpgradeFailed"
    assert OLD in upgrade.condition.message
    assert NEW in upgrade.condition.message
    assert rollout.failure_message in upgrade.condition.message


def test_upgrade_complete_is_kept_afterwards_even_through_config_rollouts() -> None:
    done = upgrading("UpgradeComplete", f"The upgrade from {OLD} to {NEW} completed.")
    for rollout in (COMPLETE, PROGRESSING):
        upgrade = upgrade_of(
            previous(NEW, NEW, done), desired_image=NEW, current_image=NEW, rollout=rollout
        )
        assert upgrade.last_successful_image == NEW
        assert upgrade.condition == ConditionState("False", "UpgradeComplete", done["message"])


@pytest.mark.parametrize("prior", [None, upgrading("NoUpgrade", "Initial provisioning.")])
def test_configuration_only_rollout_is_not_an_upgrade(prior: dict[str, Any] | None) -> None:
    conditions = () if prior is None else (prior,)
    upgrade = upgrade_of(
        previous(OLD, OLD, *conditions), desired_image=OLD, current_image=OLD, rollout=PROGRESSING
    )
    assert upgrade.last_successful_image == OLD
    assert (upgrade.condition.status, upgrade.condition.reason) == ("False", "NoUpgrade")
    if prior is not None:
        assert upgrade.condition.message == prior["message"]


@pytest.mark.parametrize(
    ("prior", "rollout"),
    [
        (upgrading("UpgradeInProgress", status="True"), PROGRESSING),
        (upgrading("UpgradeFailed"), FAILED),
    ],
    ids=["during-upgrade", "after-failure"],
)
def test_reverting_to_the_last_successful_image_names_the_abandoned_one(
    prior: dict[str, Any], rollout: Rollout
) -> None:
    upgrade = upgrade_of(
        previous(OLD, NEW, prior), desired_image=OLD, current_image=NEW, rollout=rollout
    )
    assert upgrade.last_successful_image == OLD
    assert (upgrade.condition.status, upgrade.condition.reason) == ("False", "NoUpgrade")
    assert NEW in upgrade.condition.message
    assert OLD in upgrade.condition.message


def test_digest_images_are_identities() -> None:
    a = "ghcr.io/trussium/runtime@sha256:" + "a" * 64
    b = "ghcr.io/trussium/runtime@sha256:" + "b" * 64
    upgrade = upgrade_of(previous(a, a), desired_image=b, current_image=b, rollout=PROGRESSING)
    assert upgrade.condition.reason == "UpgradeInProgress"
    upgrade = upgrade_of(previous(a, b), desired_image=b, current_image=b, rollout=COMPLETE)
    assert (upgrade.last_successful_image, upgrade.condition.reason) == (b, "UpgradeComplete")


def test_moving_a_tag_to_its_digest_is_an_upgrade() -> None:
    digest = "ghcr.io/trussium/runtime@sha256:" + "a" * 64
    upgrade = upgrade_of(previous(OLD), desired_image=digest, current_image=OLD, rollout=COMPLETE)
    assert upgrade.condition.reason == "UpgradeInProgress"
