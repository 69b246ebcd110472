"""Prometheus metrics of the webhook, in their own registry.

The request metrics carry controller-runtime's names and labels
(`controller_runtime_webhook_*`, `webhook` = the hook's path, `code` = the
HTTP status), so dashboards and alerts written for Go webhooks work
unchanged; they are recorded by a middleware around every hook, errors
included. `trussium_webhook_requests_total` adds the admission verdict,
which the status code cannot show (a denial is a 200).

A registry per server (not the process-global one) keeps tests and several
servers in one process independent; it carries the process metrics too.
The labelled series a request touches are looked up once each and kept
(`labels()` takes a lock and builds its key every time: half of what
recording a request cost); their labels come from the registered hooks and
a few values, so what is kept stays small.
"""

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar, cast

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.metrics import MetricWrapperBase

from trussium_operator.serving.listener import ConnectionMetrics

_Metric = TypeVar("_Metric", bound=MetricWrapperBase)
# Admission budgets are at most 5 s (timeoutSeconds); resolve the fast end finely.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


@dataclass
class WebhookMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    _series: dict[tuple[object, ...], MetricWrapperBase] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        self.http_requests = Counter(
            "controller_runtime_webhook_requests_total",
            "Total number of admission requests by HTTP status code.",
            ["webhook", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests.",
            ["webhook"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            ["webhook"],
            registry=self.registry,
        )
        self.requests = Counter(
            "trussium_webhook_requests_total",
            "Admission requests answered, by hook and verdict (allowed, denied, error).",
            ["hook", "verdict"],
            registry=self.registry,
        )
        self.connections = ConnectionMetrics("trussium_webhook", self.registry)
        self.certificate_expiry = Gauge(
            "trussium_webhook_certificate_expiry_timestamp_seconds",
            "Expiry (Unix time) of the serving certificate new connections get.",
            registry=self.registry,
        )
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def reviewed(self, hook: str, verdict: str) -> Counter:
        """The `trussium_webhook_requests_total` series of `hook` and `verdict`."""
        return self._labelled(self.requests, hook, verdict)

    def _labelled(self, metric: _Metric, *labels: str) -> _Metric:
        key = (metric, *labels)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = metric.labels(*labels)
        return cast(_Metric, series)

    def middleware(self) -> Middleware:
        """Count, time and track in flight every request to a registered hook path."""

        @web.middleware
        async def observe(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            resource = request.match_info.route.resource
            if resource is None:  # no such hook: keep arbitrary paths out of the labels
                return await handler(request)
            webhook = resource.canonical
            started = time.perf_counter()
            code = 500
            in_flight = self._labelled(self.in_flight, webhook)
            in_flight.inc()
            try:
                response = await handler(request)
                code = response.status
                return response
            except web.HTTPException as error:
                code = error.status
                raise
            finally:
                in_flight.dec()
                self._labelled(self.latency, webhook).observe(time.perf_counter() - started)
                self._labelled(self.http_requests, webhook, str(code)).inc()

        return observe
