"""The per-runtime series (`common.runtime_metrics`), collected from the runtime cache
at scrape time: never stale, and gone with the runtime, with nothing to delete.

Only the leader exports them (every replica's cache holds the same statuses), so
a runtime has one series set however many replicas run; queries aggregate by
runtime, which keeps a series continuous across a change of leader.
"""

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from trussium_operator.common.runtime_metrics import FAMILIES, runtime_samples


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
