"""Step-time charts: how long one prefill or decode step takes, and why (claim C1, §5.4).

Notable features
- Every number comes from `sim.cost.roofline.StepCostModel`, the same model the simulator runs on,
  so the charts and the simulated timelines always agree.
- `step_time_vs_prompt`: one prefill step vs its prompt length (log-log). Left of the knee the
  step costs one read of the weights whatever the length (flat); right of it, time grows with
  the tokens. A lower panel shows which share of the step was compute-bound, bandwidth-bound,
  fixed overhead or communication.
- `step_time_vs_batch`: one decode step vs the number of requests in it. The weights are read
  once per step, so the step hardly grows with the batch, while the GPU time per token falls
  as 1/batch; past the knee the linear layers turn compute-bound. The KV reads (one per request
  and context token) grow linearly throughout and are drawn separately.
- The knee drawn is `knee_tokens(effective=True)` = b_w·F·MFU/(2·BW·MBU): where the model's
  linear layers actually switch under the profile (the shading follows it); the label also
  gives the nominal peak-ratio knee b_w·F/(2·BW) of the reference tables.
- Sampled token counts include every power of two, so values at the tick marks are exact.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sim.cost.hardware import GpuSpec, ModelSpec
from sim.cost.roofline import StepCostModel
from sim.cost.step_terms import DeviceProfile, StepCost
from ui.charts_base import (
    BOUND_COLORS,
    INK,
    finite,
    knee_line,
    power_of_two_axis,
    resolve_gpu,
    resolve_model,
    shade_regions,
    styled,
)
from ui.i18n import t
from ui.theme import COLORS

# Decades of the prefill chart's log axis under its flat part: room for the knee's label.
PREFILL_LABEL_BAND = 1.5
# The decode chart's curve at the knee stays below this share of its axis: the label above it.
DECODE_LABEL_FLOOR = 0.55


def cost_model(
    gpu: GpuSpec | str,
    model: ModelSpec | str,
    tensor_parallel: int = 1,
    profile: DeviceProfile | None = None,
) -> StepCostModel:
    """The StepCostModel the charts use (names are looked up in the catalog)."""
    return StepCostModel(resolve_gpu(gpu), resolve_model(model), tensor_parallel, profile)


def _geom_ints(lo: int, hi: int, n: int) -> np.ndarray:
    """About n distinct integers evenly spaced on a log scale from lo to hi, plus every power
    of two in between (so the values at the tick marks are exact model numbers)."""
    powers = 2 ** np.arange(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)
    spread = np.round(np.geomspace(lo, hi, n)).astype(np.int64)
    return np.unique(np.concatenate([spread, powers, [lo, hi]]))


def _share_traces(
    fig: go.Figure, x: np.ndarray, costs: list[StepCost], lang: str, row: int
) -> None:
    """Stacked shares (%) of each step's time: compute-, bandwidth-bound, overhead, comm."""
    seconds = finite([c.seconds for c in costs])
    parts = {
        "compute": [c.compute_s for c in costs],
        "memory": [c.memory_s for c in costs],
        "overhead": [c.overhead_s for c in costs],
        "comm": [c.comm_s for c in costs],
    }
    for kind, values in parts.items():
        share = 100 * finite(values) / seconds
        if kind == "comm" and not share.any():
            continue  # one GPU: no all-reduces to show
        fig.add_trace(
            go.Scatter(
                x=x,
                y=share,
                name=t(f"charts.bound.{kind}", lang),
                stackgroup="share",
                mode="lines",
                line={"width": 0.5, "color": BOUND_COLORS[kind]},
                fillcolor=BOUND_COLORS[kind],
                hovertemplate="%{x}: %{y:.0f}%<extra>%{fullData.name}</extra>",
            ),
            row=row,
            col=1,
        )


def _knee_label(cm: StepCostModel, key: str, lang: str) -> tuple[float, str]:
    """The effective knee (tokens per step) and its label text."""
    knee = cm.knee_tokens(effective=True)
    return knee, t(key, lang, knee=knee, nominal=cm.knee_tokens())


def step_time_vs_prompt(
    gpu: GpuSpec | str,
    model: ModelSpec | str,
    tensor_parallel: int = 1,
    profile: DeviceProfile | None = None,
    lang: str = "en",
    min_tokens: int = 16,
    max_tokens: int = 32768,
) -> go.Figure:
    """Prefill step time (ms) = StepCost.seconds·1000 of one final chunk vs its tokens (log-log)."""
    cm = cost_model(gpu, model, tensor_parallel, profile)
    tokens = _geom_ints(min_tokens, max_tokens, 72)
    costs = [cm.step_cost(((int(n), 0, True),), 0, 0) for n in tokens]
    step_ms = 1000 * finite([c.seconds for c in costs])
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, row_heights=[0.64, 0.36], vertical_spacing=0.05
    )
    fig.add_trace(
        go.Scatter(
            x=tokens,
            y=step_ms,
            name=t("charts.prefill.trace", lang),
            mode="lines",
            line={"color": INK, "width": 3},
            hovertemplate=t("label.hover.prompt_step", lang) + "<extra></extra>",
        ),
        row=1,
        col=1,
    )
    _share_traces(fig, tokens, costs, lang, row=2)
    knee, label = _knee_label(cm, "charts.knee.prefill", lang)
    shade_regions(fig, knee, min_tokens, max_tokens, lang, stagger=True)
    # The step time is flat up to the knee and rises after it, so the room a label has next to
    # the line is BELOW the curve: the axis starts PREFILL_LABEL_BAND decades under the flat
    # part and the label sits in that band, right of the line (above it, the curve would run
    # through the label's box on a narrow chart).
    bottom = math.log10(np.nanmin(step_ms)) - PREFILL_LABEL_BAND
    top = math.log10(np.nanmax(step_ms)) + 0.1
    row1_bottom = fig.layout.yaxis.domain[0]
    knee_line(
        fig,
        knee,
        label,
        min_tokens,
        max_tokens,
        y=row1_bottom + 0.01,
        yanchor="bottom",
        side="right",
    )
    title = t("charts.prefill.title", lang, gpu=cm.gpu.name, model=cm.model.name)
    styled(fig, title, height=640)
    fig.update_xaxes(**power_of_two_axis(min_tokens, max_tokens))
    fig.update_xaxes(title_text=t("charts.axis.prompt_tokens", lang), row=2, col=1)
    fig.update_yaxes(
        type="log",
        dtick=1,
        range=[bottom, top],
        title_text=t("charts.axis.step_ms", lang),
        row=1,
        col=1,
    )
    fig.update_yaxes(range=[0, 100], title_text=t("charts.axis.share_pct", lang), row=2, col=1)
    return fig


def step_time_vs_batch(
    gpu: GpuSpec | str,
    model: ModelSpec | str,
    context_tokens: int,
    tensor_parallel: int = 1,
    profile: DeviceProfile | None = None,
    lang: str = "en",
    max_batch: int = 512,
) -> go.Figure:
    """Decode step time (ms) = decode_step_s(B, context)·1000, and per token = step / B, vs B."""
    cm = cost_model(gpu, model, tensor_parallel, profile)
    batches = _geom_ints(1, max_batch, 80)
    costs = [cm.step_cost((), int(b), int(b) * context_tokens) for b in batches]
    # The decode-attention KV read is the only term that depends on the context, so it is the
    # difference between this step and the same step with empty contexts.
    no_kv = [cm.step_cost((), int(b), 0) for b in batches]
    kv_read = finite([c.memory_s - z.memory_s for c, z in zip(costs, no_kv, strict=True)])
    parts = {
        "overhead": finite([c.overhead_s for c in costs]),
        "memory": finite([c.memory_s for c in costs]) - kv_read,
        "kv_read": kv_read,
        "compute": finite([c.compute_s for c in costs]),
        "comm": finite([c.comm_s for c in costs]),
    }
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, row_heights=[0.62, 0.38], vertical_spacing=0.05
    )
    for kind, seconds in parts.items():
        if not seconds.any():
            continue
        name = t(f"charts.bound.{'weights' if kind == 'memory' else kind}", lang)
        fig.add_trace(
            go.Scatter(
                x=batches,
                y=1000 * seconds,
                name=name,
                stackgroup="time",
                mode="lines",
                line={"width": 0.5, "color": BOUND_COLORS[kind]},
                fillcolor=BOUND_COLORS[kind],
                hovertemplate="B=%{x}: %{y:.2f} ms<extra>%{fullData.name}</extra>",
            ),
            row=1,
            col=1,
        )
    step_ms = 1000 * finite([c.seconds for c in costs])
    fig.add_trace(
        go.Scatter(
            x=batches,
            y=step_ms,
            name=t("charts.decode.step_trace", lang),
            mode="lines",
            line={"color": INK, "width": 3},
            hovertemplate="B=%{x}: %{y:.2f} ms<extra></extra>",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=batches,
            y=step_ms / batches,
            name=t("charts.decode.per_token_trace", lang),
            mode="lines",
            line={"color": COLORS["decode"], "width": 3, "dash": "dot"},
            hovertemplate=t("label.hover.ms_per_token", lang) + "<extra></extra>",
        ),
        row=2,
        col=1,
    )
    knee, label = _knee_label(cm, "charts.knee.decode", lang)
    shade_regions(fig, knee, 1, max_batch, lang, stagger=True)
    # Left of the knee the step time is nearly flat and low, so the label goes there, near the
    # top (under both region labels); the axis keeps the curve at the knee in the lower
    # DECODE_LABEL_FLOOR of the panel so that it never runs behind the label's box.
    at_knee = float(np.interp(knee, batches, step_ms))
    y_max = 1.05 * max(float(np.nanmax(step_ms)), at_knee / DECODE_LABEL_FLOOR)
    knee_line(fig, knee, label, 1, max_batch, y=0.87, yanchor="top", side="left")
    title = t(
        "charts.decode.title", lang, gpu=cm.gpu.name, model=cm.model.name, context=context_tokens
    )
    styled(fig, title, height=660)
    fig.update_xaxes(**power_of_two_axis(1, max_batch))
    fig.update_xaxes(title_text=t("charts.axis.batch", lang), row=2, col=1)
    fig.update_yaxes(range=[0, y_max], title_text=t("charts.axis.step_ms", lang), row=1, col=1)
    fig.update_yaxes(
        type="log", dtick=1, title_text=t("charts.axis.per_token_ms", lang), row=2, col=1
    )
    return fig
