"""The chart's Grafana dashboard queries only series the programs register (and the
runtime's own, labelled with the runtime by its PodMonitor), and only their own
labels: nothing a scrape configuration or relabeling names (job, pod, namespace),
except `instance` to join two series of one process."""

import pytest

from hack.dashboard import load, queries, variable_reads
from tests.support.metric_registry import registered_series, runtime_series
from tests.support.promql import reads

SERIES = registered_series() | runtime_series()
# The one target label a query may use: to pair series of the same process (`on`).
JOIN_LABELS = {"instance"}


def problems(expr: str) -> list[str]:
    """What in `expr` is not a registered series or not one of its labels."""
    found = reads(expr)
    wrong = [f"{name} is not registered" for name in found.matchers if name not in SERIES]
    for name, labels in found.matchers.items():
        wrong += [f"{name} has no label {label}" for label in labels - SERIES.get(name, set())]
    for labels, names in found.groupings:
        known = set(JOIN_LABELS).union(*(SERIES.get(name, set()) for name in names))
        wrong += [f"{sorted(names)} have no label {label}" for label in labels - known]
    return wrong


def test_every_query_reads_registered_series_and_their_labels() -> None:
    dashboard = load()
    found = list(queries(dashboard))
    assert len(found) >= 20
    assert {title: problems(expr) for title, expr in found if problems(expr)} == {}
    for metric, label in variable_reads(dashboard):
        assert label in SERIES[metric], (metric, label)


def test_it_shows_every_per_runtime_series_and_the_new_controller_runtime_ones() -> None:
    read = set().union(*(set(reads(expr).matchers) for _, expr in queries(load())))
    assert {
        "trussium_runtime_ready",
        "trussium_runtime_ready_replicas",
        "trussium_runtime_upgrade_state",
        "trussium_runtime_info",
        "controller_runtime_reconcile_panics_total",
        "controller_runtime_terminal_reconcile_errors_total",
        "leader_election_slowpath_total",
        "trussium_http_requests_total",
        "trussium_http_request_duration_seconds_bucket",
        "trussium_http_requests_active",
    } <= read


def test_every_query_reads_only_this_operators_series() -> None:
    """Every controller-runtime operator exports leader_election_* and rest_client_*:
    a query reads a series only ours has (a trussium_ metric, our controller's or
    hooks' label values), joining the shared ones to it on instance."""
    unscoped = [title for title, expr in queries(load()) if "trussium" not in expr]
    assert unscoped == []


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ('workqueue_depth{job="trussium"}', "workqueue_depth has no label job"),
        ("sum by (namespace) (trussium_runtime_ready)", "have no label namespace"),
        ("rate(trussium_reconciles_total[5m])", "trussium_reconciles_total is not registered"),
        ("up * on (pod) trussium_runtime_ready", "up is not registered"),
    ],
)
def test_the_check_finds_what_a_misnamed_query_reads(expr: str, problem: str) -> None:
    assert any(problem in p for p in problems(expr))


def test_ids_are_unique_and_panels_do_not_overlap() -> None:
    panels = load()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells = [
        (p["gridPos"]["x"] + dx, p["gridPos"]["y"] + dy)
        for p in panels
        for dx in range(p["gridPos"]["w"])
        for dy in range(p["gridPos"]["h"])
    ]
    assert len(cells) == len(set(cells))
    assert all(p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in panels)
