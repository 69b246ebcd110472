"""Prometheus metrics of the webhook, in their own registry.

A registry per server (not the process-global one) keeps tests and several
servers in one process independent.
"""

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Admission budgets are at most 5 s (timeoutSeconds); resolve the fast end finely.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


@dataclass
class WebhookMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.requests = Counter(
            "trussium_webhook_requests_total",
            "Admission requests answered, by hook and verdict (allowed, denied, error).",
            ["hook", "verdict"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "trussium_webhook_request_duration_seconds",
            "Time to answer an admission request, by hook.",
            ["hook"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.connections_refused = Counter(
            "trussium_webhook_connections_refused_total",
            "Connections closed on arrival because the open-connection cap was reached.",
            registry=self.registry,
        )
        self.connections_dropped = Counter(
            "trussium_webhook_connections_dropped_total",
            "Requests or connections ended early (malformed HTTP, timeouts, clients gone), "
            "by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.certificate_expiry = Gauge(
            "trussium_webhook_certificate_expiry_timestamp_seconds",
            "Expiry (Unix time) of the serving certificate new connections get.",
            registry=self.registry,
        )
