"""The roofline: achieved FLOP/s vs arithmetic intensity for real steps (claim C1, §5.4).

Notable features
- The classic picture: the GPU's compute roof (peak FLOP/s) and bandwidth slope (BW × FLOP/byte)
  meeting at the ridge point F/BW, plus the achievable roof at the profile's MFU and MBU.
- Points are real steps of `sim.cost.roofline.StepCostModel`: decode batches (1, 8, 64, 256) sit on
  the bandwidth slope, far left of the ridge; prefill chunks (512, 2048, 8192 tokens) sit under the
  compute roof. Intensity = StepCost.flops / bytes; achieved = flops / seconds per GPU, so the
  fixed per-step overhead pulls every point below its roof, as it does on a real server.
- Left and right of the ridge are shaded memory-bound and compute-bound, as in the step charts.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from sim.cost.hardware import GpuSpec, ModelSpec
from sim.cost.roofline import StepCostModel
from sim.cost.step_terms import DeviceProfile
from ui.charts_base import INK, finite, shade_regions, styled, token_tick_text
from ui.charts_steps import cost_model
from ui.i18n import t
from ui.theme import COLORS, FONT_SIZE

DECODE_BATCHES = (1, 8, 64, 256)  # roofline points: decode steps of this many requests
PREFILL_CHUNKS = (512, 2048, 8192)  # roofline points: one prefill chunk of this many tokens


def roofline_points(
    cm: StepCostModel,
    context_tokens: int = 1024,
    decode_batches: tuple[int, ...] = DECODE_BATCHES,
    prefill_chunks: tuple[int, ...] = PREFILL_CHUNKS,
) -> list[dict]:
    """Per step: intensity = FLOP/byte, achieved TFLOP/s per GPU = FLOP / s / TP / 1e12."""
    steps = [("decode", b, cm.step_cost((), b, b * context_tokens)) for b in decode_batches]
    steps += [("prefill", c, cm.step_cost(((c, 0, True),), 0, 0)) for c in prefill_chunks]
    return [
        {
            "kind": kind,
            "size": size,
            "intensity": cost.flops / cost.bytes,
            "tflops": cost.flops / cost.seconds / cm.tensor_parallel / 1e12,
            "step_ms": 1000 * cost.seconds,
        }
        for kind, size, cost in steps
    ]


def roofline(
    gpu: GpuSpec | str,
    model: ModelSpec | str,
    tensor_parallel: int = 1,
    profile: DeviceProfile | None = None,
    lang: str = "en",
    context_tokens: int = 1024,
    decode_batches: tuple[int, ...] = DECODE_BATCHES,
    prefill_chunks: tuple[int, ...] = PREFILL_CHUNKS,
) -> go.Figure:
    """Achieved TFLOP/s per GPU vs FLOP/byte (log-log) under roofs min(F, BW·I) and MFU/MBU ones."""
    cm = cost_model(gpu, model, tensor_parallel, profile)
    points = roofline_points(cm, context_tokens, decode_batches, prefill_chunks)
    peak = cm.gpu.bf16_tflops  # TFLOP/s per GPU
    bw = cm.gpu.mem_bw_gb_s / 1000  # TB/s: TFLOP/s reached per FLOP/byte of intensity
    ridge = peak / bw
    intensities = [p["intensity"] for p in points] + [ridge]
    x_min = 10 ** math.floor(math.log10(min(intensities) / 2))
    x_max = 10 ** math.ceil(math.log10(max(intensities) * 2))
    fig = go.Figure()
    prof = cm.profile
    eff_ridge = peak * prof.mfu / (bw * prof.mbu)
    roofs = (
        ("charts.roofline.roof", peak, bw, ridge, {"color": INK, "width": 3}),
        (
            "charts.roofline.achievable",
            peak * prof.mfu,
            bw * prof.mbu,
            eff_ridge,
            {"color": INK, "width": 2, "dash": "dash"},
        ),
    )
    for key, top, slope, knee, line in roofs:
        fig.add_trace(
            go.Scatter(
                x=[x_min, knee, x_max],
                y=finite([x_min * slope, top, top]),
                name=t(key, lang, mfu=prof.mfu, mbu=prof.mbu),
                mode="lines",
                line=line,
                hoverinfo="skip",
            )
        )
    for kind, color, symbol, position, size_text in (
        ("decode", COLORS["decode"], "circle", "middle right", str),
        ("prefill", COLORS["prefill"], "diamond", "bottom center", token_tick_text),
    ):
        group = [p for p in points if p["kind"] == kind]
        if not group:
            continue
        label_key = f"charts.roofline.{kind}_point"
        fig.add_trace(
            go.Scatter(
                x=finite([p["intensity"] for p in group]),
                y=finite([p["tflops"] for p in group]),
                name=t(f"charts.roofline.{kind}", lang, context=context_tokens),
                mode="markers+text",
                marker={"color": color, "size": 15, "symbol": symbol, "line": {"color": INK}},
                # (a chunk's tokens as 512, 2k, 8k: on a phone the chunks sit ~26 px apart)
                text=[t(label_key, lang, size=size_text(p["size"])) for p in group],
                textposition=position,
                textfont={"size": FONT_SIZE - 1, "color": INK},
                customdata=[p["step_ms"] for p in group],
                hovertemplate=t("charts.roofline.hover", lang) + "<extra></extra>",
            )
        )
    # Below and right of the ridge, where no step sits (decode steps are left of it, prefill
    # chunks right of it just under the roof); to its left the label ran off a phone's screen.
    # Its left edge is the ridge, where the shading changes: no arrow (on a phone the 512-token
    # chunk sits 9 px right of the ridge, and an arrow ran through its label).
    fig.add_annotation(
        x=math.log10(ridge),
        y=math.log10(peak),
        text=t("charts.roofline.ridge", lang, ridge=ridge, peak=peak, bw=bw),
        showarrow=False,
        xshift=2,
        yshift=-95,
        xanchor="left",
        yanchor="top",
        align="left",
        bgcolor="rgba(255,255,255,0.9)",
        font={"size": FONT_SIZE - 1},
    )
    # The compute label at the bottom right: at the top it met the memory label at a phone's
    # ridge, and the roof and the chunks fill the top right.
    shade_regions(fig, ridge, x_min, x_max, lang, compute_label_low=True)
    styled(fig, t("charts.roofline.title", lang, gpu=cm.gpu.name, model=cm.model.name))
    fig.update_xaxes(
        type="log",
        dtick=1,
        range=[math.log10(x_min), math.log10(x_max)],
        title_text=t("charts.axis.intensity", lang),
    )
    y_lo = min(min(p["tflops"] for p in points), x_min * bw * prof.mbu) / 2
    fig.update_yaxes(
        type="log",
        dtick=1,
        range=[math.log10(y_lo), math.log10(peak * 2.5)],
        title_text=t("charts.axis.tflops", lang),
    )
    return fig


GEMM_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def gemm_efficiency_points(cm: StepCostModel, tokens: tuple[int, ...] = GEMM_TOKENS) -> list:
    """Per tokens-per-step: one decoder layer's GEMMs as a share of the bf16 peak, measured
    (aiconfigurator-core's tables, None without them) and as the roofline prices them:
    time = max(FLOP / (peak x MFU), weight bytes / (bandwidth x MBU))."""
    from sim.cost.kernel_tables import layer_gemm_efficiency, layer_gemms

    shapes = layer_gemms(cm.model)
    weights = sum(n * k for n, k in shapes) * cm.model.bytes_per_param  # bytes read per step
    peak, bw = cm.gpu.bf16_tflops * 1e12, cm.gpu.mem_bw_gb_s * 1e9
    out = []
    for m in tokens:
        flops = 2 * m * sum(n * k for n, k in shapes)
        seconds = max(flops / (peak * cm.profile.mfu), weights / (bw * cm.profile.mbu))
        measured = layer_gemm_efficiency(cm.gpu, cm.model, m)
        out.append({"tokens": m, "roofline": flops / seconds / peak, "measured": measured})
    return out


def has_measured_gemms(gpu: GpuSpec | str, model: ModelSpec | str) -> bool:
    """Does a measured kernel table cover this GPU and model (see gemm_efficiency)?"""
    from sim.cost.kernel_tables import layer_gemm_efficiency

    cm = cost_model(gpu, model)
    return layer_gemm_efficiency(cm.gpu, cm.model, 1) is not None


def gemm_efficiency(
    gpu: GpuSpec | str,
    model: ModelSpec | str,
    profile: DeviceProfile | None = None,
    lang: str = "en",
) -> go.Figure:
    """Share of the peak a layer's GEMMs reach vs tokens per step: measured kernels beside the
    roofline's straight line (issue 30); ValueError when no table covers this GPU and model."""
    from sim.cost.kernel_tables import gemm_table

    cm = cost_model(gpu, model, 1, profile)
    points = gemm_efficiency_points(cm)
    if any(p["measured"] is None for p in points):
        raise ValueError(f"no measured GEMM table for {cm.gpu.name} and {cm.model.name}")
    fig = go.Figure()
    x = [p["tokens"] for p in points]
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[100 * p["roofline"] for p in points],
            name=t("charts.gemm.roofline", lang, mfu=cm.profile.mfu, mbu=cm.profile.mbu),
            mode="lines",
            line={"color": INK, "width": 2, "dash": "dash"},
        )
    )
    table = gemm_table(cm.gpu.name)
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[100 * p["measured"] for p in points],
            name=t("charts.gemm.measured", lang, version=table.version),
            mode="lines+markers",
            line={"color": COLORS["prefill"], "width": 3},
            marker={"size": 9},
        )
    )
    styled(fig, t("charts.gemm.title", lang, gpu=cm.gpu.name, model=cm.model.name))
    fig.update_xaxes(type="log", dtick=1, title_text=t("charts.gemm.x", lang))
    fig.update_yaxes(range=[0, 100], title_text=t("charts.gemm.y", lang))
    fig.update_traces(hovertemplate="%{x} tok: %{y:.0f}%<extra></extra>")
    return fig
