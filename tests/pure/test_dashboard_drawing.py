"""The Grafana rules hack/render_dashboard.py draws by (units, legends, thresholds, the
table's transformations, the grid), and a drawing of every panel of the chart's
dashboard from made-up results."""

import math
from pathlib import Path
from typing import Any

import pytest

from hack.dashboard import load
from hack.dashboard_drawing import (
    DEFAULT_THRESHOLDS,
    HEADER_PX,
    WIDTH_PX,
    Line,
    Result,
    Table,
    Window,
    box_of,
    draw,
    format_value,
    legend,
    rate_interval,
    stack_bases,
    table_of,
    threshold_color,
    time_ticks,
    with_gaps,
)


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (0, "s", "0 s"),
        (0.0042, "s", "4.2 ms"),
        (0.25, "s", "250 ms"),
        (12.5, "s", "12.5 s"),
        (90, "s", "1.5 min"),
        (7200, "s", "2 hour"),
        (2 * 86400, "s", "2 day"),
        (3 * 604800, "s", "3 week"),
        (31536000 * 1.5, "s", "1.5 year"),
        (0.333333, "ops", "0.333 ops/s"),
        (1500, "reqps", "1.5 K req/s"),
        (3, "", "3"),
        (2500000, "", "2.5 M"),
        (math.nan, "", "NaN"),
    ],
)
def test_units_read_as_grafana_writes_them(value: float, unit: str, text: str) -> None:
    assert format_value(value, unit) == text


def test_legends_fill_labels_and_fall_back_to_the_label_set() -> None:
    labels = {"runtime_namespace": "team-a", "runtime_name": "chat"}
    assert legend("{{runtime_namespace}}/{{ runtime_name }}", labels) == "team-a/chat"
    assert legend("dropped: {{reason}}", {}) == "dropped:"
    assert legend("", labels) == '{runtime_name="chat", runtime_namespace="team-a"}'


def test_thresholds_pick_the_highest_step_reached() -> None:
    assert threshold_color(79, DEFAULT_THRESHOLDS) == threshold_color(0, DEFAULT_THRESHOLDS)
    assert threshold_color(80, DEFAULT_THRESHOLDS) != threshold_color(79, DEFAULT_THRESHOLDS)
    steps: list[dict[str, Any]] = [
        {"color": "red", "value": None},
        {"color": "#123456", "value": 5},
    ]
    assert threshold_color(6, steps) == "#123456"


def test_every_stat_of_the_dashboard_sets_its_thresholds() -> None:
    """Grafana's default (red from 80) would paint a certificate's remaining seconds red."""
    stats = [p for p in load()["panels"] if p["type"] == "stat"]
    assert stats
    for panel in stats:
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert steps[0]["value"] is None, panel["title"]
    certificate = next(p for p in stats if p["title"] == "Serving certificate expires in")
    steps = certificate["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert threshold_color(90 * 86400, steps) == threshold_color(0, [{"color": "green"}])
    assert threshold_color(3 * 86400, steps) == threshold_color(0, [{"color": "red"}])


def test_the_runtimes_table_merges_its_four_queries_into_one_row_per_runtime() -> None:
    """Each query's columns come as Grafana makes them (labels by name, then the value);
    the dashboard's organize step puts the runtime first and the images last."""
    panel = next(p for p in load()["panels"] if p["type"] == "table")
    chat = {"runtime_name": "chat", "runtime_namespace": "a"}
    idle = {"runtime_name": "idle", "runtime_namespace": "a"}
    frames = [
        [{**chat, "Value #A": "1"}, {**idle, "Value #A": "0"}],
        [{**chat, "Value #B": "2"}, {**idle, "Value #B": "0"}],
        [{**chat, "state": "UpgradeComplete", "Value #C": "1"}],
        [
            {"current_image": "r:2", "desired_image": "r:2", **chat, "Value #D": "1"},
            {"desired_image": "r:1", **idle, "Value #D": "1"},
        ],
    ]
    assert table_of(panel, frames) == Table(
        (
            "runtime_namespace",
            "runtime_name",
            "ready",
            "ready replicas",
            "state",
            "desired_image",
            "current_image",
        ),
        (
            ("a", "chat", "1", "2", "UpgradeComplete", "r:2", "r:2"),
            ("a", "idle", "0", "0", "", "r:1", ""),
        ),
    )


def test_panels_sit_on_grafanas_grid() -> None:
    left = box_of({"x": 0, "y": 0, "w": 12, "h": 8})
    right = box_of({"x": 12, "y": 0, "w": 12, "h": 8})
    below = box_of({"x": 0, "y": 8, "w": 24, "h": 1})
    assert left.top == right.top == HEADER_PX
    assert right.left - (left.left + left.width) == pytest.approx(8), "8 px between columns"
    assert right.left + right.width == pytest.approx(WIDTH_PX - 16)
    assert below.left + below.width == pytest.approx(WIDTH_PX - 16)
    assert left.height == 8 * 30 + 7 * 8
    assert below.top - (left.top + left.height) == 8, "8 px between rows"


def test_the_rate_window_is_grafanas() -> None:
    assert rate_interval(step=5, scrape_interval=5) == 20
    assert rate_interval(step=60, scrape_interval=15) == 75


def test_stacking_starts_each_line_on_the_ones_before_it() -> None:
    first = Line("a", ((0.0, 1.0), (5.0, 1.0)))
    second = Line("b", ((5.0, 1.0), (10.0, 1.0)))
    assert stack_bases((first, second), stacked=True) == [[0.0, 0.0], [1.0, 0.0]]
    assert stack_bases((first, second), stacked=False) == [[0.0, 0.0], [0.0, 0.0]]


def test_time_axis_and_gaps() -> None:
    ticks = time_ticks(1000.0, 1000.0 + 600)
    assert ticks == [1080.0 + 120 * i for i in range(5)], "on every second whole minute"
    times, values = with_gaps(((0.0, 1.0), (5.0, 1.0), (30.0, 2.0)), step=5.0)
    assert times == [0.0, 5.0, 10.0, 30.0]
    assert math.isnan(values[2])


def test_every_panel_of_the_dashboard_is_drawn(tmp_path: Path) -> None:
    dashboard = load()
    window = Window(1_700_000_000.0, 1_700_000_600.0, 5.0)
    points = tuple((window.start + 5 * i, float(i % 7)) for i in range(121))
    results: dict[int, Result] = {}
    for panel in dashboard["panels"]:
        if panel["type"] == "timeseries":
            results[panel["id"]] = (Line("a", points), Line("b", points[:1]))
        elif panel["type"] == "stat":
            results[panel["id"]] = 3.0
        elif panel["type"] == "table":
            results[panel["id"]] = Table(("runtime_name", "ready"), (("chat", "1"),))
    path = tmp_path / "dashboard.png"
    draw(dashboard, results, window, "made-up results", path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(path.read_bytes()[16:20], "big")
    assert width == WIDTH_PX
