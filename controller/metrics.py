"""Every series the controller exports, in one place: the names its controller and
queue carry in the generic series (`controller.machinery.metrics`), the Go
operator's Lease gauges, the connection limits, `trussium_runtimes`, and the
per-runtime series (docs/operations.md).

The per-runtime series are one fixed set per runtime, whatever its status says:
the Ready condition as 0/1, the replica counts, one 0/1 series per upgrade state
(the `Upgrading` condition's reason), and an `_info` series whose labels carry the
desired and current images; so they change only when the images do, and
disappear with the runtime. The runtime is named by `runtime_namespace` and
`runtime_name`, not `namespace` and `name`: those are the target labels
Prometheus attaches to every scraped series, and a clash would rename ours to
`exported_namespace` (or drop theirs under `honor_labels`). They are collected
from the runtime cache at scrape time, never stale, and only the leader exports
them (every replica's cache holds the same statuses), so a runtime has one
series set however many replicas run.
"""

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from trussium_operator.common.conditions import conditions_of, find_condition
from trussium_operator.common.constants import ConditionType, Reason
from trussium_operator.serving.listener import ConnectionMetrics

CONTROLLER = "trussiumruntime"
QUEUE = "trussiumruntime"

FOREIGN_LEASE_HELD = Gauge(
    "trussium_foreign_lease_held",
    "1 while reconciling waits for this leader Lease of another operator (the Go "
    "operator's) to expire or be released, 0 once it has; one series per Lease found.",
    ["lease"],
)
FOREIGN_LEASE_UNREADABLE = Gauge(
    "trussium_foreign_lease_unreadable",
    "1 while the last attempt to list the Go operator's leader Lease failed (reconciling "
    "stays as it was: stopped at start), else 0.",
)

# What the connection limits of the probe and metrics listeners did.
CONNECTIONS = ConnectionMetrics("trussium_controller", REGISTRY)


class RuntimesByReady(Collector):
    """`trussium_runtimes{ready}`: counted from the cache at scrape time, never stale."""

    def __init__(self, ready_statuses: Callable[[], Iterable[str]]) -> None:
        self._ready_statuses = ready_statuses

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = {"True": 0, "False": 0, "Unknown": 0}
        for status in self._ready_statuses():
            counts[status if status in counts else "Unknown"] += 1
        family = GaugeMetricFamily(
            "trussium_runtimes", "TrussiumRuntimes by Ready condition status.", labels=["ready"]
        )
        for status, count in counts.items():
            family.add_metric([status], count)
        yield family


def register_runtime_gauge(ready_statuses: Callable[[], Iterable[str]]) -> Collector:
    collector = RuntimesByReady(ready_statuses)
    REGISTRY.register(collector)
    return collector


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


class RuntimeMetrics(Collector):
    def __init__(
        self, runtimes: Callable[[], Iterable[dict[str, Any]]], exporting: Callable[[], bool]
    ) -> None:
        self._runtimes = runtimes
        self._exporting = exporting

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = {f: GaugeMetricFamily(f.name, f.help, labels=f.labels) for f in FAMILIES}
        if self._exporting():
            for runtime in self._runtimes():
                meta = runtime["metadata"]
                for sample in runtime_samples(
                    meta["namespace"], meta["name"], runtime.get("status")
                ):
                    families[sample.family].add_metric(sample.labels, sample.value)
        yield from families.values()


def register_runtime_metrics(
    runtimes: Callable[[], Iterable[dict[str, Any]]], exporting: Callable[[], bool]
) -> Collector:
    collector = RuntimeMetrics(runtimes, exporting)
    REGISTRY.register(collector)
    return collector
