"""Layout of the animated Gantt: stacked subplots, pinned axes, cursor shapes and Play controls.

Plain dicts in plotly's layout schema (no plotly import), sized in pixels so that nothing
overlaps on a projector: a legend row on top, a title row above each subplot (run label on the
left, cursor readout on the right), the time axis at the bottom, then a row of Play buttons and
below it a full-width time slider (full width so that scrubbing stays fine-grained even in
Streamlit's narrow centred layout).

Notable features
- Every axis is pinned (`range`, `categoryarray`): plotly does not recompute autorange during an
  animation, so an unpinned axis would freeze at whatever frame 0 showed.
- Row labels are thinned to every k-th request (k in 1, 2, 5, 10, 20, ...) so that at least
  ROW_LABEL_PX pixels separate two labels: 1,000 rows in 660 px read "R0, R50, R100, ...".
- Pixel offsets (controls below the axis, legend above the titles) are converted to paper
  fractions from the computed plot height, because plotly places updatemenus and sliders in
  paper coordinates only. A legend that wraps onto more rows in a narrow page pushes the top
  margin out (plotly's margin autoexpand) instead of covering the first title.
- Speeds: plotly plays at most one frame per browser animation tick (~60 per second), so 0.5x,
  1x and 2x play every frame at 15, 30 and 60 frames/s, and 4x plays every second frame at 60/s.
  Plotly's "fromcurrent" resumes only from a frame in the played list, so 4x started while paused
  on an odd frame restarts from the beginning.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass

from ui.theme import CURSOR, FONT_FAMILY, FONT_SIZE, MARK, OUTLINE

PAPER = "white"  # paper and plot background; the cursor design's mask is this colour
MODEBAR_PX = 4  # the timelines hide plotly's toolbar (displayModeBar False): a hair of air
LEGEND_PX = 36  # legend row, between the toolbar and the first title
TITLE_PX = 48  # two lines above each subplot: the run label, then the cursor readout (one
# line each, so that on a 390-px phone the label never prints over the readout)
READOUT_PX = 22  # the readout's line, under the label's
GAP_PX = TITLE_PX + 14  # between two subplots
AXIS_PX = 64  # time tick labels + axis title below the last subplot
BUTTONS_PX = 40  # the row of Play/Pause buttons
CONTROLS_PX = BUTTONS_PX + 68  # buttons, then the slider with its current-value label
ROW_PX = 24  # preferred pixels per request row
ROW_LABEL_PX = FONT_SIZE + 6  # minimum pixels between two row labels
PLOTS_PX = 660  # default height of all subplots together: the figure stays near 900 px
COMPACT_PX = 640  # the whole figure in the compact layout: fits a 1280x720 projector screen
MIN_PLOT_PX = 120  # smallest subplot when a height is given ...
COMPACT_MIN_PLOT_PX = 70  # ... and in the compact layout
# speed label -> (frame duration in ms, play every n-th frame); see the module docstring
SPEEDS = {"0.5×": (60, 1), "1×": (30, 1), "2×": (15, 1), "4×": (15, 2)}
NICE_STEPS = (1, 2, 5)


@dataclass(frozen=True)
class Geometry:
    """Pixel layout of the whole figure and the paper-coordinate domain of each subplot."""

    height: int  # px, whole figure
    margin: dict  # px: l, r, t, b
    plot_px: tuple[int, ...]  # px height of each subplot's plot area, top to bottom
    domains: tuple[tuple[float, float], ...]  # paper y domain of each subplot, top to bottom
    area_px: int  # px between the top and bottom margins

    def below(self, px: float) -> float:
        """Paper y of a point `px` pixels below the bottom of the plot area."""
        return -px / self.area_px


def geometry(
    rows: list[int], height: int | None, left_px: int, right_px: int, floor: int = MIN_PLOT_PX
) -> Geometry:
    """Sizes for subplots with `rows` request rows each (proportional when `height` is given,
    each at least `floor` px)."""
    n = len(rows)
    top = MODEBAR_PX + LEGEND_PX + TITLE_PX
    margin = {"l": left_px, "r": right_px, "t": top, "b": AXIS_PX + CONTROLS_PX}
    fixed = margin["t"] + margin["b"] + GAP_PX * (n - 1)
    if height is None:
        cap = max(200, (PLOTS_PX - GAP_PX * (n - 1)) // n)  # keep the figure near one screen
        plot_px = [min(max(r * ROW_PX, 140), cap) for r in rows]
    else:
        share = max(height - fixed, floor * n)
        total_rows = max(sum(rows), 1)
        plot_px = [max(floor, round(share * max(r, 1) / total_rows)) for r in rows]
    area = sum(plot_px) + GAP_PX * (n - 1)
    domains, top = [], 0
    for px in plot_px:
        domains.append((1 - (top + px) / area, 1 - top / area))
        top += px + GAP_PX
    return Geometry(fixed + sum(plot_px), margin, tuple(plot_px), tuple(domains), area)


def label_stride(num_rows: int, plot_px: float) -> int:
    """Label every k-th row, k from 1, 2, 5, 10, 20, 50, ..., so labels never overlap."""
    need = num_rows * ROW_LABEL_PX / max(plot_px, 1.0)  # rows per label, at the least
    scale = 1
    while True:
        for step in NICE_STEPS:
            if step * scale >= need:
                return step * scale
        scale *= 10


def axis_names(i: int) -> tuple[str, str]:
    """Layout keys of subplot i's axes: ("xaxis", "yaxis"), ("xaxis2", "yaxis2"), ..."""
    suffix = "" if i == 0 else str(i + 1)
    return f"xaxis{suffix}", f"yaxis{suffix}"


def axis_refs(i: int) -> tuple[str, str]:
    """Trace references to subplot i's axes: ("x", "y"), ("x2", "y2"), ..."""
    suffix = "" if i == 0 else str(i + 1)
    return f"x{suffix}", f"y{suffix}"


def axes(
    rows: list[list[str]],
    geo: Geometry,
    t_end: float,
    time_title: str,
    always: list[set[str]] | None = None,
) -> dict:
    """Pinned axes of every subplot: one shared time range, one category row per request.
    Row labels are thinned (label_stride), except those in `always[i]` (marked rows)."""
    layout = {}
    last = len(rows) - 1
    for i, labels in enumerate(rows):
        xname, yname = axis_names(i)
        xref, yref = axis_refs(i)
        layout[xname] = {
            "anchor": yref,
            "domain": [0, 1],
            "range": [0, t_end],
            "autorange": False,
            "showticklabels": i == last,
            "ticks": "outside",
            "gridcolor": "#E6E6E6",
            "zeroline": False,
            "title": {"text": time_title if i == last else "", "standoff": 8},
        }
        if i:
            layout[xname]["matches"] = "x"  # zooming one subplot zooms all: a shared clock
        stride = label_stride(len(labels), geo.plot_px[i])
        layout[yname] = {
            "anchor": xref,
            "domain": list(geo.domains[i]),
            "type": "category",
            "categoryorder": "array",
            "categoryarray": labels,
            "autorange": False,
            "range": [len(labels) - 0.5, -0.5],  # R0 on top
            "tickmode": "array",
            "showgrid": False,
            **_ticks(labels, stride, geo.plot_px[i], always[i] if always else set()),
        }
    return layout


def _ticks(labels: list[str], stride: int, plot_px: float, marked: set[str]) -> dict:
    """tickvals/ticktext: every `stride`-th row, and the marked rows in bold and colour, never
    two labels closer than ROW_LABEL_PX (a marked row wins over a plain one next to it)."""
    gap = math.ceil(ROW_LABEL_PX / max(plot_px / max(len(labels), 1), 1e-9))  # rows per label
    kept: list[int] = []
    for k, label in enumerate(labels):  # marked rows first, spaced out
        if label in marked and all(abs(k - j) >= gap for j in kept):
            kept.append(k)
    chosen = set(kept)
    for k in range(0, len(labels), stride):
        if all(abs(k - j) >= gap for j in kept):
            chosen.add(k)
    order = sorted(chosen)
    text = [f"<b>{labels[k]}</b>" if labels[k] in marked else labels[k] for k in order]
    return {"tickvals": [labels[k] for k in order], "ticktext": text}


def base_layout(geo: Geometry) -> dict:
    """Fonts, colours, legend and bar mode shared by both designs."""
    return {
        "height": geo.height,
        "margin": geo.margin,
        "barmode": "overlay",
        "bargap": 0.2,
        "font": {"family": FONT_FAMILY, "size": FONT_SIZE, "color": "#222222"},
        "paper_bgcolor": PAPER,
        "plot_bgcolor": PAPER,
        "hovermode": "closest",
        "hoverlabel": {"font": {"size": FONT_SIZE}},
        "legend": {
            "orientation": "h",
            "x": 0,
            "xanchor": "left",
            "y": 1 + TITLE_PX / geo.area_px,
            "yanchor": "bottom",
            "traceorder": "normal",
            "itemclick": "toggle",
        },
    }


def title_annotation(label: str, i: int, left_px: int = 0) -> dict:
    """The run label above subplot i, on the line above the readout's, starting at the figure's
    left edge (over the row labels: a long label has the whole width on a phone)."""
    xref, yref = axis_refs(i)
    return {
        "text": f"<b>{label}</b>",
        "x": 0,
        "xref": f"{xref} domain",
        "xanchor": "left",
        "y": 1,
        "xshift": 4 - left_px,
        "yref": f"{yref} domain",
        "yanchor": "bottom",
        "yshift": 2 + READOUT_PX,
        "showarrow": False,
        "font": {"size": FONT_SIZE + 1},
    }


def readout_annotation(text: str, i: int, right_px: int = 0) -> dict:
    """The cursor readout, right-aligned just above subplot i, under the run label's line (its
    text changes per frame).

    Axis-referenced on purpose: with redraw=False plotly redraws only the annotations and shapes
    that refer to an axis; a paper-referenced readout would keep its first text.
    """
    xref, yref = axis_refs(i)
    return {
        "text": text,
        "x": 1,
        "xref": f"{xref} domain",
        "xanchor": "right",
        "y": 1,
        "xshift": right_px,  # to the figure's right edge: the most room on a phone
        "yref": f"{yref} domain",
        "yanchor": "bottom",
        "yshift": 2,
        "showarrow": False,
        "bgcolor": PAPER,
        "font": {"size": FONT_SIZE - 1, "color": OUTLINE},
    }


def cursor_shape(t: float) -> dict:
    """The time cursor: one vertical line at t (s) through every subplot."""
    return {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": t,
        "x1": t,
        "y0": 0,
        "y1": 1,
        "line": {"color": CURSOR, "width": 2},
        "layer": "above",
    }


def mark_shape(i: int, row: int) -> dict:
    """A pale band behind row `row` (0 = top) of subplot i: a request the lesson talks about."""
    xref, yref = axis_refs(i)
    return {
        "type": "rect",
        "xref": f"{xref} domain",
        "yref": yref,
        "x0": 0,
        "x1": 1,
        "y0": row - 0.5,
        "y1": row + 0.5,
        "fillcolor": MARK,
        "line": {"width": 0},
        "layer": "below",
    }


def mask_shape(i: int, t: float, t_end: float) -> dict:
    """A paper-coloured rectangle over subplot i from t to t_end: the future, not yet drawn."""
    xref, yref = axis_refs(i)
    return {
        "type": "rect",
        "xref": xref,
        "yref": f"{yref} domain",
        "x0": t,
        "x1": t_end,
        "y0": -0.005,
        "y1": 1.005,  # a hair beyond the plot area: no anti-aliased bar edges
        "fillcolor": PAPER,
        "line": {"width": 0},
        "layer": "above",
    }


def controls(
    names: list[str], labels: list[str], geo: Geometry, play: str, pause: str, active: int
) -> dict:
    """Play buttons (one per speed), Pause, and a slider with one step per frame."""
    still = {"duration": 0, "redraw": False}
    buttons = []
    for speed, (duration_ms, every) in SPEEDS.items():
        chosen = None if every == 1 else names[::every]  # None = all frames
        if chosen is not None and chosen[-1] != names[-1]:
            chosen.append(names[-1])  # always end on the full chart
        opts = {
            "frame": {"duration": duration_ms, "redraw": False},
            "fromcurrent": True,
            "transition": {"duration": 0},
            "mode": "immediate",
        }
        buttons.append(
            {"label": play.format(speed=speed), "method": "animate", "args": [chosen, opts]}
        )
    buttons.append(
        {
            "label": pause,
            "method": "animate",
            "args": [[None], {"mode": "immediate", "frame": still, "transition": {"duration": 0}}],
        }
    )
    # Right-aligned at the figure's right edge (a negative pad moves it over the right margin,
    # where the token counters are, empty below the axis), reaching left over the row labels'
    # margin as far as it needs: all five buttons fit a 390-px phone, whatever the margins.
    menu = {
        "type": "buttons",
        "direction": "left",
        "showactive": False,
        "x": 1,
        "xanchor": "right",
        "y": geo.below(AXIS_PX),
        "yanchor": "top",
        "buttons": buttons,
        "pad": {"t": 0, "r": -max(geo.margin["r"] - 4, 0)},
        "font": {"size": FONT_SIZE - 3},  # five buttons fit a 390-px phone, Pause included
    }
    steps = [
        {
            "label": label,
            "method": "animate",
            "args": [[name], {"mode": "immediate", "frame": still, "transition": {"duration": 0}}],
        }
        for name, label in zip(names, labels, strict=True)
    ]
    slider = {
        "active": active,
        "steps": steps,
        "x": 0,
        "len": 1,
        "xanchor": "left",
        "y": geo.below(AXIS_PX + BUTTONS_PX),
        "yanchor": "top",
        "pad": {"l": 0, "t": 0, "r": 10},
        "currentvalue": {
            "visible": True,
            "prefix": "",
            "xanchor": "left",
            "font": {"size": FONT_SIZE, "color": "#222222"},
        },
        "font": {"color": "rgba(0,0,0,0)"},  # hide the per-step tick labels (they would pile up)
        "ticklen": 3,
        "minorticklen": 0,
        "transition": {"duration": 0},
    }
    return {"updatemenus": [menu], "sliders": [slider]}


def text_width(text: str) -> float:
    """Width of `text` in characters of a Latin font: a Hangul or other wide (CJK) character
    counts as 1.6, about its width (1 em) over a Latin character's (0.62 em)."""
    return sum(1.6 if unicodedata.east_asian_width(c) in "WF" else 1.0 for c in text)


def left_margin(longest_label: float) -> int:
    """Left margin (px) wide enough for the longest row label at FONT_SIZE (its `text_width`)."""
    return max(60, math.ceil(longest_label * FONT_SIZE * 0.62) + 22)
