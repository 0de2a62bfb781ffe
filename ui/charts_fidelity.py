"""How far to trust a number: the simulator's errors against public measurements of real servers.

Notable features
- Reads `assets/fidelity/report.json`, which `bench/bench_fidelity_real.py` writes: a summary
  per GPU, model and engine of the simulator's errors against every public vLLM / SGLang run
  it could replay, each marked fit (its GPU's profile was fitted on it) or held out, and
  aggregated points for the plot. No raw measurements, only derived figures.
- `fidelity_table(gpu, lang)`: the summary rows of one GPU (all GPUs when it has no runs),
  signed mean errors (+ = the simulator is slower than the real server) and mean |errors|.
- `baseline_figures(gpu)`: the held-out figures of NVIDIA's closed-form estimate and of ours on
  the same runs, for a GPU (all GPUs' where it has none priced).
- `fidelity_scatter(gpu, lang, metric=)`: predicted against measured mean TTFT or TPOT, one
  point per GPU, model, engine and parallelism (the geometric mean of its runs), on log axes
  with the y = x diagonal and a ±25% band; fitted points hollow, held-out ones filled, one
  colour per model.
- Pure builders: the report (a dict) can be passed in; by default the shipped file is read once.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.charts_base import INK, SERIES_COLORS, styled
from ui.i18n import t

REPORT_PATH = Path(__file__).resolve().parents[1] / "assets" / "fidelity" / "report.json"
# The same public runs with step_costs=kernels (bench_fidelity_real.py --step-costs kernels)
KERNELS_REPORT_PATH = REPORT_PATH.with_name("report_kernels.json")
# aiconfigurator-core's closed-form end-to-end estimate on the held-out runs it can price, beside
# the kernel-table simulator's on the same runs (bench/vs_aiconfigurator_e2e.py --write)
BASELINE_REPORT_PATH = REPORT_PATH.with_name("baseline_aiconfigurator.json")
BAND = 0.25  # the shaded band: within ±25% of the measurement


@cache
def _load(path: str) -> dict | None:
    p = Path(path)
    return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None


def load_report(path: str | Path = REPORT_PATH) -> dict | None:
    """The fidelity report, or None when bench/bench_fidelity_real.py has not written one."""
    return _load(str(path))


def baseline_figures(gpu: str | None, report: dict | None = None) -> dict | None:
    """Held-out mean |errors| (%) of aiconfigurator-core's closed-form estimate (`aic_*`) and
    ours (`ours_*`) on the runs it prices (`priced`), with the runs it cannot (`memory`: not all
    clients fit at once) for `gpu`, or for all GPUs (`gpu` None in the result) where it prices
    none of that GPU's; None without the file."""
    report = report if report is not None else load_report(BASELINE_REPORT_PATH)
    if not report:
        return None
    mine = report.get("by_gpu", {}).get(gpu)
    if mine and mine.get("priced"):
        return {**mine, "gpu": gpu}
    return {**report["all"], "gpu": None}


def _role(fit: bool, lang: str) -> str:
    """What a run was used for: fitting the profile, or held out to validate it."""
    return t("charts.fid.fit", lang) if fit else t("charts.fid.held_out", lang)


# Marker per engine in the scatter (colour is the model's).
ENGINE_SYMBOLS = {"vLLM": "circle", "SGLang": "diamond"}


def _series(row: dict) -> tuple[str, str, bool]:
    """The scatter series of a report row: its model, its engine without the version
    ("SGLang 0.5.6.post2" -> "SGLang") and whether the profile was fitted on it."""
    return row["model"], str(row.get("engine", "")).split(" ")[0], bool(row["fit"])


def _gpu_rows(rows: list[dict], gpu: str | None) -> list[dict]:
    """Rows of `gpu`, or every row when it has none (a GPU without public runs)."""
    mine = [r for r in rows if r.get("gpu") == gpu]
    return mine or rows


# The table's error columns (literal keys: tests/test_charts.py finds every key in the code).
METRIC_COLUMNS = {
    "ttft": "charts.fid.col.ttft",
    "tpot": "charts.fid.col.tpot",
    "e2e": "charts.fid.col.end",
}


def fidelity_table(gpu: str | None, lang: str, report: dict | None = None) -> pd.DataFrame:
    """One row per model, engine and fit/held-out (and GPU, when the rows are several GPUs'):
    per metric one cell "signed mean error (mean |error|)", e.g. "-19% (28%)" (three columns
    where six did not fit the page's width), then the runs. The errors come right after one
    cell naming the rows as the scatter's legend does ("Llama-3.1-70B:fp8 · vLLM · held out"):
    a phone shows a table's first ~350 px and scrolls the rest sideways, where the errors and
    fit/held out were out of sight."""
    report = report if report is not None else load_report()
    if not report:
        return pd.DataFrame()
    summary = _gpu_rows(report["summary"], gpu)
    several = len({r["gpu"] for r in summary}) > 1
    rows = []
    for r in summary:
        row = {t("charts.fid.col.gpu", lang): r["gpu"]} if several else {}
        name = f"{r['model']} · {r['engine']} · {_role(r['fit'], lang)}"
        row[t("charts.fid.col.model", lang)] = name
        for metric, key in METRIC_COLUMNS.items():
            row[t(key, lang)] = _errors(r.get(f"{metric}_bias"), r.get(f"{metric}_mape"))
        row[t("charts.fid.col.runs", lang)] = r["runs"]
        rows.append(row)
    return pd.DataFrame(rows)


def _errors(bias: float | None, mape: float | None) -> str:
    """'-19% (28%)': the signed mean error and the mean |error|; '-' where there is none."""
    if bias is None or mape is None or bias != bias or mape != mape:
        return "-"
    signed = round(bias)
    return f"{signed:+d}% ({mape:.0f}%)" if signed else f"0% ({mape:.0f}%)"


SCATTER_HEIGHT = 620  # px


# The scatter's metrics: (label key, unit key, seconds -> unit).
SCATTER_METRICS = {
    "ttft": ("charts.fid.scatter.ttft", "charts.fid.axis.s", 1.0),
    "tpot": ("charts.fid.scatter.tpot", "charts.fid.axis.ms", 1000.0),
}


def fidelity_scatter(
    gpu: str | None, lang: str, report: dict | None = None, metric: str = "ttft"
) -> go.Figure:
    """Simulated vs measured mean TTFT (s) or TPOT (ms), one point per GPU, model, engine and
    parallelism (the geometric mean of its public runs). One metric a figure: the page sets
    the two side by side, and a phone stacks them (two panels in one figure were 160 px wide
    each there, their axis titles over each other)."""
    if metric not in SCATTER_METRICS:
        raise ValueError(f"metric must be one of {', '.join(SCATTER_METRICS)}, got {metric!r}")
    label_key, unit_key, scale = SCATTER_METRICS[metric]
    report = report if report is not None else load_report()
    runs = _gpu_rows(report["runs"] if report else [], gpu)
    fig = go.Figure()
    models = sorted({r["model"] for r in runs})
    colour = {m: SERIES_COLORS[i % len(SERIES_COLORS)] for i, m in enumerate(models)}
    pts = [
        r for r in runs if r.get(f"{metric}_measured_mean") and r.get(f"{metric}_predicted_mean")
    ]
    if pts:
        values = [r[f"{metric}_{k}_mean"] * scale for r in pts for k in ("measured", "predicted")]
        diag = np.geomspace(min(values) / 1.5, max(values) * 1.5, 2)
        lines = (
            (1.0, "solid", t("charts.fid.scatter.exact", lang)),
            (1 + BAND, "dot", t("charts.fid.scatter.band", lang)),
            (1 - BAND, "dot", None),  # (the band's other edge: one legend entry for both)
        )
        for factor, dash, name in lines:
            fig.add_trace(
                go.Scatter(
                    x=diag,
                    y=diag * factor,
                    mode="lines",
                    hoverinfo="skip",
                    line={"color": INK, "width": 1, "dash": dash},
                    name=name,
                    showlegend=name is not None,
                )
            )
    # One series per model, engine and role: a GPU's runs of one model may come from vLLM and
    # SGLang (colour = model, symbol = engine; the hover names its version).
    for model, engine, fit in sorted({_series(r) for r in pts}):
        sel = [r for r in pts if _series(r) == (model, engine, fit)]
        label = t("label.fid_series", lang, model=model, engine=engine, role=_role(fit, lang))
        fig.add_trace(
            go.Scatter(
                x=[r[f"{metric}_measured_mean"] * scale for r in sel],
                y=[r[f"{metric}_predicted_mean"] * scale for r in sel],
                mode="markers",
                name=label,
                marker={
                    "color": "white" if fit else colour[model],
                    "size": 8,
                    "symbol": ENGINE_SYMBOLS.get(engine, "square"),
                    "line": {"color": colour[model], "width": 1.5},
                },
                text=[
                    f"{r['gpu']} {r['engine']} {r['parallel']}, "
                    + t("charts.fid.points", lang, n=r.get("n", 1))
                    for r in sel
                ],
                hovertemplate="%{text}<br>" + t("charts.fid.hover", lang) + "<extra></extra>",
            )
        )
    unit = t(unit_key, lang)
    fig.update_xaxes(type="log", title_text=t("charts.fid.axis.measured", lang, unit=unit))
    fig.update_yaxes(type="log", title_text=t("charts.fid.axis.predicted", lang, unit=unit))
    title = t("charts.fid.scatter.title", lang, gpu=gpu or "", metric=t(label_key, lang))
    if not runs:
        title = t("charts.fid.missing", lang)
    fig = styled(fig, title, height=SCATTER_HEIGHT)
    # Below the axis title, which the log axis' two-line tick labels push down: 115 px under
    # the plot area (the Korean title sits lowest), as a share of the plot area's height.
    plot_px = SCATTER_HEIGHT - fig.layout.margin.t - fig.layout.margin.b
    fig.update_layout(legend={"y": -115 / plot_px})
    return fig
