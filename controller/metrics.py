"""The Trussium layer's metrics: the names its controller and queue carry in the
generic series (`controller.machinery.metrics`), and its own series."""

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import REGISTRY, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

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
