"""Animated per-request Gantt timelines: one row per request, one colour per phase, a time cursor.

`timeline_figure(runs)` stacks one subplot per run (same requests, different policies) over one
shared time axis, and animates a cursor through all of them with plotly frames: Play at 0.5x,
1x, 2x and 4x, Pause, and a slider to scrub. Pure function of its inputs (no streamlit), so a page
can cache the figure with st.cache_data keyed by the run parameters and the language.

Notable features
- Two designs, chosen by size from measured browser frame rates (bench/bench_gantt_fps.py):
  "clip" (total bars <= CLIP_MAX_BARS): every frame carries every bar with width
  max(0, min(end, t) - start), so bars grow; frames also update a per-request "12 tok" counter at
  the right edge while there are at most MAX_TOKEN_ROWS rows, each TOKEN_ROW_PX px or taller.
  "cursor" (bigger): the bars are drawn once and frames carry only layout, a paper-coloured mask
  over [t, t_end] in each subplot plus the cursor line, so bars appear to grow while each frame
  is a few hundred bytes and plotly recomputes no bar.
  Measured in headless chromium on a busy 2-CPU machine: 1,039 bars "clip" still plays 1x at
  30 frames/s with room to spare (~50/s at most), so the threshold stays at 1,000 bars.
- One bar trace per phase per subplot (decode slowed by a prefill is a hatched decode), always
  present even when empty, so every frame has the same trace structure; legend entries appear
  once, in theme order, and toggle the phase in every subplot (legendgroup).
- Rows thinner than MERGE_ROW_PX pixels (hundreds of requests) draw each request's back-to-back
  segments of one kind as one bar: a hatch or a 10-ms stretch is invisible there anyway, and a
  1,000-request run drops from 10,000-40,000 bars to about 3,000.
- A readout above each subplot follows the cursor: queue length, running batch, KV in use (summed
  over the run's workers) and output tokens so far; numbers from `ui.gantt_frames`.
- Frames are plain dicts of numpy arrays (plotly ships them as base64 typed arrays); widths are
  float32 to halve the JSON. Building a 1,000-request figure takes about 0.2 s.
- Hovering a masked (future) bar still shows it: shapes do not block hover events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import plotly.graph_objects as go

from sim.core.trace import RunResult
from ui import gantt_frames as gf
from ui import gantt_layout as gl
from ui.gantt_frames import TRACE_PHASES, frame_times
from ui.gantt_traces import bar_trace
from ui.i18n import t
from ui.labels import request_row
from ui.theme import FONT_SIZE, OUTLINE

__all__ = [
    "CLIP_MAX_BARS",
    "choose_design",
    "frame_times",
    "static_timeline_figure",
    "timeline_figure",
]

Design = Literal["clip", "cursor"]
CLIP_MAX_BARS = 1000  # above this many bars (all subplots together) frames carry layout only
MAX_TOKEN_ROWS = 40  # per-request token counters only while every subplot has at most this
TOKEN_ROW_PX = 16  # ... and while rows are at least this tall (px), so counters never overlap
MERGE_ROW_PX = 5  # rows thinner than this (px) draw back-to-back segments as one bar
MERGE_FINE_ROWS = 60  # up to this many rows, a merged row's hatching is drawn per 1/200 of time
CACHED_BAND = 0.35  # height of the cached band, as a share of a row (it sits on the prefill bar)
# The cached band's least drawn length, as a share of the time axis (5-15 px): a cache
# hit takes no time of its own (it rides on the prefill step it shortened), so its band would be
# a pixel wide where a lesson asks students to find it. Hover still gives its real times.
CACHED_LEAST = 0.02


@dataclass(frozen=True)
class _Panel:
    """One subplot: a labelled run, its request rows and its bars per phase."""

    label: str
    run: RunResult
    ids: np.ndarray  # request ids, top to bottom
    rows: list[str]  # their row labels
    bars: dict[str, gf.Bars]


def choose_design(total_bars: int) -> Design:
    """'clip' for small figures, 'cursor' above CLIP_MAX_BARS bars (see the module docstring)."""
    return "clip" if total_bars <= CLIP_MAX_BARS else "cursor"


def _panels(
    runs: Sequence[tuple[str, RunResult]],
    height: int | None,
    lang: str = "en",
    show: np.ndarray | None = None,
    marks: dict[int, str] | None = None,
    floor: int = gl.MIN_PLOT_PX,
) -> list[_Panel]:
    """The subplots, in the order given; rows thinner than MERGE_ROW_PX get merged bars.
    Request rows are named in `lang` (R0, 요청 0); a marked row's label starts with its tag.
    `show`: the request ids to draw (a zoom, ui.gantt_rows); the readouts keep the whole run."""
    if not runs:
        raise ValueError("timeline_figure needs at least one (label, run)")
    ids = [gf.request_ids(run) for _, run in runs]
    if show is not None:
        ids = [np.intersect1d(i, np.asarray(show, dtype=np.int64)) for i in ids]
    plot_px = gl.geometry([len(i) for i in ids], height, 0, 0, floor).plot_px
    marks = marks or {}

    def name(i: int) -> str:
        row = request_row(i, lang)
        return f"{marks[i]} {row}" if i in marks else row

    panels = []
    for (label, run), row_ids, px in zip(runs, ids, plot_px, strict=True):
        merge = px / max(len(row_ids), 1) < MERGE_ROW_PX
        rows = [name(i) for i in row_ids.tolist()]
        only = row_ids if show is not None else None
        bins = gf.MERGE_BINS if len(row_ids) <= MERGE_FINE_ROWS else gf.MERGE_BINS_MANY_ROWS
        bars = gf.split_bars(run, merge=merge, label=name, only=only, bins=bins)
        panels.append(_Panel(str(label), run, row_ids, rows, bars))
    return panels


def _token_labels(counts: np.ndarray, lang: str) -> list[str]:
    """'12 tok' per row from a vector of token counts."""
    return [t("gantt.request_tokens", lang, n=int(n)) for n in counts]


def _at_least(widths: np.ndarray, least: float) -> np.ndarray:
    """Bar widths (s) with every bar already begun drawn at least `least` long (CACHED_LEAST)."""
    return np.where(widths > 0, np.maximum(widths, least), widths).astype(np.float32)


def _readout_text(readout: gf.Readout, k: int, lang: str) -> str:
    """The readout line of frame k."""
    return t(
        "gantt.readout",
        lang,
        queue=int(readout.queue[k]),
        running=int(readout.running[k]),
        kv=100.0 * float(readout.kv_fraction[k]),
        tokens=int(readout.tokens[k]),
    )


def _figure_dict(
    panels: list[_Panel],
    lang: str,
    t_end: float,
    height: int | None,
    times: np.ndarray,
    design: Design,
    marks: dict[int, str] | None = None,
    floor: int = gl.MIN_PLOT_PX,
) -> dict:
    """The whole figure as plain dicts: data at t_end, layout, frames and controls."""
    rows = [len(p.rows) for p in panels]
    plot_px = gl.geometry(rows, height, 0, 0, floor).plot_px  # margins do not change these
    row_px = min(px / max(n, 1) for px, n in zip(plot_px, rows, strict=True))
    show_tokens = design == "clip" and max(rows) <= MAX_TOKEN_ROWS and row_px >= TOKEN_ROW_PX
    token_font = min(FONT_SIZE - 2, int(row_px) - 1)  # px: one line per row, no overlap
    longest = max((gl.text_width(row) for p in panels for row in p.rows), default=2.0)
    geo = gl.geometry(rows, height, gl.left_margin(longest), 100 if show_tokens else 24, floor)
    first_panel: dict[
        str, int
    ] = {}  # phase -> index of the first subplot that has bars of it (legend once)
    for i, p in enumerate(panels):
        for phase in TRACE_PHASES:
            if len(p.bars[phase]):
                first_panel.setdefault(phase, i)

    data: list[dict] = []
    token_counts: list[np.ndarray] = []  # per subplot: (rows, frames) tokens emitted so far
    for i, p in enumerate(panels):
        axes = gl.axis_refs(i)
        row_px = geo.plot_px[i] / max(len(p.rows), 1)
        width = 0.8 if row_px >= 4 else 1.0  # sub-4-px rows: no gap, or they look striped
        for phase in TRACE_PHASES:
            shown = first_panel.get(phase) == i
            band = {}
            if phase == "cached":
                drawn = _at_least(gf.full_widths(p.bars[phase]), CACHED_LEAST * t_end)
                band = {"width": CACHED_BAND, "offset": -width / 2, "x": drawn}
            extra = {"width": width, **band}
            data.append(bar_trace(p.bars[phase], phase, lang, axes, showlegend=shown, **extra))
        if show_tokens:
            counts = gf.tokens_per_request(p.run, p.ids, times)
            token_counts.append(counts)
            data.append(
                {
                    "type": "scatter",
                    "mode": "text",
                    "x": np.full(len(p.rows), t_end),
                    "y": p.rows,
                    "text": _token_labels(counts[:, -1], lang),
                    "textposition": "middle right",
                    "cliponaxis": False,
                    "showlegend": False,
                    "hoverinfo": "skip",
                    "textfont": {"size": token_font, "color": OUTLINE},
                    "xaxis": axes[0],
                    "yaxis": axes[1],
                }
            )

    readouts = [gf.readout(p.run, times) for p in panels]
    titles = [gl.title_annotation(p.label, i, geo.margin["l"]) for i, p in enumerate(panels)]
    marked = [[k for k, rid in enumerate(p.ids.tolist()) if rid in (marks or {})] for p in panels]
    bands = [gl.mark_shape(i, k) for i, rows_i in enumerate(marked) for k in rows_i]

    def layout_at(k: int) -> dict:
        """Shapes and annotations of frame k: all of them, readouts first, then run labels."""
        shapes = [gl.mask_shape(i, times[k], t_end) for i in range(len(panels))]
        shapes = bands + (shapes if design == "cursor" else []) + [gl.cursor_shape(times[k])]
        notes = [
            gl.readout_annotation(_readout_text(r, k, lang), i, geo.margin["r"] - 4)
            for i, r in enumerate(readouts)
        ]
        return {"shapes": shapes, "annotations": notes + titles}

    decimals = gf.time_decimals(t_end, len(times))
    names = [str(k) for k in range(len(times))]
    labels = [t("gantt.slider", lang, t=f"{x:.{decimals}f}") for x in times]
    last = len(times) - 1
    layout = gl.base_layout(geo)
    always = [{p.rows[k] for k in rows_i} for p, rows_i in zip(panels, marked, strict=True)]
    layout.update(gl.axes([p.rows for p in panels], geo, t_end, t("gantt.axis.time", lang), always))
    layout.update(layout_at(last))
    layout.update(
        gl.controls(names, labels, geo, t("gantt.play", lang), t("gantt.pause", lang), last)
    )
    return {
        "data": data,
        "layout": layout,
        "frames": _frames(panels, design, times, names, layout_at, token_counts, lang),
    }


def _frames(
    panels: list[_Panel],
    design: Design,
    times: np.ndarray,
    names: list[str],
    layout_at: Callable[[int], dict],
    token_counts: list[np.ndarray],
    lang: str,
) -> list[dict]:
    """One frame per time: layout only ('cursor'), or every bar's clipped width too ('clip')."""
    if design == "cursor":
        return [{"name": name, "layout": layout_at(k)} for k, name in enumerate(names)]
    widths = [  # per subplot, per phase: (frames, bars) array of clipped widths
        [gf.clip_widths(p.bars[phase].start, p.bars[phase].end, times) for phase in TRACE_PHASES]
        for p in panels
    ]
    cached = TRACE_PHASES.index("cached")
    for per_phase in widths:
        per_phase[cached] = _at_least(per_phase[cached], CACHED_LEAST * float(times[-1]))
    frames = []
    for k, name in enumerate(names):
        data = []  # same order as the figure's traces: each subplot's bars, then its counter
        for i in range(len(panels)):
            data += [{"type": "bar", "x": w[k]} for w in widths[i]]
            if token_counts:
                data.append({"type": "scatter", "text": _token_labels(token_counts[i][:, k], lang)})
        traces = list(range(len(data)))
        frames.append({"name": name, "data": data, "traces": traces, "layout": layout_at(k)})
    return frames


def timeline_figure(
    runs: Sequence[tuple[str, RunResult]],
    lang: str = "en",
    num_frames: int = 120,
    t_end: float | None = None,
    height: int | None = None,
    design: Design | None = None,
    show: Sequence[int] | None = None,
    marks: dict[int, str] | None = None,
    compact: bool = False,
) -> go.Figure:
    """Animated Gantt of one or more labelled runs on a shared time axis (see module docstring).

    t_end: right end of the time axis (s); default the latest segment end over all runs.
    height: figure height (px); default grows with the rows, up to about one screen.
    design: force "clip" or "cursor"; default chosen by the total number of bars.
    show: the request ids whose rows to draw (a zoom: ui.gantt_rows.zoom_rows); default all.
    marks: request id -> a short tag; the row's label starts with it, over a pale band.
    compact: about 640 px in all (a 1280x720 projector screen), unless `height` is given.
    """
    floor = gl.COMPACT_MIN_PLOT_PX if compact else gl.MIN_PLOT_PX
    height = gl.COMPACT_PX if compact and height is None else height
    panels = _panels(runs, height, lang, None if show is None else np.asarray(show), marks, floor)
    end = max(gf.run_end(p.run) for p in panels) if t_end is None else float(t_end)
    end = end if end > 0 else 1.0
    if design is None:
        design = choose_design(sum(len(b) for p in panels for b in p.bars.values()))
    times = frame_times(end, num_frames)
    return go.Figure(_figure_dict(panels, lang, end, height, times, design, marks, floor))


def static_timeline_figure(
    runs: Sequence[tuple[str, RunResult]],
    lang: str = "en",
    t_end: float | None = None,
    height: int | None = None,
) -> go.Figure:
    """The full chart without animation (no frames, controls, cursor or readout): for exports."""
    fig = timeline_figure(runs, lang, num_frames=2, t_end=t_end, height=height, design="cursor")
    titles = fig.layout.annotations[len(runs) :]  # readouts come first, then the run labels
    fig.layout.updatemenus, fig.layout.sliders, fig.layout.shapes = (), (), ()
    fig.layout.annotations = titles
    fig.layout.height -= gl.CONTROLS_PX
    fig.layout.margin.b -= gl.CONTROLS_PX
    fig.frames = ()
    return fig
