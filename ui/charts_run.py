"""Run charts: what one simulated or live run did with its memory and its GPUs (C11, C10c, C12).

Notable features
- `kv_use` plots each worker's KV cache fill (% of its capacity) as a step function, with the
  moments the engine preempted requests (C11: a new prefill needed KV space at once) and the
  steps that swapped KV to or from host memory.
- `worker_utilisation_bars` splits each worker's share of the run into compute-bound,
  bandwidth-bound and overhead time, so the P-vs-D imbalance of disaggregation is visible
  (the prefill worker saturates first, C10c).
- `tokens_in_window_bars` puts the tokens each request received in a time window side by side
  for several runs (C12: 9/4/3 colocated vs 22/12/6 disaggregated in the seed's example).
- Workers are coloured by role: prefill workers orange, decode workers blue (the phase colours),
  colocated instances in neutral series colours.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim.core.trace import RunResult
from sim.runs.gpu_time import kv_use_over_time, worker_utilisation
from ui.charts_base import BOUND_COLORS, INK, SERIES_COLORS, finite, paren_on_own_line, styled
from ui.i18n import t
from ui.theme import COLORS, FONT_SIZE

# Bars of compared runs: a neutral grey for the first (usually the baseline), then blue, ...
COMPARE_COLORS = ("#9E9E9E", COLORS["decode"], "#17BECF", "#8C564B", "#BCBD22")


def _roles(run: RunResult) -> dict[str, str]:
    """Worker name -> role ("colocated" | "prefill" | "decode") from run.meta["workers"]."""
    workers = run.meta.get("workers") or {}
    return {str(name): str(info.get("role", "colocated")) for name, info in workers.items()}


def _worker_colors(names: list[str], roles: dict[str, str]) -> dict[str, str]:
    """Prefill workers orange, decode workers blue, others the neutral series colours in turn."""
    colors, i = {}, 0
    for name in names:
        role = roles.get(name, "colocated")
        if role in ("prefill", "decode"):
            colors[name] = COLORS[role]
        else:
            colors[name] = SERIES_COLORS[i % len(SERIES_COLORS)]
            i += 1
    return colors


def _worker_label(name: str, roles: dict[str, str], lang: str) -> str:
    """'P0 (prefill)' style label, the role translated; a colocated instance ("I0", the
    simulator's id) reads as "server 0 (colocated)", not as a raw id."""
    instance = re.fullmatch(r"I(\d+)", name)
    if instance:
        name = t("charts.instance", lang, n=instance[1])
    return t(
        "charts.worker",
        lang,
        name=name,
        role=t(f"charts.role.{roles.get(name, 'colocated')}", lang),
    )


def kv_use(run: RunResult, lang: str = "en") -> go.Figure:
    """KV in use (%) = kv_used_tokens / kv_capacity_tokens per worker over time (s), steps-post."""
    table = kv_use_over_time(run).dropna(subset=["fraction"])
    steps = run.steps
    roles = _roles(run)
    names = list(dict.fromkeys(table["worker"]))  # workers in order of appearance
    colors = _worker_colors(names, roles)
    fig = go.Figure()
    for name in names:
        rows = table[table["worker"] == name]
        own = steps[steps["worker"].astype(str) == name]
        # Hold the last value until the last step ends, so the line covers the whole run.
        x = np.append(finite(rows["t_s"]), float(own["end_s"].max()))
        y = 100 * np.append(finite(rows["fraction"]), float(rows["fraction"].iloc[-1]))
        used = np.append(rows["kv_used_tokens"].to_numpy(), rows["kv_used_tokens"].iloc[-1])
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                name=_worker_label(name, roles, lang),
                mode="lines",
                line={"color": colors[name], "width": 3, "shape": "hv"},
                customdata=used,
                hovertemplate=t("label.hover.kv_use", lang) + "<extra>%{fullData.name}</extra>",
            )
        )
    marks = (
        ("preempted", steps["preempted"] > 0, "x", COLORS["preempted"], "charts.kv.preempted"),
        ("swap_s", steps["swap_s"] > 0, "triangle-up", COLORS["kv_transfer"], "charts.kv.swap"),
    )
    for column, mask, symbol, color, key in marks:
        hits = steps[mask]
        if hits.empty:
            continue
        fraction = hits["kv_used_tokens"] / hits["kv_capacity_tokens"].replace(0, np.nan)
        keep = fraction.notna()
        total = float(hits[column].sum())
        fig.add_trace(
            go.Scatter(
                x=finite(hits.loc[keep, "start_s"]),
                y=100 * finite(fraction[keep]),
                name=t(key, lang, count=int(total), ms=1000 * total),
                mode="markers",
                marker={
                    "symbol": symbol,
                    "size": 13,
                    "color": color,
                    "line": {"color": INK, "width": 1},
                },
                customdata=finite(hits.loc[keep, column] * (1000 if column == "swap_s" else 1)),
                hovertemplate=t("label.hover.time_value", lang) + "<extra>%{fullData.name}</extra>",
            )
        )
    fig.add_hline(
        y=100,
        line={"color": INK, "width": 2, "dash": "dash"},
        annotation_text=t("charts.kv.capacity", lang),
        annotation_position="bottom right",
        annotation_font_size=FONT_SIZE - 1,
    )
    styled(fig, t("charts.kv.title", lang))
    fig.update_xaxes(rangemode="tozero", title_text=t("charts.axis.time_s", lang))
    fig.update_yaxes(range=[0, 110], title_text=t("charts.axis.kv_pct", lang))
    return fig


def worker_utilisation_bars(run: RunResult, lang: str = "en") -> go.Figure:
    """Per worker, % of the run = busy_share·{compute, bandwidth, other}_share·100, stacked."""
    util = worker_utilisation(run)
    roles = _roles(run)
    # 'P0<br>(prefill)': on one line plotly tilts them on a phone, onto the axis title
    labels = [paren_on_own_line(_worker_label(str(w), roles, lang)) for w in util["worker"]]
    busy = util["busy_share"].fillna(0.0).to_numpy(dtype=float)
    compute = busy * util["compute_share"].fillna(0.0).to_numpy(dtype=float)
    bandwidth = busy * util["bandwidth_share"].fillna(0.0).to_numpy(dtype=float)
    parts = {
        "compute": compute,
        "memory": bandwidth,
        "overhead": np.clip(busy - compute - bandwidth, 0.0, None),  # overhead + TP comm
    }
    fig = go.Figure()
    for kind, share in parts.items():
        fig.add_trace(
            go.Bar(
                x=labels,
                y=100 * finite(share),
                name=t(f"charts.util.{kind}", lang),
                marker={"color": BOUND_COLORS[kind], "line": {"color": INK, "width": 0.5}},
                hovertemplate="%{x}: %{y:.1f}%<extra>%{fullData.name}</extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=labels,
            y=100 * finite(busy) + 1.5,  # just above the bar's top edge
            mode="text",
            text=[t("charts.util.busy", lang, pct=100 * b) for b in busy],
            textposition="top center",
            textfont={"size": FONT_SIZE, "color": INK},
            cliponaxis=False,  # (on a phone "busy 64%" is wider than the first bar's slot)
            showlegend=False,
            hoverinfo="skip",
        )
    )
    styled(fig, t("charts.util.title", lang))
    fig.update_layout(barmode="stack", bargap=0.45)
    top = max(100.0, float(100 * busy.max(initial=0.0)))
    fig.update_yaxes(range=[0, top * 1.12], title_text=t("charts.axis.run_pct", lang))
    # No axis title: the labels name the workers, and on a phone a title line under their two
    # lines ran into the legend.
    fig.update_xaxes(tickangle=0)
    return fig


def tokens_in_window_bars(
    table: pd.DataFrame, lang: str = "en", window_s: tuple[float, float] | None = None
) -> go.Figure:
    """Output tokens per request in a window, grouped bars: one bar per compared run (column)."""
    fig = go.Figure()
    # The key ui.labels.request_label uses too: the Home table names the requests alike.
    requests = [t("charts.tokens.request", lang, id=int(r)) for r in table.index]
    for i, label in enumerate(table.columns):
        values = finite(table[label])
        fig.add_trace(
            go.Bar(
                x=requests,
                y=values,
                name=str(label),
                marker={"color": COMPARE_COLORS[i % len(COMPARE_COLORS)]},
                text=[f"{v:.0f}" for v in values],
                textposition="outside",
                textfont={"size": FONT_SIZE + 1},
                hovertemplate="%{x}: %{y:.0f}<extra>%{fullData.name}</extra>",
            )
        )
    if window_s is None:
        title = t("charts.tokens.title", lang)
    else:
        title = t("charts.tokens.title_window", lang, t0=window_s[0], t1=window_s[1])
    styled(fig, title)
    fig.update_layout(barmode="group", bargap=0.3, bargroupgap=0.08)
    top = float(table.to_numpy(dtype=float).max(initial=0.0)) if table.size else 0.0
    fig.update_yaxes(range=[0, max(1.0, top) * 1.18], title_text=t("charts.axis.tokens", lang))
    fig.update_xaxes(title_text=t("charts.axis.request", lang))
    return fig
