"""metav1.Condition helpers: the transition-time rule of docs/contract.md section 3.

`lastTransitionTime` tells users when a condition last flipped; keeping it
when only the reason or message changed is what makes it trustworthy.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

ConditionStatus = Literal["True", "False"]


@dataclass(frozen=True)
class ConditionState:
    """What a condition says, before generation and transition time are attached."""

    status: ConditionStatus
    reason: str
    message: str


def find_condition(conditions: Iterable[Mapping[str, Any]], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def conditions_of(status: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The conditions of a (possibly absent or partial) status dict."""
    conditions = (status or {}).get("conditions") or []
    return [c for c in conditions if isinstance(c, Mapping)]


def state_of(condition: Mapping[str, Any] | None) -> ConditionState | None:
    if condition is None:
        return None
    return ConditionState(
        status=condition.get("status", ""),
        reason=condition.get("reason", ""),
        message=condition.get("message", ""),
    )


def build_condition(
    type_: str,
    state: ConditionState,
    *,
    previous: Mapping[str, Any] | None,
    generation: int,
    now: str,
) -> dict[str, Any]:
    """A full condition (plain strings, ready to serialize).

    The previous transition time survives unless the status flipped.
    """
    unchanged = previous is not None and previous.get("status") == state.status
    transition = previous.get("lastTransitionTime") if unchanged and previous else None
    return {
        "type": str(type_),
        "status": state.status,
        "reason": str(state.reason),
        "message": state.message,
        "observedGeneration": generation,
        "lastTransitionTime": transition or now,
    }
