"""Shared look of every PD Lab chart: projector-sized fonts, legends below the plot, shading.

Notable features
- `styled(fig, title)` applies the one style (theme font, white template, title top left under
  a band kept free for plotly's toolbar, horizontal legend below the plot so it never covers
  data).
- Colours for "what limited a step" reuse the phase colours on purpose: compute-bound is prefill
  orange and bandwidth-bound is decode blue, because prefill is the compute-bound phase and decode
  the bandwidth-bound one (claim C1). Overhead is grey, tensor-parallel communication green.
- `shade_regions` and `knee_line` draw the memory-bound / compute-bound backgrounds and the
  labelled knee; on log axes plotly wants log10 positions for annotations but data positions for
  shapes, which these helpers take care of.
- `finite` turns any sequence into a float array and raises if a NaN or inf would be plotted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import plotly.graph_objects as go

from sim.cost.hardware import GpuSpec, ModelSpec, get_gpu, get_model
from ui.i18n import t
from ui.theme import COLORS, FONT_FAMILY, FONT_SIZE, OUTLINE

# What limited a step's time (StepCost's split), in the phase colours (see module docstring).
BOUND_COLORS = {
    "compute": COLORS["prefill"],
    "memory": COLORS["decode"],
    "kv_read": "#6BAED6",  # lighter blue: the bandwidth spent on reading the KV cache
    "overhead": "#A6A6A6",  # medium grey: fixed per-step cost
    "comm": COLORS["kv_transfer"],
}
# Background shading of the two regimes: very light tints of the same two colours.
REGION_FILL = {"memory": "rgba(31, 119, 180, 0.08)", "compute": "rgba(242, 142, 43, 0.10)"}
REGION_TEXT = {"memory": "#17557F", "compute": "#A65206"}  # darker shades, readable as text
# Series that are neither a phase nor a bound (workers, compared runs); avoids orange and blue.
SERIES_COLORS = ("#17BECF", "#8C564B", "#7F7F7F", "#BCBD22", "#E377C2", "#9467BD", "#393B79")
INK = "#222222"  # reference lines (knee, roofs, targets) and their labels
GRID = "#E5E5E5"


def resolve_gpu(gpu: GpuSpec | str) -> GpuSpec:
    """A GpuSpec, looked up in the catalog when given by name."""
    return gpu if isinstance(gpu, GpuSpec) else get_gpu(gpu)


def resolve_model(model: ModelSpec | str) -> ModelSpec:
    """A ModelSpec, looked up in the catalog when given by name."""
    return model if isinstance(model, ModelSpec) else get_model(model)


def finite(values: Iterable[float]) -> np.ndarray:
    """Values as a float array; ValueError if any is NaN or infinite (a chart must not hide it)."""
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError("chart data contains NaN or infinite values")
    return arr


# Pixels at the top of a figure left to plotly's toolbar: its box runs from 2 to 28 px below the
# figure's top (measured in headless Chromium, streamlit 1.67.0, on a 390 px phone and a desktop).
MODEBAR_BAND_PX = 30
# How far below the plot a legend starts, px: one row of tick labels and the axis title (a
# 520-px chart's 20% of its plot was 47 px, and the legend touched the title).
LEGEND_DROP_PX = 60
TITLE_FONT_SIZE = FONT_SIZE + 5


def styled(fig: go.Figure, title: str, *, height: int = 560, legend: bool = True) -> go.Figure:
    """Apply the PD Lab style: theme font, title top left, legend in rows below the plot.

    Below, not above: in a half-width column a long legend wraps onto several rows, and above
    the plot those rows grew upwards into the title.

    The title starts MODEBAR_BAND_PX down: plotly's toolbar (zoom, pan, download) sits in the
    figure's top right corner, and on a phone, where a title spans the whole width, it covered
    the title's end whenever a tap showed it.
    """
    bottom = 190 if legend else 80
    plot_px = max(height - (66 + MODEBAR_BAND_PX) - bottom, 1)
    fig.update_layout(
        template="plotly_white",
        font={"family": FONT_FAMILY, "size": FONT_SIZE, "color": INK},
        title={
            "text": title,
            "x": 0.01,
            "xanchor": "left",
            # plotly sets a two-line title's first BASELINE at y (its lines carry their own y, so
            # yanchor "top" and a top pad do not move it): one ascent (~0.9 em) below the band.
            "y": 1.0 - (MODEBAR_BAND_PX + 0.9 * TITLE_FONT_SIZE) / height,
            "yref": "container",
            "yanchor": "top",
            "font": {"size": TITLE_FONT_SIZE},
        },
        height=height,
        margin={"l": 90, "r": 40, "t": 66 + MODEBAR_BAND_PX, "b": bottom},
        showlegend=legend,
        legend={
            "orientation": "h",
            "x": 0.0,
            "xanchor": "left",
            # below the tick labels and the axis title (LEGEND_DROP_PX), however short the plot
            "y": -max(0.2, LEGEND_DROP_PX / plot_px),
            "yref": "paper",
            "yanchor": "top",
            "bgcolor": "rgba(255,255,255,0.85)",
            "font": {"size": FONT_SIZE - 1},
            "traceorder": "normal",
        },
        hoverlabel={"font": {"size": FONT_SIZE}},
    )
    fig.update_xaxes(showline=True, linecolor=OUTLINE, gridcolor=GRID, ticks="outside")
    fig.update_yaxes(showline=True, linecolor=OUTLINE, gridcolor=GRID, ticks="outside")
    return fig


def _ax_x(x: float, log_x: bool) -> float:
    """An x position for an annotation: plotly wants log10(x) on a log axis."""
    return math.log10(x) if log_x else x


def paren_on_own_line(text: str) -> str:
    """'grows ~linearly (memory-bound)' -> 'grows ~linearly<br>(memory-bound)' (Korean labels
    have no space before the parenthesis: '증가 둔화(연산 병목)' -> '증가 둔화<br>(연산 병목)')."""
    head, paren, tail = text.partition("(")
    return f"{head.rstrip()}<br>({tail}" if paren and head.strip() else text


def shade_regions(
    fig: go.Figure,
    knee: float,
    x_min: float,
    x_max: float,
    lang: str,
    *,
    log_x: bool = True,
    compute_from: float | None = None,
    keys: tuple[str, str] = ("charts.region.memory", "charts.region.compute"),
    stagger: bool = False,
    compute_label_low: bool = False,
    wrap: bool = False,
) -> None:
    """Shade [x_min, knee] as memory-bound and [compute_from or knee, x_max] as compute-bound.

    The shapes span every subplot row (yref="paper"); the labels sit just inside the top edge,
    the compute one a line lower with `stagger` (two labels that meet at the knee of a narrow
    chart, e.g. on a 390-px phone, would print over each other), or just inside the bottom edge
    with `compute_label_low` (rising curves fill the top right; the bottom right is free).
    `wrap`: a label's parenthesis on a line of its own, so a label stays within its region on a
    phone. A compute region under a fifth of the axis is narrower than its label, which then
    sits just above the plot over the region's corner. `keys`: their catalog keys.
    """
    knee = min(max(knee, x_min), x_max)
    start = knee if compute_from is None else min(max(compute_from, knee), x_max)
    span = _ax_x(x_max, log_x) - _ax_x(x_min, log_x)
    for kind, key, x0, x1, pos in (
        ("memory", keys[0], x_min, knee, "left"),
        ("compute", keys[1], start, x_max, "right"),
    ):
        if x1 <= x0:
            continue
        fig.add_shape(
            type="rect",
            xref="x",
            yref="paper",
            x0=x0,
            x1=x1,
            y0=0,
            y1=1,
            fillcolor=REGION_FILL[kind],
            line_width=0,
            layer="below",
        )
        # A region under a fifth of the axis is narrower than its label (the decode chart's
        # compute region beyond a knee near its right end): the label goes just above the plot,
        # over the region's corner, instead of across the knee line and the curves.
        narrow = (_ax_x(x1, log_x) - _ax_x(x0, log_x)) < span / 5
        if pos == "left":
            y, yanchor = 0.99, "top"
        elif narrow and span > 0:
            y, yanchor = 1.0, "bottom"
        elif compute_label_low:
            y, yanchor = 0.01, "bottom"
        else:
            y, yanchor = (0.93 if stagger else 0.99), "top"
        fig.add_annotation(
            x=_ax_x(x0 if pos == "left" else x1, log_x),
            xref="x",
            xanchor=pos,
            y=y,
            yref="paper",
            yanchor=yanchor,
            text=f"<b>{paren_on_own_line(t(key, lang)) if wrap else t(key, lang)}</b>",
            showarrow=False,
            align=pos,
            font={"color": REGION_TEXT[kind], "size": FONT_SIZE},
            xshift=6 if pos == "left" else -6,
        )


def knee_line(
    fig: go.Figure,
    knee: float,
    label: str,
    x_min: float,
    x_max: float,
    *,
    log_x: bool = True,
    y: float = 0.76,
    yanchor: str = "middle",
    side: str = "",
) -> None:
    """A dashed vertical line at the knee over all rows, labelled at paper height `y` (anchored
    by `yanchor`) on `side` ("left"/"right"; "" = the roomier side). A chart puts the label
    where its curves are not: the label's white box would hide them."""
    fig.add_shape(
        type="line",
        xref="x",
        yref="paper",
        x0=knee,
        x1=knee,
        y0=0,
        y1=1,
        line={"color": INK, "width": 2, "dash": "dash"},
    )
    lo, hi, at = (_ax_x(v, log_x) for v in (x_min, x_max, knee))
    roomier_right = hi <= lo or (at - lo) / (hi - lo) < 0.6  # unless the line is near the end
    right = side == "right" if side else roomier_right
    fig.add_annotation(
        x=at,
        xref="x",
        y=y,
        yref="paper",
        yanchor=yanchor,
        text=label,
        showarrow=False,
        xanchor="left" if right else "right",
        xshift=6 if right else -6,
        align="left" if right else "right",
        bgcolor="rgba(255,255,255,0.9)",
        font={"size": FONT_SIZE - 1},
    )


def power_of_two_ticks(x_min: float, x_max: float) -> list[int]:
    """Tick values 1, 2, 4, ... covering [x_min, x_max] (for log2-looking axes)."""
    lo = max(0, math.ceil(math.log2(max(x_min, 1)) - 1e-9))
    hi = math.floor(math.log2(max(x_max, 1)) + 1e-9)
    return [2**k for k in range(lo, hi + 1)]


def token_tick_text(value: int) -> str:
    """A power-of-two token count as a short tick label: 512, 1k (= 1024), 32k (= 32768)."""
    return f"{value // 1024}k" if value >= 1024 and value % 1024 == 0 else str(value)


def power_of_two_axis(x_min: float, x_max: float) -> dict:
    """Log x-axis settings with ticks at the powers of two in [x_min, x_max], labelled 1k, 2k."""
    ticks = power_of_two_ticks(x_min, x_max)
    return {
        "type": "log",
        "tickvals": ticks,
        "ticktext": [token_tick_text(v) for v in ticks],
        "range": [math.log10(x_min), math.log10(x_max)],
    }
