"""Geometry of the admin analytics charts, computed here and drawn as SVG by a Jinja template
(admin/analytics/templates/analytics/_chart.html): no script, no inline style, every label escaped.

`line_chart` maps a daily series onto a fixed viewBox: a polyline per run of days that have a
value (a day without searches has no rate and breaks the line), a marker per day with a value
(its <title> is the tooltip), a few horizontal gridlines and date labels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Callable, Sequence

WIDTH, HEIGHT = 360, 170
LEFT, RIGHT, TOP, BOTTOM = 44, 10, 10, 24
Y_TICKS = 4
MAX_X_LABELS = 6


@dataclass(frozen=True)
class Marker:
    x: float
    y: float
    label: str


@dataclass(frozen=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_top: int
    plot_bottom: int
    lines: tuple[str, ...]            # SVG polyline `points` strings
    markers: tuple[Marker, ...]
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]

    @property
    def empty(self) -> bool:
        return not self.markers


def percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def number(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^n that is >= value (an axis maximum people can read)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def line_chart(key: str, title: str, series: Sequence[tuple[date, float | None]],
               fmt: Callable[[float], str] = number, y_max: float | None = None) -> Chart:
    """A line chart of `series` (one value per day, None = no value). `y_max`: the top of the
    axis (1.0 for rates); by default a round number at or above the largest value."""
    values = [v for _, v in series if v is not None]
    top = y_max if y_max is not None else nice_ceiling(max(values, default=0.0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(len(series) - 1, 1)

    def x_of(index: int) -> float:
        return round(LEFT + index * step, 1)

    def y_of(value: float) -> float:
        return round(TOP + plot_h * (1 - min(value, top) / top), 1)

    lines, run, markers = [], [], []
    for index, (day, value) in enumerate(series):
        if value is None:
            if run:
                lines.append(" ".join(run))
            run = []
            continue
        x, y = x_of(index), y_of(value)
        run.append(f"{x},{y}")
        markers.append(Marker(x, y, f"{day.isoformat()}: {fmt(value)}"))
    if run:
        lines.append(" ".join(run))
    y_ticks = tuple(Tick(y_of(top * i / Y_TICKS), fmt(top * i / Y_TICKS)) for i in range(Y_TICKS + 1))
    every = max(1, math.ceil(len(series) / MAX_X_LABELS))
    x_ticks = tuple(Tick(x_of(i), day.strftime("%m-%d")) for i, (day, _) in enumerate(series) if i % every == 0)
    return Chart(key, title, WIDTH, HEIGHT, LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM, tuple(lines),
                 tuple(markers), y_ticks, x_ticks)
