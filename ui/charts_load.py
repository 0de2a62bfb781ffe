"""Load charts: throughput vs concurrency (C3), the chunk-size trade-off (C6), goodput (C10c).

Notable features
- Builders take small tables, so a page can feed them from a scenario, a sweep or a CSV; the
  `*_table` helpers compute those tables from simulated runs.
- `saturation_concurrency` finds, from the data alone, where throughput stops growing
  ~linearly: the first doubling of concurrency that gains less than half of the ideal
  (linear) gain. `throughput_vs_concurrency` shades the region before every curve's boundary
  as memory-bound (adding requests is nearly free) and after every boundary as compute-bound.
- `chunk_tradeoff` draws the TTFT-vs-ITL curve that the chunk size moves along: one labelled
  point per chunk size.
- `goodput_curves` plots SLO attainment against the arrival rate PER GPU, so topologies that
  use different numbers of GPUs compare fairly; each curve's goodput (DistServe: the highest
  rate whose attainment, and every lower rate's, meets the target) is marked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim.core.trace import RunResult
from sim.runs.gpu_time import run_duration_s
from sim.runs.latency import percentiles
from sim.runs.slo import goodput
from ui.charts_base import INK, SERIES_COLORS, finite, power_of_two_ticks, shade_regions, styled
from ui.i18n import t
from ui.theme import COLORS, FONT_SIZE

SATURATION_GAIN = 0.5  # below this share of the ideal linear gain, throughput counts as flat


# ---------------------------------------------------------------------------------------------
# C3: throughput vs concurrency
# ---------------------------------------------------------------------------------------------


def _prompt_and_concurrency(key: object, run: RunResult) -> tuple[int, int]:
    """(prompt_tokens, concurrency) from a (prompt, concurrency) key, else from the run itself:
    the most common prompt length and the config's max_num_seqs."""
    if isinstance(key, tuple) and len(key) == 2:
        return int(key[0]), int(key[1])
    concurrency = (run.meta.get("config") or {}).get("max_num_seqs")
    if concurrency is None or run.requests.empty:
        raise ValueError(
            f"concurrency_table: key {key!r} is not (prompt_tokens, concurrency) and the run "
            "has no requests or no config max_num_seqs to read them from"
        )
    return int(run.requests["prompt_tokens"].mode().iloc[0]), int(concurrency)


def concurrency_table(runs_by_prompt_and_concurrency: Mapping[object, RunResult]) -> pd.DataFrame:
    """Per run: tokens_per_s = (prompt + output tokens of finished requests) / makespan (s).

    Keys are (prompt_tokens, concurrency) pairs; any other key (e.g. a variant label) means
    "read them from the run": its most common prompt length and its config's max_num_seqs.
    Makespan = first arrival to last finish. Also gives output_tokens_per_s. Sorted by prompt
    length (descending), then concurrency.
    """
    rows = []
    for key, run in runs_by_prompt_and_concurrency.items():
        prompt_tokens, concurrency = _prompt_and_concurrency(key, run)
        done = run.requests[run.requests["status"] == "finished"]
        makespan = run_duration_s(run)
        total = float(done["prompt_tokens"].sum() + done["output_tokens"].sum())
        rows.append(
            {
                "prompt_tokens": prompt_tokens,
                "concurrency": concurrency,
                "tokens_per_s": total / makespan if makespan > 0 else math.nan,
                "output_tokens_per_s": (
                    float(done["output_tokens"].sum()) / makespan if makespan > 0 else math.nan
                ),
            }
        )
    columns = ["prompt_tokens", "concurrency", "tokens_per_s", "output_tokens_per_s"]
    table = pd.DataFrame(rows, columns=columns)
    order = table.sort_values(["prompt_tokens", "concurrency"], ascending=[False, True])
    return order.reset_index(drop=True)


def saturation_concurrency(
    concurrency: Sequence[float], tokens_per_s: Sequence[float], gain: float = SATURATION_GAIN
) -> float | None:
    """First concurrency c_i whose step to c_{i+1} gains < `gain` of linear scaling, else None.

    Marginal gain of a step = (tput_{i+1}/tput_i − 1) / (c_{i+1}/c_i − 1): 1.0 when doubling
    the requests doubles the tokens/s (memory-bound: the weights are read once per step for
    everyone), 0.0 when it adds nothing (compute-bound). None = still growing at the last point.
    """
    order = np.argsort(np.asarray(concurrency, dtype=float))
    c = np.asarray(concurrency, dtype=float)[order]
    tput = np.asarray(tokens_per_s, dtype=float)[order]
    for i in range(len(c) - 1):
        if c[i + 1] <= c[i] or tput[i] <= 0:
            continue
        marginal = (tput[i + 1] / tput[i] - 1) / (c[i + 1] / c[i] - 1)
        if marginal < gain:
            return float(c[i])
    return None


def throughput_vs_concurrency(table: pd.DataFrame, lang: str = "en") -> go.Figure:
    """Total tokens/s vs concurrent requests (log2 x), one line per prompt length.

    The boundary of each line comes from `saturation_concurrency` (marginal gain < 50%): it is
    marked with a star. Left of the earliest boundary is shaded memory-bound (throughput still
    grows ~linearly), right of the latest one compute-bound (flat).
    """
    table = table.dropna(subset=["concurrency", "tokens_per_s"])
    fig = go.Figure()
    boundaries: list[float] = []
    prompts = sorted(table["prompt_tokens"].unique(), reverse=True)
    for i, prompt in enumerate(prompts):
        rows = table[table["prompt_tokens"] == prompt].sort_values("concurrency")
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        x, y = finite(rows["concurrency"]), finite(rows["tokens_per_s"])
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                name=t("charts.concurrency.line", lang, prompt=int(prompt)),
                mode="lines+markers",
                line={"color": color, "width": 3},
                marker={"size": 9},
                hovertemplate=t("label.hover.tokens_per_s", lang)
                + "<extra>%{fullData.name}</extra>",
            )
        )
        sat = saturation_concurrency(x, y)
        if sat is None:
            continue
        boundaries.append(sat)
        fig.add_trace(
            go.Scatter(
                x=[sat],
                y=[float(y[x == sat][0])],
                # named in the legend, not beside the star: a label there crossed the other
                # prompt's curve, and two of them ran into each other on a phone
                name=t(
                    "charts.concurrency.saturation_legend", lang, prompt=int(prompt), c=int(sat)
                ),
                mode="markers",
                marker={"symbol": "star", "size": 20, "color": color, "line": {"color": INK}},
                hovertemplate=t("charts.concurrency.saturation_label", lang, c=int(sat))
                + "<extra></extra>",
            )
        )
    x_all = table["concurrency"].astype(float)
    x_min, x_max = (float(x_all.min()), float(x_all.max())) if len(x_all) else (1.0, 2.0)
    lo, hi = x_min / 1.15, x_max * 1.15  # a little room around the first and last points
    if boundaries:
        shade_regions(
            fig,
            min(boundaries),
            lo,
            hi,
            lang,
            compute_from=max(boundaries),
            keys=("charts.concurrency.linear", "charts.concurrency.flat"),
            compute_label_low=True,  # the curves are highest at the right
            wrap=True,
        )
    styled(fig, t("charts.concurrency.title", lang))
    fig.update_xaxes(
        type="log",
        tickvals=power_of_two_ticks(x_min, x_max),
        range=[math.log10(lo), math.log10(hi)],
        title_text=t("charts.axis.concurrency", lang),
    )
    fig.update_yaxes(rangemode="tozero", title_text=t("charts.axis.tokens_per_s", lang))
    return fig


# ---------------------------------------------------------------------------------------------
# C6: chunk size trade-off
# ---------------------------------------------------------------------------------------------


def chunk_tradeoff_table(runs_by_chunk: Mapping[int, RunResult]) -> pd.DataFrame:
    """Per chunk size: TTFT of the longest prompt, max ITL and p99 TPOT of the others (s)."""
    rows = []
    for chunk, run in runs_by_chunk.items():
        req = run.requests[run.requests["status"] == "finished"]
        long_id = req["prompt_tokens"].idxmax()
        others = req.drop(index=long_id)
        rows.append(
            {
                "chunk_size": int(chunk),
                "long_ttft_s": float(req.loc[long_id, "ttft_s"]),
                "max_itl_s": float(others["max_itl_s"].max()),
                "p99_tpot_s": percentiles(others["tpot_s"], (99,))["p99"],
            }
        )
    columns = ["chunk_size", "long_ttft_s", "max_itl_s", "p99_tpot_s"]
    return pd.DataFrame(rows, columns=columns).sort_values("chunk_size").reset_index(drop=True)


def chunk_labels(chunk_sizes, lang: str = "en") -> list[str]:
    """'chunk 256', then '512', '1024', ...: the points sit ~35 px apart on a phone, too close
    for 'chunk 1024' beside 'chunk 2048'; the first label says what the numbers are."""
    sizes = [int(c) for c in chunk_sizes]
    return [
        t("charts.chunk.point", lang, size=s) if i == 0 else str(s) for i, s in enumerate(sizes)
    ]


def chunk_tradeoff(table: pd.DataFrame, lang: str = "en") -> go.Figure:
    """Long prompt's TTFT (s) vs running requests' max ITL (ms), one point per chunk size."""
    table = table.dropna(subset=["max_itl_s", "long_ttft_s"]).sort_values("chunk_size")
    p99 = table["p99_tpot_s"].fillna(0.0) * 1000  # hover only (ms)
    fig = go.Figure(
        go.Scatter(
            x=1000 * finite(table["max_itl_s"]),
            y=finite(table["long_ttft_s"]),
            name=t("charts.chunk.trace", lang),
            mode="lines+markers+text",
            line={"color": INK, "width": 2},
            marker={"size": 16, "color": COLORS["prefill"], "line": {"color": INK, "width": 1}},
            text=chunk_labels(table["chunk_size"], lang),
            # Large chunks' points crowd where the curve flattens: their numbers alternate
            # below and above it, and the last may reach into the right margin.
            textposition=["top right"]
            + ["bottom center" if i % 2 else "top center" for i in range(1, len(table))],
            textfont={"size": FONT_SIZE - 1},
            cliponaxis=False,
            customdata=np.column_stack([finite(p99), table["chunk_size"].to_numpy(dtype=float)]),
            hovertemplate=t("charts.chunk.point", lang, size="%{customdata[1]:.0f}")
            + "<br>"
            + t("label.hover.chunk", lang)
            + "<extra></extra>",
        )
    )
    fig.add_annotation(
        xref="paper",
        yref="paper",
        x=0.99,
        y=0.97,
        xanchor="right",
        yanchor="top",
        align="right",
        showarrow=False,
        text=t("charts.chunk.hint", lang),
        font={"size": FONT_SIZE - 1},
        bgcolor="rgba(255,255,255,0.9)",
    )
    styled(fig, t("charts.chunk.title", lang), legend=False)
    # The TTFT axis starts at 0, so "slightly later" looks as slight as it is. The ITL axis is
    # logarithmic: each chunk size doubles the last, so the worst gap roughly doubles too, and on
    # a linear axis the small chunks' points (and their labels) pile up at the left; room on the
    # right for the last label.
    itl = 1000 * finite(table["max_itl_s"]) if len(table) else np.array([1.0])
    low, high = max(float(np.nanmin(itl)), 1e-3) / 1.5, max(float(np.nanmax(itl)), 1e-3) * 2.0
    ticks = [
        m * 10.0**e
        for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)))
        for m in (1, 2, 5)
        if low <= m * 10.0**e <= high
    ]
    fig.update_xaxes(
        type="log",
        range=[math.log10(low), math.log10(high)],
        tickvals=ticks,  # 10, 20, 50, 100 ms, ... written out, not plotly's bare "2" and "5"
        ticktext=[f"{v:g}" for v in ticks],
        title_text=t("charts.axis.max_itl_ms", lang),
    )
    ttft_max = float(table["long_ttft_s"].max()) if len(table) else 1.0
    # Headroom above the points for the four-line hint in the top right (a phone's narrow plot
    # would otherwise put it over the first point's label).
    fig.update_yaxes(range=[0, ttft_max * 1.45], title_text=t("charts.axis.long_ttft_s", lang))
    return fig


# ---------------------------------------------------------------------------------------------
# C10c: goodput per GPU
# ---------------------------------------------------------------------------------------------


def goodput_curves(
    sweeps: Mapping[str, pd.DataFrame], lang: str = "en", target: float = 0.9
) -> go.Figure:
    """SLO attainment (%) vs arrival rate per GPU = rate_per_s / num_gpus, goodput marked.

    Each curve's goodput per GPU is a star with a dotted drop line to the x-axis; its value is
    written in the legend (curves often share a goodput, and labels on the plot would collide).
    """
    fig = go.Figure()
    x_max = 0.0
    for i, (label, sweep) in enumerate(sweeps.items()):
        rows = sweep.dropna(subset=["rate_per_s", "attainment"]).sort_values("rate_per_s")
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        per_gpu = finite(rows["rate_per_s"] / rows["num_gpus"])
        x_max = max(x_max, float(per_gpu.max(initial=0.0)))
        best = goodput(rows["rate_per_s"], rows["attainment"], target)
        at = rows[rows["rate_per_s"] == best]
        best_per_gpu = best / float(at["num_gpus"].iloc[0]) if best > 0 else 0.0
        # Every rate tried met the target: the goodput is at least the top of the range.
        floor = "_floor" if len(rows) and bool((rows["attainment"] >= target).all()) else ""
        fig.add_trace(
            go.Scatter(
                x=per_gpu,
                y=100 * finite(rows["attainment"]),
                name=t("charts.goodput.line" + floor, lang, label=label, value=best_per_gpu),
                legendgroup=label,
                mode="lines+markers",
                line={"color": color, "width": 3},
                marker={"size": 8},
                hovertemplate=t("label.hover.rate_per_gpu", lang) + "<extra>" + label + "</extra>",
            )
        )
        if best <= 0:
            continue  # even the lowest rate misses the target: no goodput to mark
        y_best = 100 * float(at["attainment"].min())
        fig.add_trace(
            go.Scatter(
                x=[best_per_gpu, best_per_gpu],
                y=[0.0, y_best],
                name=t("charts.goodput.marker", lang, label=label),
                legendgroup=label,
                showlegend=False,
                mode="lines+markers",
                line={"color": color, "width": 2, "dash": "dot"},
                marker={
                    "symbol": ["line-ew", "star"],
                    "size": [1, 22],
                    "color": color,
                    "line": {"color": INK, "width": 1},
                },
                text=[t("charts.goodput.label" + floor, lang, value=best_per_gpu)] * 2,
                hovertemplate="%{text}<extra>" + label + "</extra>",
            )
        )
    fig.add_hline(
        y=100 * target,
        line={"color": INK, "width": 2, "dash": "dash"},
        annotation_text=t("charts.goodput.target", lang, target=100 * target),
        annotation_position="bottom left",
        annotation_font_size=FONT_SIZE - 1,
    )
    styled(fig, t("charts.goodput.title", lang))
    fig.update_xaxes(range=[0, x_max * 1.05 or 1], title_text=t("charts.axis.rate_per_gpu", lang))
    fig.update_yaxes(range=[0, 105], title_text=t("charts.axis.attainment_pct", lang))
    return fig
