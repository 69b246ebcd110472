"""The upgrade lifecycle (docs/contract.md section 6).

Everything is derived from the managed Deployment's own status and the
desired image, so the operator needs no access to Pods or ReplicaSets (the
Go operator's ADR 0007,
https://github.com/trussiumhq/trussium-operator/blob/main/docs/adr/0007-observe-upgrades-through-deployment-status.md).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trussium_operator.common.api import TrussiumRuntimeSpec
from trussium_operator.common.conditions import ConditionState, conditions_of, find_condition
from trussium_operator.common.constants import ConditionType, Reason


class RolloutPhase(StrEnum):
    PROGRESSING = "Progressing"
    COMPLETE = "Complete"
    FAILED = "Failed"


@dataclass(frozen=True)
class Rollout:
    phase: RolloutPhase
    failure_reason: str = ""
    """`ProgressDeadlineExceeded` or `ReplicaFailure` when failed."""
    failure_message: str = ""
    """The Deployment condition's own message, when it has one."""


@dataclass(frozen=True)
class Upgrade:
    last_successful_image: str
    condition: ConditionState


def status_count(deployment: Mapping[str, Any] | None, field: str) -> int:
    """An integer of the Deployment's status (a replica count, observedGeneration); 0 if absent."""
    value = ((deployment or {}).get("status") or {}).get(field)
    return value if isinstance(value, int) else 0


def desired_replicas(spec: TrussiumRuntimeSpec, deployment: Mapping[str, Any] | None) -> int:
    """D: the autoscaler owns the live count when enabled, else the spec does."""
    autoscaling = spec.enabled_autoscaling
    if autoscaling is not None:
        live = ((deployment or {}).get("spec") or {}).get("replicas")
        return live if isinstance(live, int) else autoscaling.min_replicas
    return spec.replicas


def generation_observed(deployment: Mapping[str, Any]) -> bool:
    """Whether the Deployment controller has seen the Deployment's latest spec."""
    generation = (deployment.get("metadata") or {}).get("generation")
    observed = status_count(deployment, "observedGeneration")
    return not isinstance(generation, int) or observed >= generation


def _failure(deployment: Mapping[str, Any]) -> Rollout | None:
    conditions = conditions_of(deployment.get("status"))
    progressing = find_condition(conditions, "Progressing")
    if (
        progressing is not None
        and progressing.get("status") == "False"
        and progressing.get("reason") == Reason.PROGRESS_DEADLINE_EXCEEDED
    ):
        return Rollout(
            RolloutPhase.FAILED, Reason.PROGRESS_DEADLINE_EXCEEDED, progressing.get("message", "")
        )
    replica_failure = find_condition(conditions, "ReplicaFailure")
    if replica_failure is not None and replica_failure.get("status") == "True":
        return Rollout(
            RolloutPhase.FAILED, Reason.REPLICA_FAILURE, replica_failure.get("message", "")
        )
    return None


def rollout_of(deployment: Mapping[str, Any] | None, desired: int) -> Rollout:
    """The rollout state of the managed Deployment for D = `desired` replicas."""
    if deployment is not None and (failure := _failure(deployment)) is not None:
        return failure
    if deployment is None or not generation_observed(deployment):
        return Rollout(RolloutPhase.PROGRESSING)
    fields = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
    counts = [status_count(deployment, field) for field in fields]
    if all(c == desired for c in counts) and status_count(deployment, "unavailableReplicas") == 0:
        return Rollout(RolloutPhase.COMPLETE)
    return Rollout(RolloutPhase.PROGRESSING)


def upgrade_of(
    previous_status: Mapping[str, Any] | None,
    *,
    desired_image: str,
    current_image: str,
    rollout: Rollout,
) -> Upgrade:
    """The `Upgrading` condition and `lastSuccessfulImage` after this observation.

    Only a change of image away from the last successful one is an upgrade;
    a failed upgrade never moves `lastSuccessfulImage` and nothing is rolled
    back automatically.
    """
    last = (previous_status or {}).get("lastSuccessfulImage") or ""
    landed = rollout.phase is RolloutPhase.COMPLETE and current_image == desired_image
    if not last:  # initial provisioning is never an upgrade
        return Upgrade(
            desired_image if landed else "",
            ConditionState("False", Reason.NO_UPGRADE, "No image upgrade has been requested."),
        )
    if desired_image == last:
        return Upgrade(last, _settled(previous_status, last))
    if rollout.phase is RolloutPhase.FAILED:
        detail = rollout.failure_message or rollout.failure_reason
        return Upgrade(
            last,
            ConditionState(
                "False",
                Reason.UPGRADE_FAILED,
                f"The upgrade from {last} to {desired_image} failed: {detail}",
            ),
        )
    if landed:
        return Upgrade(
            desired_image,
            ConditionState(
                "False",
                Reason.UPGRADE_COMPLETE,
                f"The upgrade from {last} to {desired_image} completed.",
            ),
        )
    return Upgrade(
        last,
        ConditionState(
            "True", Reason.UPGRADE_IN_PROGRESS, f"Upgrading from {last} to {desired_image}."
        ),
    )


def _settled(previous_status: Mapping[str, Any] | None, last: str) -> ConditionState:
    """`Upgrading` while the spec asks for the last successful image."""
    previous = find_condition(conditions_of(previous_status), ConditionType.UPGRADING)
    reason = (previous or {}).get("reason")
    if previous is not None and reason in (Reason.UPGRADE_COMPLETE, Reason.NO_UPGRADE):
        return ConditionState(previous.get("status", "False"), reason, previous.get("message", ""))
    if reason in (Reason.UPGRADE_IN_PROGRESS, Reason.UPGRADE_FAILED):
        abandoned = (previous_status or {}).get("desiredImage") or "another image"
        return ConditionState(
            "False",
            Reason.NO_UPGRADE,
            f"The upgrade to {abandoned} was abandoned: the spec was reverted to the last "
            f"successful image {last}.",
        )
    return ConditionState(
        "False", Reason.NO_UPGRADE, f"The desired image is the last successful image {last}."
    )
