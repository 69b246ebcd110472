"""Which Events a status write announces (docs/contract.md section 8).

Events are derived from the difference between the old and new status, so
an unchanged reconcile emits nothing and a flapping watch cannot spam.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from trussium_operator.common.conditions import (
    ConditionState,
    conditions_of,
    find_condition,
    state_of,
)
from trussium_operator.common.constants import (
    EVENT_NOTE_MAX_LENGTH,
    ConditionType,
    EventAction,
    EventReason,
    Reason,
)

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class EventDecision:
    type: EventType
    reason: str
    action: str
    note: str


Change = tuple[ConditionState | None, ConditionState]

_UPGRADE_EVENTS: dict[str, tuple[EventType, EventReason, str]] = {
    Reason.UPGRADE_IN_PROGRESS: ("Normal", EventReason.RUNTIME_UPGRADE_STARTED, "started"),
    Reason.UPGRADE_COMPLETE: ("Normal", EventReason.RUNTIME_UPGRADE_COMPLETED, "completed"),
    Reason.UPGRADE_FAILED: ("Warning", EventReason.RUNTIME_UPGRADE_FAILED, "failed"),
}


def _change(
    old_status: Mapping[str, Any] | None, new_status: Mapping[str, Any], type_: ConditionType
) -> Change | None:
    """A condition's old and new state when its status or reason changed, else None."""
    old = state_of(find_condition(conditions_of(old_status), type_))
    new = state_of(find_condition(conditions_of(new_status), type_))
    if new is None or (old is not None and (old.status, old.reason) == (new.status, new.reason)):
        return None
    return old, new


def _upgrade_event(
    old_status: Mapping[str, Any] | None, new_status: Mapping[str, Any], change: Change | None
) -> EventDecision | None:
    """Upgrade events name both images, so initial provisioning (no previous image) has none."""
    if change is None or change[1].reason not in _UPGRADE_EVENTS:
        return None
    previous = (old_status or {}).get("lastSuccessfulImage") or ""
    desired = new_status.get("desiredImage") or ""
    if not previous or not desired or previous == desired:
        return None
    type_, reason, verb = _UPGRADE_EVENTS[change[1].reason]
    note = f"The upgrade from {previous} to {desired} {verb}."
    if change[1].reason == Reason.UPGRADE_FAILED:
        note = f"{note[:-1]}: {change[1].message}"
    return EventDecision(type_, reason, EventAction.UPGRADE_RUNTIME, note)


def _entered(
    change: Change | None,
    status: str,
    type_: EventType,
    reason: str,
    action: str,
    note: str | None = None,
) -> list[EventDecision]:
    """The Event of a condition that turned `status`; its note is the condition's message
    unless one is given."""
    if change is None or change[1].status != status:
        return []
    return [EventDecision(type_, reason, action, change[1].message if note is None else note)]


def decide_events(
    old_status: Mapping[str, Any] | None,
    new_status: Mapping[str, Any],
    *,
    failure: str | None = None,
) -> list[EventDecision]:
    """The Events to emit, in the order of the contract's table.

    `failure` is the (Secret-free) description of a failed reconciliation.
    """

    def change(type_: ConditionType) -> Change | None:
        return _change(old_status, new_status, type_)

    degraded, ready = change(ConditionType.DEGRADED), change(ConditionType.READY)
    was_degraded = degraded is not None and degraded[0] is not None and degraded[0].status == "True"
    scaled_to_zero = ready is not None and ready[1].reason == Reason.SCALED_TO_ZERO
    observe, reconcile = EventAction.OBSERVE_RUNTIME, EventAction.RECONCILE_RUNTIME
    decisions = [
        *_entered(
            change(ConditionType.CONFIGURATION_VALID),
            "False",
            "Warning",
            EventReason.CONFIGURATION_INVALID,
            EventAction.VALIDATE_CONFIGURATION,
        ),
        *_entered(
            change(ConditionType.CONFIGURATION_WARNINGS),
            "True",
            "Warning",
            EventReason.ACCEPTED_WITH_WARNINGS,
            EventAction.VALIDATE_CONFIGURATION,
        ),
        *_entered(degraded, "True", "Warning", EventReason.RUNTIME_DEGRADED, observe),
        *_entered(
            degraded if was_degraded else None,
            "False",
            "Normal",
            EventReason.RUNTIME_RECOVERED,
            observe,
            note="The runtime is no longer degraded.",
        ),
        *_entered(
            change(ConditionType.PROGRESSING),
            "True",
            "Normal",
            EventReason.RUNTIME_PROGRESSING,
            reconcile,
        ),
        *_entered(
            ready,
            "True",
            "Normal",
            EventReason.RUNTIME_SCALED_TO_ZERO if scaled_to_zero else EventReason.RUNTIME_READY,
            observe,
        ),
    ]
    upgrade = _upgrade_event(old_status, new_status, change(ConditionType.UPGRADING))
    if upgrade is not None:
        decisions.append(upgrade)
    if failure is not None:
        decisions.append(
            EventDecision(
                "Warning",
                EventReason.RECONCILIATION_FAILED,
                reconcile,
                f"Reconciliation failed: {failure}",
            )
        )
    return [_serializable(decision) for decision in decisions]


def _serializable(decision: EventDecision) -> EventDecision:
    """Plain strings, and a note within the 1 kB events.k8s.io accepts.

    A cut note beats a lost event.
    """
    note = decision.note
    if len(note.encode()) > EVENT_NOTE_MAX_LENGTH:
        note = note.encode()[: EVENT_NOTE_MAX_LENGTH - 3].decode(errors="ignore") + "..."
    return EventDecision(decision.type, str(decision.reason), str(decision.action), note)
