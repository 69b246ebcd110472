"""Draws a Grafana dashboard's panels from query results with matplotlib, laid out as
Grafana lays them out: its 24-column grid (`gridPos`), titles, units, legends, stat
thresholds and the table panel's merge and organize transformations.

The rules Grafana applies that the picture depends on are here as small pure
functions (units, legends, thresholds, the merge), so tests hold them without
drawing. What is drawn is only what the results say: no panel is styled by hand.
"""

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.textpath import TextToPath
from matplotlib.ticker import FuncFormatter, MaxNLocator

# Grafana's grid: 24 columns, rows of 30 px, 8 px between panels.
COLUMNS = 24
ROW_PX = 30
GAP_PX = 8
WIDTH_PX = 1600
MARGIN_PX = 16
HEADER_PX = 92
DPI = 100

# Grafana's dark theme and its classic series palette.
CANVAS = "#111217"
PANEL = "#181b1f"
BORDER = "#2a2d33"
TEXT = "#ccccdc"
WEAK = "#8e8e9e"
GRID = "#25282e"
PALETTE = (
    "#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1",
    "#BA43A9", "#705DA0", "#508642", "#CCA300", "#447EBC", "#C15C17",
)  # fmt: skip
COLORS = {
    "green": "#73BF69",
    "red": "#F2495C",
    "orange": "#FF9830",
    "yellow": "#FADE2A",
    "blue": "#5794F2",
    "text": TEXT,
}
# What Grafana uses when a panel sets no thresholds.
DEFAULT_THRESHOLDS = ({"color": "green", "value": None}, {"color": "red", "value": 80})


@dataclass(frozen=True)
class Line:
    """One series of a time-series panel: its legend and (unix time, value) points."""

    label: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


Result = tuple[Line, ...] | float | Table | None
"""A panel's data: lines (timeseries), a value (stat, None for no data), a table."""


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    step: float


def rate_interval(step: float, scrape_interval: float) -> float:
    """Grafana's `$__rate_interval`: max(`$__interval` + scrape interval, 4 x scrape
    interval), with `$__interval` the query step."""
    return max(step + scrape_interval, 4 * scrape_interval)


_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def legend(template: str, labels: Mapping[str, str]) -> str:
    """A series' name: the target's legendFormat with each `{{label}}` filled in (empty
    for a label the series lacks, as in Grafana), else its labels as Prometheus prints
    them."""
    if template:
        return _PLACEHOLDER.sub(lambda m: labels.get(m.group(1), ""), template).strip()
    inner = ", ".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    return "{" + inner + "}"


def _number(value: float) -> str:
    """A value with the decimals Grafana would show: integers bare, else about three
    significant digits."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    size = abs(value)
    decimals = 0 if size >= 100 else 1 if size >= 10 else 2 if size >= 1 else 3
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _si(value: float, suffix: str) -> str:
    """`value` scaled by thousands (K, M, B), then `suffix`."""
    prefix = ""
    for factor, name in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= factor:
            value, prefix = value / factor, name
            break
    return " ".join(part for part in (_number(value), prefix, suffix) if part)


_DURATIONS = (
    (1.0, "s"),
    (60.0, "min"),
    (3600.0, "hour"),
    (86400.0, "day"),
    (604800.0, "week"),
    (31536000.0, "year"),
)


def format_value(value: float, unit: str) -> str:
    """`value` in one of the dashboard's units as Grafana writes it: `s` (ms below a
    second, then min, hour, day, week, year), `ops` and `reqps` (per second), else
    Grafana's `short` (K, M, B)."""
    if math.isnan(value):
        return "NaN"
    if unit == "s":
        if value == 0:
            return "0 s"
        if abs(value) < 1:
            return f"{_number(value * 1000)} ms"
        steps = [(factor, name) for factor, name in _DURATIONS if abs(value) >= factor]
        factor, name = steps[-1]
        return f"{_number(value / factor)} {name}"
    return _si(value, {"ops": "ops/s", "reqps": "req/s"}.get(unit, ""))


def threshold_color(value: float, steps: Sequence[Mapping[str, Any]]) -> str:
    """The color of the highest threshold step `value` reaches (the base step has no
    value), as a hex color."""
    color = str(steps[0]["color"])
    for step in steps[1:]:
        if step["value"] is not None and value >= float(step["value"]):
            color = str(step["color"])
    return COLORS.get(color, color)


def merge(frames: Sequence[Sequence[Mapping[str, str]]]) -> list[dict[str, str]]:
    """Grafana's `merge` transformation on instant-query tables: rows of the frames
    that agree on every field they share become one row; fields keep the order in
    which the frames first name them."""
    merged: list[dict[str, str]] = []
    for frame in frames:
        for row in frame:
            for target in merged:
                shared = row.keys() & target.keys()
                if shared and all(row[key] == target[key] for key in shared):
                    target.update(row)
                    break
            else:
                merged.append(dict(row))
    return merged


def organize(rows: Sequence[Mapping[str, str]], options: Mapping[str, Any]) -> Table:
    """Grafana's `organize` transformation: fields excluded, ordered by `indexByName`
    (the others after them, as they came) and renamed."""
    excluded = {name for name, out in (options.get("excludeByName") or {}).items() if out}
    renamed: Mapping[str, str] = options.get("renameByName") or {}
    order: Mapping[str, int] = options.get("indexByName") or {}
    fields: list[str] = []
    for row in rows:
        fields += [name for name in row if name not in fields and name not in excluded]
    fields.sort(key=lambda name: order.get(name, len(order)))
    return Table(
        tuple(renamed.get(name, name) for name in fields),
        tuple(tuple(row.get(name, "") for name in fields) for row in rows),
    )


def table_of(panel: Mapping[str, Any], frames: Sequence[Sequence[Mapping[str, str]]]) -> Table:
    """A table panel's data after its transformations (merge and organize)."""
    rows: list[dict[str, str]] = [dict(row) for frame in frames for row in frame]
    merged = False
    table: Table | None = None
    for transformation in panel.get("transformations", ()):
        if transformation["id"] == "merge":
            rows, merged = merge(frames), True
        elif transformation["id"] == "organize":
            table = organize(rows, transformation.get("options") or {})
        else:
            raise ValueError(f"transformation {transformation['id']!r} is not drawn")
    if not merged and len(frames) > 1:
        raise ValueError("a table of several queries needs the merge transformation")
    return table or organize(rows, {})


@dataclass(frozen=True)
class Box:
    """A panel's place in pixels from the dashboard's top left corner."""

    left: float
    top: float
    width: float
    height: float


def box_of(grid: Mapping[str, int]) -> Box:
    """Where Grafana puts a panel of this `gridPos`, in pixels."""
    column = (WIDTH_PX - 2 * MARGIN_PX - (COLUMNS - 1) * GAP_PX) / COLUMNS
    return Box(
        left=MARGIN_PX + grid["x"] * (column + GAP_PX),
        top=HEADER_PX + grid["y"] * (ROW_PX + GAP_PX),
        width=grid["w"] * column + (grid["w"] - 1) * GAP_PX,
        height=grid["h"] * ROW_PX + (grid["h"] - 1) * GAP_PX,
    )


class Canvas:
    """The figure, addressed in pixels from its top left corner."""

    def __init__(self, height: float) -> None:
        self.height = height
        self.figure = Figure(figsize=(WIDTH_PX / DPI, height / DPI), dpi=DPI, facecolor=CANVAS)

    def fx(self, x: float) -> float:
        return x / WIDTH_PX

    def fy(self, y: float) -> float:
        return 1 - y / self.height

    def text(self, x: float, y: float, text: str, **style: Any) -> None:
        self.figure.text(self.fx(x), self.fy(y), text, **{"color": TEXT, **style})

    def rectangle(self, box: Box, **style: Any) -> None:
        self.figure.add_artist(
            Rectangle(
                (self.fx(box.left), self.fy(box.top + box.height)),
                box.width / WIDTH_PX,
                box.height / self.height,
                transform=self.figure.transFigure,
                **style,
            )
        )

    def axes(self, box: Box) -> Any:
        return self.figure.add_axes(
            (
                self.fx(box.left),
                self.fy(box.top + box.height),
                box.width / WIDTH_PX,
                box.height / self.height,
            )
        )


_MEASURE = TextToPath()


def text_width(text: str, size: float, bold: bool = False) -> float:
    """The width in pixels of `text` at `size` points, in the font it is drawn with."""
    font = FontProperties(size=size, weight="bold" if bold else "normal")
    points, _, _ = _MEASURE.get_text_width_height_descent(text, font, ismath=False)
    return points * DPI / 72


def _unit(panel: Mapping[str, Any]) -> str:
    return str(((panel.get("fieldConfig") or {}).get("defaults") or {}).get("unit") or "")


def _legend_rows(labels: Sequence[str], width: float) -> list[list[tuple[int, float]]]:
    """Legend entries (index, width in px at 8 pt) flowed into rows of `width` px."""
    rows: list[list[tuple[int, float]]] = [[]]
    used = 0.0
    for index, label in enumerate(labels):
        size = 19 + text_width(label, 8) + 16
        if rows[-1] and used + size > width:
            rows.append([])
            used = 0.0
        rows[-1].append((index, size))
        used += size
    return rows if rows[0] else []


def _draw_timeseries(canvas: Canvas, box: Box, panel: Mapping[str, Any], lines: Sequence[Line],
                     window: Window) -> None:  # fmt: skip
    if not lines:
        _no_data(canvas, box)
        return
    legend_rows = _legend_rows([line.label for line in lines], box.width - 20)
    legend_px = 17 * len(legend_rows) + 4
    plot = Box(box.left + 52, box.top + 32, box.width - 64, box.height - 32 - 22 - legend_px)
    ax = canvas.axes(plot)
    ax.set_facecolor(PANEL)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.grid(True, color=GRID, linewidth=0.8)
    ax.tick_params(colors=WEAK, labelsize=8, length=0)
    unit = _unit(panel)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: format_value(value, unit)))
    integers = ((panel.get("fieldConfig") or {}).get("defaults") or {}).get("decimals") == 0
    ax.yaxis.set_major_locator(MaxNLocator(nbins=4, min_n_ticks=2, integer=integers))
    ax.set_xticks(time_ticks(window.start, window.end))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: _clock(value)))
    custom = ((panel.get("fieldConfig") or {}).get("defaults") or {}).get("custom") or {}
    stacked = (custom.get("stacking") or {}).get("mode", "none") == "normal"
    fill = float(custom.get("fillOpacity", 0)) / 100
    top = 0.0
    for index, (line, bases) in enumerate(zip(lines, stack_bases(lines, stacked), strict=True)):
        upper = tuple(
            (when, base + value) for base, (when, value) in zip(bases, line.points, strict=True)
        )
        times, values = with_gaps(upper, window.step)
        _, lows = with_gaps(
            tuple(zip((t for t, _ in line.points), bases, strict=True)), window.step
        )
        color = PALETTE[index % len(PALETTE)]
        marker = "o" if len(line.points) <= 2 else None
        ax.plot(times, values, color=color, linewidth=1.4, marker=marker, markersize=3)
        if fill:
            ax.fill_between(times, lows, values, color=color, alpha=fill, linewidth=0)
        top = max([top, *(v for v in values if not math.isnan(v))])
    ax.set_xlim(window.start, window.end)
    ax.set_ylim(0, top * 1.15 if top > 0 else 1)
    y = box.top + box.height - legend_px + 2
    for row in legend_rows:
        x = box.left + 12
        for index, size in row:
            color = PALETTE[index % len(PALETTE)]
            canvas.figure.add_artist(
                Line2D(
                    [canvas.fx(x), canvas.fx(x + 14)],
                    [canvas.fy(y + 7), canvas.fy(y + 7)],
                    color=color,
                    linewidth=3,
                    transform=canvas.figure.transFigure,
                )
            )
            canvas.text(x + 19, y + 7, lines[index].label, fontsize=8, va="center")
            x += size
        y += 17


def stack_bases(lines: Sequence[Line], stacked: bool) -> list[list[float]]:
    """Where each point of each line starts: 0, or with Grafana's `normal` stacking the
    sum of the lines before it at the same time (a line absent then adds nothing)."""
    totals: dict[float, float] = {}
    bases = []
    for line in lines:
        bases.append([totals.get(when, 0.0) if stacked else 0.0 for when, _ in line.points])
        if stacked:
            for when, value in line.points:
                totals[when] = totals.get(when, 0.0) + value
    return bases


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M")


def time_ticks(start: float, end: float, most: int = 7) -> list[float]:
    """Ticks on whole minutes (1, 2, 5, 10, 15, 30, 60), at most `most` of them."""
    for minutes in (1, 2, 5, 10, 15, 30, 60):
        step = 60.0 * minutes
        first = math.ceil(start / step) * step
        ticks = [first + i * step for i in range(int((end - first) // step) + 1)]
        if len(ticks) <= most:
            return ticks
    return [start, end]


def with_gaps(
    points: Sequence[tuple[float, float]], step: float
) -> tuple[list[float], list[float]]:
    """Times and values, with a NaN where a step has no sample: a gap, as Grafana draws
    a series that was absent for a while."""
    times: list[float] = []
    values: list[float] = []
    previous: float | None = None
    for when, value in points:
        if previous is not None and when - previous > 1.5 * step:
            times.append(previous + step)
            values.append(math.nan)
        times.append(when)
        values.append(value)
        previous = when
    return times, values


def _no_data(canvas: Canvas, box: Box) -> None:
    canvas.text(
        box.left + box.width / 2, box.top + box.height / 2 + 8, "No data",
        color=WEAK, fontsize=12, ha="center", va="center",
    )  # fmt: skip


def _draw_stat(canvas: Canvas, box: Box, panel: Mapping[str, Any], value: float | None) -> None:
    if value is None:
        _no_data(canvas, box)
        return
    defaults = (panel.get("fieldConfig") or {}).get("defaults") or {}
    steps = (defaults.get("thresholds") or {}).get("steps") or DEFAULT_THRESHOLDS
    size = min(box.height - 40, box.width / 4) * 0.55
    canvas.text(
        box.left + box.width / 2, box.top + 18 + (box.height - 18) / 2,
        format_value(value, _unit(panel)),
        color=threshold_color(value, steps), fontsize=size * 72 / DPI,
        ha="center", va="center", fontweight="bold",
    )  # fmt: skip


def _draw_table(canvas: Canvas, box: Box, table: Table) -> None:
    if not table.rows:
        _no_data(canvas, box)
        return
    inner = box.width - 24
    wanted = [
        max([text_width(column, 9, bold=True), *(text_width(row[i], 9) for row in table.rows)]) + 24
        for i, column in enumerate(table.columns)
    ]
    widths = [inner * w / sum(wanted) for w in wanted]
    y = box.top + 34
    x = box.left + 12
    for column, width in zip(table.columns, widths, strict=True):
        canvas.text(x + 6, y + 13, column, fontsize=9, va="center", fontweight="bold")
        x += width
    canvas.rectangle(Box(box.left + 12, y + 27, inner, 1), color=BORDER)
    y += 28
    for index, row in enumerate(table.rows):
        if y + 28 > box.top + box.height:
            break
        if index % 2:
            canvas.rectangle(Box(box.left + 12, y, inner, 28), color="#1f2227")
        x = box.left + 12
        for cell, width in zip(row, widths, strict=True):
            shown = cell
            while len(shown) > 1 and text_width(shown, 9) > width - 12:
                shown = shown[:-2] + "…"
            canvas.text(x + 6, y + 14, shown, fontsize=9, va="center")
            x += width
        y += 28


def draw(
    dashboard: Mapping[str, Any],
    results: Mapping[int, Result],
    window: Window,
    note: str,
    path: Path,
) -> None:
    """Every panel of `dashboard` at its grid place, with its result (by panel id),
    under a header naming the dashboard, its variables, the time range and `note`."""
    panels = dashboard["panels"]
    bottom = max(box_of(p["gridPos"]).top + box_of(p["gridPos"]).height for p in panels)
    canvas = Canvas(bottom + MARGIN_PX)
    canvas.text(MARGIN_PX, 30, dashboard["title"], fontsize=17, va="center", fontweight="bold")
    minutes = round((window.end - window.start) / 60)
    canvas.text(
        WIDTH_PX - MARGIN_PX, 30, f"Last {minutes} minutes (UTC)",
        fontsize=10, va="center", ha="right", color=WEAK,
    )  # fmt: skip
    x: float = MARGIN_PX
    for variable in dashboard.get("templating", {}).get("list", ()):
        label = variable.get("label") or variable["name"]
        value = "Prometheus" if variable["type"] == "datasource" else "All"
        canvas.text(x, 58, label, fontsize=9, va="center", color=WEAK)
        x += text_width(label, 9) + 8
        canvas.text(x, 58, value, fontsize=9, va="center")
        x += text_width(value, 9) + 24
    canvas.text(MARGIN_PX, 80, note, fontsize=8.5, va="center", color=WEAK, style="italic")
    for panel in panels:
        box = box_of(panel["gridPos"])
        if panel["type"] == "row":
            canvas.text(box.left, box.top + 17, f"▾ {panel['title']}", fontsize=12.5,
                        va="center", fontweight="bold")  # fmt: skip
            continue
        canvas.rectangle(box, facecolor=PANEL, edgecolor=BORDER, linewidth=1, zorder=-1)
        canvas.text(box.left + 10, box.top + 16, panel["title"], fontsize=10, va="center",
                    fontweight="bold")  # fmt: skip
        result = results.get(panel["id"])
        if panel["type"] == "timeseries":
            assert isinstance(result, tuple), panel["title"]
            _draw_timeseries(canvas, box, panel, result, window)
        elif panel["type"] == "stat":
            assert result is None or isinstance(result, float), panel["title"]
            _draw_stat(canvas, box, panel, result)
        elif panel["type"] == "table":
            assert isinstance(result, Table), panel["title"]
            _draw_table(canvas, box, result)
        else:
            raise ValueError(f"panel type {panel['type']!r} is not drawn")
    path.parent.mkdir(parents=True, exist_ok=True)
    canvas.figure.savefig(path, dpi=DPI, facecolor=CANVAS)
