"""The series both programs register, with the label names each carries: read from
the metric objects themselves (a labelled metric has no sample until first used),
and from the samples of the collectors computed at scrape time."""

from collections.abc import Iterable

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

import trussium_operator.controller.machinery.metrics
import trussium_operator.controller.metrics
from trussium_operator.common.constants import RUNTIME_TARGET_LABELS
from trussium_operator.controller.metrics import RuntimeMetrics
from trussium_operator.webhook.metrics import WebhookMetrics

SUFFIXES = {
    "counter": (("_total", ()),),
    "histogram": (("_bucket", ("le",)), ("_sum", ()), ("_count", ())),
    "gauge": (("", ()),),
}
RUNTIME = {
    "metadata": {"namespace": "ns", "name": "rt"},
    "status": {"conditions": [{"type": "Upgrading", "status": "False", "reason": "NoUpgrade"}]},
}


def _collectors(registry: CollectorRegistry) -> Iterable[Collector]:
    # The registry has no public listing of its collectors.
    return list(registry._collector_to_names)


def series_labels(registry: CollectorRegistry) -> dict[str, frozenset[str]]:
    """Exposed series name -> the label names its samples carry."""
    found: dict[str, frozenset[str]] = {}
    for collector in _collectors(registry):
        if isinstance(collector, MetricWrapperBase):
            labels = frozenset(collector._labelnames)
            for family in collector.describe():
                for suffix, extra in SUFFIXES[family.type]:
                    found[family.name + suffix] = labels | frozenset(extra)
            continue
        for family in collector.collect():
            for sample in family.samples:
                found[sample.name] = found.get(sample.name, frozenset()) | frozenset(sample.labels)
    return found


def registered_series() -> dict[str, frozenset[str]]:
    """Both programs' series: the controller's process-wide registry with its scrape-time
    collectors (the aggregate gauge and the per-runtime series, given one runtime),
    and the webhook's own registry."""
    scrape_time = CollectorRegistry()
    scrape_time.register(trussium_operator.controller.metrics.RuntimesByReady(lambda: ["True"]))
    scrape_time.register(RuntimeMetrics(lambda: [RUNTIME], lambda: True))
    return (
        series_labels(REGISTRY)
        | series_labels(scrape_time)
        | series_labels(WebhookMetrics().registry)
    )


def runtime_series() -> dict[str, frozenset[str]]:
    """The runtime's request series (as the stand-in exports them, hack/image/README.md)
    with the target labels its PodMonitor adds: what the chart's runtime traffic
    panels and alerts may read."""
    targets = frozenset(RUNTIME_TARGET_LABELS)
    duration = frozenset({"method", "outcome"}) | targets
    return {
        "trussium_http_requests_active": targets,
        "trussium_http_requests_total": frozenset({"method", "outcome", "status_code"}) | targets,
        "trussium_http_request_duration_seconds_bucket": duration | {"le"},
        "trussium_http_request_duration_seconds_sum": duration,
        "trussium_http_request_duration_seconds_count": duration,
    }
