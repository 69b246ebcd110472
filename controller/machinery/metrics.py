"""Prometheus metrics under the names dashboards already chart for controller-runtime
and client-go (work queue, REST client, leader election), in the process-wide
registry, which also carries the process and Python metrics. Series are labelled
by the controller's and the queue's names, which the caller chooses."""

from collections.abc import Callable
from typing import Generic, TypeVar

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

M = TypeVar("M", bound=MetricWrapperBase)

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller.",
    ["controller", "result"],
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller.",
    ["controller"],
)
TERMINAL_RECONCILE_ERRORS = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller (never: every failed "
    "reconcile is retried).",
    ["controller"],
)
RECONCILE_PANICS = Counter(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics per controller (here: unexpected exceptions, "
    "a bug, retried like any error).",
    ["controller"],
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller.",
    ["controller"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


class _PerQueue(Generic[M]):
    """A work-queue vector labelled as controller-runtime labels it: `name` and
    `controller` both carry the queue's name (one queue per controller), and the
    depth an empty `priority` (no priority queue)."""

    def __init__(self, vector: M, *extra: str) -> None:
        self._vector, self._extra = vector, extra

    def labels(self, name: str) -> M:
        return self._vector.labels(name, name, *self._extra)


_QUEUE_LABELS = ["name", "controller"]
WORKQUEUE_DEPTH = _PerQueue(
    Gauge(
        "workqueue_depth",
        "Current depth of the work queue.",
        [*_QUEUE_LABELS, "priority"],
    ),
    "",
)
WORKQUEUE_ADDS = _PerQueue(
    Counter("workqueue_adds_total", "Total adds handled by the work queue.", _QUEUE_LABELS)
)
WORKQUEUE_RETRIES = _PerQueue(
    Counter("workqueue_retries_total", "Total retries handled by the work queue.", _QUEUE_LABELS)
)
_QUEUE_BUCKETS = (1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10, 100, 1000)
WORKQUEUE_QUEUE_DURATION = _PerQueue(
    Histogram(
        "workqueue_queue_duration_seconds",
        "How long in seconds an item stays in the work queue before being requested.",
        _QUEUE_LABELS,
        buckets=_QUEUE_BUCKETS,
    )
)
WORKQUEUE_WORK_DURATION = _PerQueue(
    Histogram(
        "workqueue_work_duration_seconds",
        "How long in seconds processing an item from the work queue takes.",
        _QUEUE_LABELS,
        buckets=_QUEUE_BUCKETS,
    )
)
WORKQUEUE_UNFINISHED_WORK = _PerQueue(
    Gauge(
        "workqueue_unfinished_work_seconds",
        "How many seconds of work has been done that is in progress and hasn't been observed "
        "by work_duration. Large values indicate stuck threads.",
        _QUEUE_LABELS,
    )
)
WORKQUEUE_LONGEST_RUNNING = _PerQueue(
    Gauge(
        "workqueue_longest_running_processor_seconds",
        "How many seconds has the longest running processor for the work queue been running.",
        _QUEUE_LABELS,
    )
)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller.",
    ["controller"],
)
MAX_CONCURRENT_RECONCILES = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller.",
    ["controller"],
)
REST_CLIENT_REQUESTS = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests to the API server, partitioned by status code, method, and host "
    '("<error>" when no answer came).',
    ["code", "method", "host"],
)
REST_CLIENT_RATE_LIMITER_DURATION = Histogram(
    "rest_client_rate_limiter_duration_seconds",
    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60),
)
LEADER = Gauge(
    "leader_election_master_status",
    "1 while this process holds the leader lease, else 0.",
    ["name"],
)
LEADER_SLOWPATH = Counter(
    "leader_election_slowpath_total",
    "Total number of slow path exercised in renewing leader leases: a renewal that had "
    "to read the Lease again because the one it last wrote was out of date.",
    ["name"],
)


def init_controller(
    controller: str, queue: str, workers: int, active_workers: Callable[[], int]
) -> None:
    """What controller-runtime sets up when a controller starts: every series exists
    from the first scrape (rates and ratios need no "absent" special case)."""
    for result in ("success", "error", "requeue"):
        RECONCILE_TOTAL.labels(controller, result)
    RECONCILE_ERRORS.labels(controller)
    TERMINAL_RECONCILE_ERRORS.labels(controller)
    RECONCILE_PANICS.labels(controller)
    WORKQUEUE_RETRIES.labels(queue)
    MAX_CONCURRENT_RECONCILES.labels(controller).set(workers)
    ACTIVE_WORKERS.labels(controller).set_function(active_workers)
