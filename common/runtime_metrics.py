"""The per-runtime metric samples, read from a runtime's status (docs/operations.md).

One fixed set of series per runtime, whatever its status says: the Ready
condition as 0/1, the replica counts, one 0/1 series per upgrade state (the
`Upgrading` condition's reason), and an `_info` series whose labels carry the
desired and current images. A runtime's series therefore change only when
its images do, and disappear with it. The runtime is named by
`runtime_namespace` and `runtime_name`, not `namespace` and `name`: those
are the target labels Prometheus attaches to every scraped series, and a
clash would rename ours to `exported_namespace` (or drop theirs under
`honor_labels`).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trussium_operator.common.conditions import conditions_of, find_condition
from trussium_operator.common.constants import ConditionType, Reason

RUNTIME_LABELS = ("runtime_namespace", "runtime_name")
# The Upgrading condition's reasons (docs/contract.md section 6), one series each.
UPGRADE_STATES = (
    Reason.NO_UPGRADE,
    Reason.UPGRADE_IN_PROGRESS,
    Reason.UPGRADE_COMPLETE,
    Reason.UPGRADE_FAILED,
)


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    labels: tuple[str, ...]


READY = Family(
    "trussium_runtime_ready",
    "1 while the runtime's Ready condition is True, else 0.",
    RUNTIME_LABELS,
)
READY_REPLICAS = Family(
    "trussium_runtime_ready_replicas", "status.readyReplicas of the runtime.", RUNTIME_LABELS
)
AVAILABLE_REPLICAS = Family(
    "trussium_runtime_available_replicas",
    "status.availableReplicas of the runtime.",
    RUNTIME_LABELS,
)
UPGRADE_STATE = Family(
    "trussium_runtime_upgrade_state",
    "1 for the runtime's upgrade state (the Upgrading condition's reason), 0 for the others.",
    (*RUNTIME_LABELS, "state"),
)
INFO = Family(
    "trussium_runtime_info",
    "Always 1; the labels carry the runtime's desired and current image (status).",
    (*RUNTIME_LABELS, "desired_image", "current_image"),
)
FAMILIES = (READY, READY_REPLICAS, AVAILABLE_REPLICAS, UPGRADE_STATE, INFO)
# Series per runtime: one for each family, one per state for the upgrade state.
SERIES_PER_RUNTIME = len(FAMILIES) - 1 + len(UPGRADE_STATES)


@dataclass(frozen=True)
class Sample:
    family: Family
    labels: tuple[str, ...]
    value: float


def _count(status: Mapping[str, Any], field: str) -> int:
    value = status.get(field)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(status: Mapping[str, Any], field: str) -> str:
    value = status.get(field)
    return value if isinstance(value, str) else ""


def runtime_samples(namespace: str, name: str, status: Mapping[str, Any] | None) -> list[Sample]:
    """The SERIES_PER_RUNTIME samples of one runtime, from its (possibly absent) status."""
    status = status if isinstance(status, Mapping) else {}
    conditions = conditions_of(status)
    ready = find_condition(conditions, ConditionType.READY)
    upgrading = find_condition(conditions, ConditionType.UPGRADING)
    state = (upgrading or {}).get("reason")
    runtime = (namespace, name)
    return [
        Sample(READY, runtime, 1.0 if ready and ready.get("status") == "True" else 0.0),
        Sample(READY_REPLICAS, runtime, _count(status, "readyReplicas")),
        Sample(AVAILABLE_REPLICAS, runtime, _count(status, "availableReplicas")),
        *(
            Sample(UPGRADE_STATE, (*runtime, str(s)), 1.0 if state == s else 0.0)
            for s in UPGRADE_STATES
        ),
        Sample(
            INFO,
            (*runtime, _text(status, "desiredImage"), _text(status, "currentImage")),
            1.0,
        ),
    ]
