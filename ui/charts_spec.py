"""Speculative decoding figures: TPOT against the batch size, speculation off and on.

- `spec_tpot_chart`: mean TPOT (ms, log axis) per batch size, speculation off (dashed) and each
  speculative curve.
- `spec_ratio_chart`: TPOT with speculation / TPOT without, per batch size: below 1 speculation
  pays, above 1 it costs. Where a curve crosses 1 a diamond and a dotted line down to a label
  near the axis mark the crossover (interpolated on log2 of the batch,
  `ui.lesson_setups.crossover_batch`). The lesson's live measurement draws on the same chart.

Tables come in as DataFrames with the columns of `ui.lesson_setups.spec_table` (curve, batch,
tpot_off_ms, tpot_on_ms, ratio); `labels` names each curve id in the page's language. Pure: no
streamlit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.charts_base import INK, finite, styled
from ui.i18n import t
from ui.lesson_setups import crossover_batch
from ui.theme import COLORS, FONT_SIZE

CURVE_COLORS = {
    "high": "#17BECF",  # teal
    "chosen": COLORS["accepted"],  # the visitor's choice, in the accepted tokens' dark blue
    "low": "#8C564B",  # brown
    "live": "#9467BD",  # purple: measured on the live model
    "live_batch": "#4B2A6B",  # dark purple: the live model's whole-batch decode time
    "live_code": "#E377C2",  # pink: the live model on the prompts accepted less often
    "live_code_batch": "#A0306F",  # dark pink: their whole-batch decode time
}
CURVE_DASH = {"live": "dot", "live_batch": "dashdot"}
CURVE_DASH.update(live_code="dot", live_code_batch="dashdot")
PAYS_FILL = "rgba(44, 160, 44, 0.08)"  # below 1: speculation pays (pale green)
COSTS_FILL = "rgba(178, 24, 43, 0.07)"  # above 1: it costs (pale red)


def _log_axis(batches) -> dict:
    """A log x axis over the batch sizes, ticks at most a factor 4 apart and at least 4 apart
    (1, 8, 32, 128, 512): upright labels that do not run into each other on a phone."""
    sizes = sorted({int(b) for b in batches})
    ticks = [sizes[0]]
    for b in sizes[1:]:
        if b >= 4 * ticks[-1] or b == sizes[-1]:
            ticks.append(b)
    if len(ticks) > 2 and ticks[-1] < 4 * ticks[-2]:
        ticks.pop(-2)  # the last size keeps its tick; its neighbour makes room
    lo, hi = sizes[0], sizes[-1]
    return {
        "type": "log",
        "tickvals": ticks,
        "ticktext": [str(b) for b in ticks],
        "tickangle": 0,
        "range": [math.log10(lo) - 0.12, math.log10(hi) + 0.12],
    }


def _curves(table: pd.DataFrame):
    """(curve id, its rows sorted by batch), in the order the table lists the curves."""
    for cid in dict.fromkeys(table["curve"]):
        yield cid, table[table["curve"] == cid].sort_values("batch")


def _line(cid: str, highlight: str | None) -> dict:
    width = 5 if cid == highlight else 3
    return {"color": CURVE_COLORS.get(cid, INK), "width": width, "dash": CURVE_DASH.get(cid)}


def spec_tpot_chart(
    table: pd.DataFrame, labels: dict[str, str], lang: str = "en", highlight: str | None = None
) -> go.Figure:
    """Mean TPOT (ms) vs requests per step: speculation off, and each speculative curve."""
    fig = go.Figure()
    off = table.drop_duplicates("batch").sort_values("batch")
    fig.add_trace(
        go.Scatter(
            x=finite(off["batch"]),
            y=finite(off["tpot_off_ms"]),
            name=labels["off"],
            mode="lines+markers",
            line={"color": INK, "width": 3, "dash": "dash"},
            marker={"size": 8},
            hovertemplate=t("charts.spec.hover_tpot", lang) + "<extra>%{fullData.name}</extra>",
        )
    )
    for cid, rows in _curves(table):
        fig.add_trace(
            go.Scatter(
                x=finite(rows["batch"]),
                y=finite(rows["tpot_on_ms"]),
                name=labels[cid],
                mode="lines+markers",
                line=_line(cid, highlight),
                marker={"size": 9},
                hovertemplate=t("charts.spec.hover_tpot", lang) + "<extra>%{fullData.name}</extra>",
            )
        )
    styled(fig, t("charts.spec.tpot_title", lang), height=520)
    fig.update_xaxes(title_text=t("charts.spec.axis_batch", lang), **_log_axis(table["batch"]))
    # log: 2.5 vs 6.7 ms at batch 1 and 32 vs 45 ms at 512 both read as the ratio they are
    values = np.concatenate([finite(table["tpot_off_ms"]), finite(table["tpot_on_ms"])])
    ticks = [v * 10**e for e in range(-1, 5) for v in (1, 2, 5)]
    ticks = [v for v in ticks if values.min() / 1.3 <= v <= values.max() * 1.3]
    fig.update_yaxes(
        title_text=t("charts.spec.axis_tpot", lang),
        type="log",
        tickvals=ticks,
        ticktext=[f"{v:g}" for v in ticks],
    )
    return fig


def spec_ratio_chart(
    table: pd.DataFrame,
    labels: dict[str, str],
    lang: str = "en",
    highlight: str | None = None,
    title_key: str = "charts.spec.ratio_title",
    axis_key: str = "charts.spec.axis_ratio",
    region_x: float = 0.01,
    regions_apart: bool = False,
) -> go.Figure:
    """TPOT on / TPOT off vs requests per step; 1 = speculation off; crossovers marked.
    `axis_key`: the y axis's title (the live chart's holds two kinds of ratio); `region_x`:
    where along the line at 1 the regions' names sit (paper x, left-anchored); `regions_apart`:
    the names sit at the top of the upper region and halfway down the lower one instead, clear
    of curves that run close to 1 everywhere (the live measurements)."""
    fig = go.Figure()
    ratios = finite(table["ratio"])
    top = max(1.35, float(ratios.max()) * 1.08)
    bottom = min(0.0, float(ratios.min()))
    # The regions' names sit at the left on either side of the line at 1: small batches leave
    # room there (speculation pays a little or a lot at batch 1), and the crossovers' labels
    # take the bottom.
    for y0, y1, fill, key, anchor in (
        (bottom, 1.0, PAYS_FILL, "charts.spec.pays", "top"),
        (1.0, top, COSTS_FILL, "charts.spec.costs", "bottom"),
    ):
        y, shift = 1.0, -3 if anchor == "top" else 3
        if regions_apart:  # the upper name under the top edge, the lower one mid-region
            y, anchor, shift = (top, "top", -3) if y0 == 1.0 else ((bottom + 1.0) / 2, "middle", 0)
        fig.add_shape(
            type="rect",
            xref="paper",
            yref="y",
            x0=0,
            x1=1,
            y0=y0,
            y1=y1,
            fillcolor=fill,
            line_width=0,
            layer="below",
        )
        fig.add_annotation(
            x=region_x,
            xref="paper",
            xanchor="left",
            y=y,
            yref="y",
            yanchor=anchor,
            yshift=shift,
            text=f"<b>{t(key, lang)}</b>",
            showarrow=False,
            font={"size": FONT_SIZE - 1, "color": INK},
        )
    fig.add_hline(y=1.0, line={"color": INK, "width": 2, "dash": "dash"})
    crossings = []
    for cid, rows in _curves(table):
        batches, curve = rows["batch"].tolist(), rows["ratio"].tolist()
        fig.add_trace(
            go.Scatter(
                x=finite(batches),
                y=finite(curve),
                name=labels[cid],
                mode="lines+markers",
                line=_line(cid, highlight),
                marker={"size": 9},
                hovertemplate=t("charts.spec.hover_ratio", lang)
                + "<extra>%{fullData.name}</extra>",
            )
        )
        at = crossover_batch(batches, curve)
        if at is not None and at > min(batches):
            crossings.append((cid, at))
    for i, (cid, at) in enumerate(crossings):
        color = CURVE_COLORS.get(cid, INK)
        fig.add_shape(  # from the crossing down to the axis, where its label sits
            type="line",
            xref="x",
            yref="y",
            x0=at,
            x1=at,
            y0=bottom,
            y1=1.0,
            line={"color": color, "width": 2, "dash": "dot"},
        )
        fig.add_trace(
            go.Scatter(
                x=[at],
                y=[1.0],
                mode="markers",
                marker={
                    "symbol": "diamond",
                    "size": 16,
                    "color": CURVE_COLORS.get(cid, INK),
                    "line": {"color": "#FFFFFF", "width": 2},
                },
                showlegend=False,
                hovertemplate=t("charts.spec.crossover", lang, batch=at) + "<extra></extra>",
            )
        )
        fig.add_annotation(  # low in the plot: the curves run above it at every batch
            x=math.log10(at),
            y=0.04 + 0.09 * i,  # one above the other when several curves cross
            yref="paper",
            yanchor="bottom",
            text=f"<b>{t('charts.spec.crossover', lang, batch=at)}</b>",
            showarrow=False,
            bgcolor="rgba(255,255,255,0.9)",
            font={"size": FONT_SIZE, "color": color},
        )
    styled(fig, t(title_key, lang), height=520)
    fig.update_xaxes(title_text=t("charts.spec.axis_batch", lang), **_log_axis(table["batch"]))
    fig.update_yaxes(title_text=t(axis_key, lang), range=[bottom, top])
    return fig
