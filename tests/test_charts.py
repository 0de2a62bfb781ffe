"""Figure builders: the right traces, numbers that match the cost model or the input tables,
translated titles in English and Korean, no NaN plotted, and every catalog key present."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from fake_runs import make_run, request_row, step_row

from sim.cost.hardware import get_gpu, get_model
from sim.cost.roofline import StepCostModel
from sim.runs.slo import goodput
from ui import charts
from ui.charts_base import paren_on_own_line
from ui.i18n import t

ROOT = Path(__file__).resolve().parents[1]
LANGS = ("en", "ko")
GPU, MODEL = "H100-SXM", "Llama-3.1-8B"


def _cm() -> StepCostModel:
    return StepCostModel(get_gpu(GPU), get_model(MODEL))


def _title(fig: go.Figure) -> str:
    return fig.layout.title.text


def _trace(fig: go.Figure, name: str) -> go.BaseTraceType:
    matches = [d for d in fig.data if d.name == name]
    assert len(matches) == 1, f"expected one trace named {name!r}, got {[d.name for d in fig.data]}"
    return matches[0]


def _assert_no_nan(fig: go.Figure) -> None:
    """Every numeric x / y value of every trace is finite."""
    for trace in fig.data:
        for axis in ("x", "y"):
            values = getattr(trace, axis, None)
            if values is None:
                continue
            arr = np.asarray(values)
            if arr.dtype.kind in "fiu":
                assert np.all(np.isfinite(arr)), f"{trace.name}: NaN in {axis}"


def _vertical_lines(fig: go.Figure) -> list[float]:
    return [s.x0 for s in fig.layout.shapes if s.type == "line" and s.x0 == s.x1]


def _annotation_texts(fig: go.Figure) -> list[str]:
    return [a.text for a in fig.layout.annotations]


# ---------------------------------------------------------------------------------------------
# Hand-made inputs
# ---------------------------------------------------------------------------------------------


def _concurrency_table() -> pd.DataFrame:
    """TNG-like numbers: linear growth up to a point, then flat; 1500 saturates later."""
    rows = []
    for prompt, tput in (
        (3000, [3000, 5900, 11000, 20000, 22000, 22500]),
        (1500, [1600, 3200, 6300, 12000, 21000, 22000]),
    ):
        for c, v in zip((1, 2, 4, 8, 16, 32), tput, strict=True):
            rows.append({"prompt_tokens": prompt, "concurrency": c, "tokens_per_s": float(v)})
    return pd.DataFrame(rows)


def _chunk_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "chunk_size": [512, 2048, 8192],
            "long_ttft_s": [0.78, 0.69, 0.67],
            "max_itl_s": [0.03, 0.10, 0.37],
            "p99_tpot_s": [0.011, 0.0114, 0.0115],
        }
    )


def _sweeps() -> dict[str, pd.DataFrame]:
    return {
        "colocated x2": pd.DataFrame(
            {
                "rate_per_s": [1.0, 2.0, 3.0, 4.0, 5.0],
                "attainment": [0.99, 0.95, 0.91, 0.80, 0.50],
                "num_gpus": 2,
            }
        ),
        "1P1D": pd.DataFrame(
            {
                "rate_per_s": [1.0, 2.0, 3.0, 4.0, 5.0],
                "attainment": [1.0, 0.98, 0.96, 0.93, 0.70],
                "num_gpus": 2,
            }
        ),
        "never": pd.DataFrame({"rate_per_s": [1.0], "attainment": [0.5], "num_gpus": 1}),
    }


def _pd_run():
    """One prefill worker (compute-bound steps) and one decode worker (bandwidth-bound)."""
    requests = [request_row(0, 0.0, 1.0, 3.0, worker="P0>D0")]
    steps = [
        step_row("P0", 0, 0.0, 1.0, prefill_tokens=2000, compute_s=0.8, memory_s=0.1),
        step_row(
            "D0",
            0,
            1.0,
            2.0,
            decode_tokens=1,
            compute_s=0.0,
            memory_s=0.9,
            kv_used_tokens=500,
            kv_capacity_tokens=1000,
        ),
        step_row(
            "D0",
            1,
            2.0,
            3.0,
            decode_tokens=1,
            compute_s=0.0,
            memory_s=0.9,
            kv_used_tokens=1000,
            kv_capacity_tokens=1000,
            preempted=2,
            swap_s=0.05,
        ),
    ]
    meta = {
        "workers": {
            "P0": {"role": "prefill", "gpus": 1, "kv_capacity_tokens": 1000},
            "D0": {"role": "decode", "gpus": 1, "kv_capacity_tokens": 1000},
        }
    }
    return make_run(requests, steps=steps, meta=meta)


# ---------------------------------------------------------------------------------------------
# Cost-model figures
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
def test_step_time_vs_prompt_matches_cost_model(lang):
    cm = _cm()
    fig = charts.step_time_vs_prompt(GPU, MODEL, lang=lang)
    assert _title(fig) == t("charts.prefill.title", lang, gpu=GPU, model=MODEL)
    line = _trace(fig, t("charts.prefill.trace", lang))
    x, y = np.asarray(line.x), np.asarray(line.y)
    assert x[0] == 16 and x[-1] == 32768
    for n, ms in zip(x[::10], y[::10], strict=True):
        assert ms == pytest.approx(cm.prefill_s(int(n)) * 1000)
    # The knee line sits where the linear layers switch under the profile.
    assert _vertical_lines(fig) == [pytest.approx(cm.knee_tokens(effective=True))]
    # Shares stack to 100% and switch from bandwidth- to compute-bound across the knee.
    compute = np.asarray(_trace(fig, t("charts.bound.compute", lang)).y)
    memory = np.asarray(_trace(fig, t("charts.bound.memory", lang)).y)
    overhead = np.asarray(_trace(fig, t("charts.bound.overhead", lang)).y)
    assert np.allclose(compute + memory + overhead, 100)
    knee = cm.knee_tokens(effective=True)
    assert memory[x < knee * 0.8].min() > compute[x < knee * 0.8].max()
    assert compute[x > knee * 1.5].min() > memory[x > knee * 1.5].max()
    texts = _annotation_texts(fig)
    assert f"<b>{t('charts.region.memory', lang)}</b>" in texts
    assert f"<b>{t('charts.region.compute', lang)}</b>" in texts
    _assert_no_nan(fig)


def test_step_time_vs_prompt_shows_communication_with_tensor_parallel():
    fig = charts.step_time_vs_prompt("H100-SXM", "Llama-3.3-70B", tensor_parallel=2)
    assert t("charts.bound.comm") in [d.name for d in fig.data]
    assert t("charts.bound.comm") not in [
        d.name for d in charts.step_time_vs_prompt(GPU, MODEL).data
    ]


@pytest.mark.parametrize("lang", LANGS)
def test_step_time_vs_batch_matches_decode_step(lang):
    cm, ctx = _cm(), 1024
    fig = charts.step_time_vs_batch(GPU, MODEL, ctx, lang=lang)
    assert _title(fig) == t("charts.decode.title", lang, gpu=GPU, model=MODEL, context=ctx)
    step = _trace(fig, t("charts.decode.step_trace", lang))
    x, y = np.asarray(step.x), np.asarray(step.y)
    assert x[0] == 1 and x[-1] == 512
    assert y[0] == pytest.approx(cm.decode_step_s(1, ctx) * 1000)
    assert y[-1] == pytest.approx(cm.decode_step_s(512, ctx) * 1000)
    per_token = np.asarray(_trace(fig, t("charts.decode.per_token_trace", lang)).y)
    assert np.allclose(per_token, y / x)
    # The stacked parts add up to the step time.
    stacked = sum(np.asarray(d.y) for d in fig.data if d.stackgroup == "time")
    assert np.allclose(stacked, y)
    assert _vertical_lines(fig) == [pytest.approx(cm.knee_tokens(effective=True))]
    _assert_no_nan(fig)


def test_decode_step_hardly_grows_below_the_knee_without_context():
    """With no KV to read, 64 decodes cost about what one does: the weights are read once."""
    fig = charts.step_time_vs_batch(GPU, MODEL, 0)
    step = _trace(fig, t("charts.decode.step_trace"))
    y = dict(zip(step.x, step.y, strict=True))
    assert y[64] < 1.1 * y[1]
    assert y[512] > 1.5 * y[64]  # compute-bound past the knee (~211)


@pytest.mark.parametrize("gpu", ["H200", "B200", "A100-80GB", "RTX-4090"])
def test_knee_labels_sit_where_the_curves_are_not(gpu):
    """The knee's label has a white box: on the prefill chart it sits in the band the axis
    keeps under the flat part (the curve only rises from there), on the decode chart above the
    curve's value at the knee (the curve is lower to its left)."""

    def knee_note(fig, key):
        label = t(key, knee=1, nominal=1).split("1")[0]  # the text before the numbers
        return next(a for a in fig.layout.annotations if a.text.startswith(label))

    fig = charts.step_time_vs_prompt(gpu, MODEL)
    step = np.asarray(_trace(fig, t("charts.prefill.trace")).y)
    axis = fig.layout.yaxis
    assert axis.range[0] <= np.log10(step.min()) - 1  # a decade of room under the curve
    note = knee_note(fig, "charts.knee.prefill")
    assert note.yanchor == "bottom" and note.xanchor == "left"
    assert axis.domain[0] <= note.y <= axis.domain[0] + 0.02

    fig = charts.step_time_vs_batch(gpu, MODEL, 2048)
    step = _trace(fig, t("charts.decode.step_trace"))
    knee = _vertical_lines(fig)[0]
    at_knee = np.interp(knee, np.asarray(step.x), np.asarray(step.y))
    axis = fig.layout.yaxis
    assert at_knee <= 0.55 * axis.range[1] and max(step.y) <= axis.range[1]
    note = knee_note(fig, "charts.knee.decode")
    assert note.yanchor == "top" and note.xanchor == "right"
    assert note.y >= axis.domain[0] + 0.6 * (axis.domain[1] - axis.domain[0])


@pytest.mark.parametrize("lang", LANGS)
def test_roofline_points_come_from_step_costs(lang):
    cm = _cm()
    fig = charts.roofline(GPU, MODEL, lang=lang)
    assert _title(fig) == t("charts.roofline.title", lang, gpu=GPU, model=MODEL)
    decode = _trace(fig, t("charts.roofline.decode", lang, context=1024))
    prefill = _trace(fig, t("charts.roofline.prefill", lang))
    assert list(decode.text) == [
        t("charts.roofline.decode_point", lang, size=b) for b in (1, 8, 64, 256)
    ]
    assert list(prefill.text) == [
        t("charts.roofline.prefill_point", lang, size=c) for c in ("512", "2k", "8k")
    ]
    sc = cm.step_cost((), 8, 8 * 1024)
    assert decode.x[1] == pytest.approx(sc.flops / sc.bytes)
    assert decode.y[1] == pytest.approx(sc.flops / sc.seconds / 1e12)
    sc = cm.step_cost(((2048, 0, True),), 0, 0)
    assert prefill.x[1] == pytest.approx(sc.flops / sc.bytes)
    roof = _trace(fig, t("charts.roofline.roof", lang))
    ridge = 989.0 / 3.35  # TFLOP/s ÷ TB/s = FLOP/byte
    assert roof.x[1] == pytest.approx(ridge) and roof.y[1] == pytest.approx(989.0)
    # Every step sits under the roof; decode left of the ridge, prefill chunks right of it.
    assert all(x < ridge for x in decode.x) and all(x > ridge for x in prefill.x)
    assert all(y < 989.0 for y in [*decode.y, *prefill.y])
    _assert_no_nan(fig)


def test_roofline_per_gpu_with_tensor_parallel():
    cm = StepCostModel(get_gpu(GPU), get_model("Llama-3.3-70B"), 2)
    points = charts.roofline_points(cm, decode_batches=(8,), prefill_chunks=())
    sc = cm.step_cost((), 8, 8 * 1024)
    assert points[0]["tflops"] == pytest.approx(sc.flops / sc.seconds / 2 / 1e12)


# ---------------------------------------------------------------------------------------------
# Load figures
# ---------------------------------------------------------------------------------------------


def test_saturation_concurrency_from_marginal_gain():
    assert charts.saturation_concurrency([1, 2, 4, 8], [100, 200, 400, 800]) is None
    # 4 -> 8 gains 25% of linear scaling: the boundary is 4.
    assert charts.saturation_concurrency([8, 4, 2, 1], [500, 400, 200, 100]) == 4
    assert charts.saturation_concurrency([1, 2, 4], [100, 140, 150]) == 1


@pytest.mark.parametrize("lang", LANGS)
def test_throughput_vs_concurrency(lang):
    fig = charts.throughput_vs_concurrency(_concurrency_table(), lang)
    assert _title(fig) == t("charts.concurrency.title", lang)
    line = _trace(fig, t("charts.concurrency.line", lang, prompt=3000))
    assert list(line.x) == [1, 2, 4, 8, 16, 32]
    assert list(line.y) == [3000, 5900, 11000, 20000, 22000, 22500]
    name = "charts.concurrency.saturation_legend"  # the star is named in the legend, in words
    star_3000 = _trace(fig, t(name, lang, prompt=3000, c=8))
    star_1500 = _trace(fig, t(name, lang, prompt=1500, c=16))
    assert star_3000.mode == "markers" and star_3000.showlegend is not False
    assert list(star_3000.x) == [8] and list(star_3000.y) == [20000]
    assert list(star_1500.x) == [16]  # shorter prompts saturate at a higher concurrency (C3)
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    assert [r.x1 for r in rects][0] == 8 and rects[1].x0 == 16  # memory-bound .. compute-bound
    label = {"en": "slower growth<br>(compute-bound)", "ko": "증가 둔화<br>(연산 병목)"}[lang]
    flat = [a for a in fig.layout.annotations if a.text == f"<b>{label}</b>"]
    assert [(a.y, a.yanchor) for a in flat] == [(0.01, "bottom")]  # clear of the rising curves
    assert fig.layout.xaxis.type == "log"
    _assert_no_nan(fig)


def test_concurrency_table_from_runs():
    def run(makespan: float):
        reqs = [
            request_row(i, 0.0, 0.5, makespan, prompt_tokens=1000, output_tokens=100)
            for i in range(2)
        ]
        return make_run(reqs)

    table = charts.concurrency_table({(1000, 1): run(2.0), (1000, 2): run(1.0)})
    assert list(table.columns[:3]) == ["prompt_tokens", "concurrency", "tokens_per_s"]
    assert list(table["concurrency"]) == [1, 2]
    assert list(table["tokens_per_s"]) == [2200 / 2.0, 2200 / 1.0]
    assert list(table["output_tokens_per_s"]) == [100.0, 200.0]


def test_concurrency_table_reads_labelled_runs_from_the_scenario():
    from sim.cluster.topologies import simulate
    from sim.scenarios import get_scenario

    scenario = get_scenario("c3")
    runs = {
        v.label: simulate(scenario.requests(v), v.config)
        for v in scenario.variants
        if v.label in ("3000 tok x 1", "3000 tok x 8", "1500 tok x 8")
    }
    table = charts.concurrency_table(runs)
    assert list(zip(table.prompt_tokens, table.concurrency, strict=True)) == [
        (3000, 1),
        (3000, 8),
        (1500, 8),
    ]
    assert table.tokens_per_s.iloc[1] > 3 * table.tokens_per_s.iloc[0]  # C3: batching pays
    with pytest.raises(ValueError, match="max_num_seqs"):
        charts.concurrency_table({"x": make_run([request_row(0, 0.0, 1.0, 2.0)])})


@pytest.mark.parametrize("lang", LANGS)
def test_chunk_tradeoff(lang):
    fig = charts.chunk_tradeoff(_chunk_table(), lang)
    assert _title(fig) == t("charts.chunk.title", lang)
    (curve,) = fig.data
    assert list(curve.x) == pytest.approx([30, 100, 370])  # ms
    assert list(curve.y) == [0.78, 0.69, 0.67]  # s
    # The first point says what the numbers are; the rest are numbers (room on a phone).
    assert list(curve.text) == [t("charts.chunk.point", lang, size=512), "2048", "8192"]
    assert [row[1] for row in curve.customdata] == [512, 2048, 8192]  # (the hover's chunk)
    assert "lines" in curve.mode and "text" in curve.mode
    # Doubling chunks spread evenly on a log ITL axis, every point (and room for its label) inside.
    assert fig.layout.xaxis.type == "log"
    low, high = fig.layout.xaxis.range
    assert 10**low < 30 and 10**high > 370 * 1.5
    _assert_no_nan(fig)


def test_chunk_tradeoff_table_from_runs():
    def run(ttft: float, itl: float):
        reqs = [
            request_row(0, 0.0, 0.1, 2.0, max_itl_s=itl),
            request_row(1, 0.5, 0.5 + ttft, 3.0, prompt_tokens=16000, max_itl_s=0.01),
        ]
        return make_run(reqs)

    table = charts.chunk_tradeoff_table({2048: run(0.7, 0.1), 512: run(0.8, 0.03)})
    assert list(table["chunk_size"]) == [512, 2048]
    assert list(table["long_ttft_s"]) == pytest.approx([0.8, 0.7])
    assert list(table["max_itl_s"]) == [0.03, 0.1]


@pytest.mark.parametrize("lang", LANGS)
def test_goodput_curves(lang):
    sweeps = _sweeps()
    fig = charts.goodput_curves(sweeps, lang)
    assert _title(fig) == t("charts.goodput.title", lang)
    for label, sweep in sweeps.items():
        best = goodput(sweep["rate_per_s"], sweep["attainment"], 0.9)
        per_gpu = best / sweep["num_gpus"].iloc[0]
        line = _trace(fig, t("charts.goodput.line", lang, label=label, value=per_gpu))
        assert list(line.x) == list(sweep["rate_per_s"] / sweep["num_gpus"])
        assert list(line.y) == pytest.approx(list(100 * sweep["attainment"]))
        markers = [d for d in fig.data if d.name == t("charts.goodput.marker", lang, label=label)]
        if best == 0:
            assert markers == []  # even the lowest rate misses: nothing to mark
            continue
        (marker,) = markers
        passing = sweep[sweep["attainment"] >= 0.9]
        assert marker.x[-1] == passing["rate_per_s"].max() / 2  # highest passing rate, per GPU
    # 1P1D holds 90% up to 4 req/s on 2 GPUs: 2.0 req/s/GPU.
    assert _trace(fig, t("charts.goodput.marker", lang, label="1P1D")).x[-1] == 2.0
    dashed = [s for s in fig.layout.shapes if s.line.dash == "dash"]
    assert [s.y0 for s in dashed] == [90]
    _assert_no_nan(fig)


# ---------------------------------------------------------------------------------------------
# Run figures
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
def test_kv_use(lang):
    fig = charts.kv_use(_pd_run(), lang)
    assert _title(fig) == t("charts.kv.title", lang)
    decode = t("charts.worker", lang, name="D0", role=t("charts.role.decode", lang))
    line = _trace(fig, decode)
    assert list(line.x) == [1.0, 2.0, 3.0]  # each step's start, held until the last step ends
    assert list(line.y) == [50.0, 100.0, 100.0]
    preempt = _trace(fig, t("charts.kv.preempted", lang, count=2))
    assert list(preempt.x) == [2.0] and list(preempt.y) == [100.0]
    swap = _trace(fig, t("charts.kv.swap", lang, ms=50.0))
    assert list(swap.x) == [2.0]
    assert [s.y0 for s in fig.layout.shapes] == [100]  # the capacity line
    _assert_no_nan(fig)


def test_kv_use_without_preemption_has_no_markers():
    run = make_run([request_row(0, 0.0, 1.0, 2.0)], steps=[step_row("I0", 0, 0.0, 1.0)])
    fig = charts.kv_use(run)
    assert len(fig.data) == 1


@pytest.mark.parametrize("lang", LANGS)
def test_worker_utilisation_bars(lang):
    fig = charts.worker_utilisation_bars(_pd_run(), lang)
    assert _title(fig) == t("charts.util.title", lang)
    compute = _trace(fig, t("charts.util.compute", lang))
    memory = _trace(fig, t("charts.util.memory", lang))
    other = _trace(fig, t("charts.util.overhead", lang))
    prefill = t("charts.worker", lang, name="P0", role=t("charts.role.prefill", lang))
    decode = t("charts.worker", lang, name="D0", role=t("charts.role.decode", lang))
    # (the role on its own line: upright labels, not tilted onto the axis title)
    assert list(compute.x) == [paren_on_own_line(prefill), paren_on_own_line(decode)]
    assert fig.layout.xaxis.tickangle == 0
    # Run lasts 3 s. P0: 1 s busy, 0.8 compute, 0.1 memory; D0: 2 s busy, 1.8 memory.
    assert list(compute.y) == pytest.approx([80 / 3, 0])
    assert list(memory.y) == pytest.approx([10 / 3, 180 / 3])
    assert list(other.y) == pytest.approx([10 / 3, 20 / 3])
    assert fig.layout.barmode == "stack"
    _assert_no_nan(fig)


@pytest.mark.parametrize("lang", LANGS)
def test_tokens_in_window_bars(lang):
    table = pd.DataFrame(
        {"colocated": [9, 4, 3], "disaggregated": [22, 12, 6]},
        index=pd.Index([0, 1, 2], name="request_id"),
    )
    fig = charts.tokens_in_window_bars(table, lang, window_s=(0.0, 5.0))
    assert _title(fig) == t("charts.tokens.title_window", lang, t0=0.0, t1=5.0)
    assert [d.name for d in fig.data] == ["colocated", "disaggregated"]
    assert list(fig.data[0].y) == [9, 4, 3] and list(fig.data[1].y) == [22, 12, 6]
    assert list(fig.data[1].x) == [t("charts.tokens.request", lang, id=i) for i in range(3)]
    assert fig.layout.barmode == "group"
    assert _title(charts.tokens_in_window_bars(table, lang)) == t("charts.tokens.title", lang)
    _assert_no_nan(fig)


def test_nan_in_a_table_is_refused_not_plotted():
    table = pd.DataFrame({"a": [1.0, math.nan]}, index=pd.Index([0, 1], name="request_id"))
    with pytest.raises(ValueError, match="NaN"):
        charts.tokens_in_window_bars(table)


def test_builders_run_on_a_simulated_scenario():
    from sim.cluster.topologies import simulate
    from sim.scenarios import get_scenario

    scenario = get_scenario("c11")
    variant = scenario.variant("swap")
    run = simulate(scenario.requests(variant), variant.config)
    fig = charts.kv_use(run)
    assert any(d.name and d.name.startswith("preemption") for d in fig.data)
    _assert_no_nan(fig)
    _assert_no_nan(charts.worker_utilisation_bars(run))


# ---------------------------------------------------------------------------------------------
# Catalogs
# ---------------------------------------------------------------------------------------------


def _catalog(lang: str) -> dict[str, str]:
    return json.loads((ROOT / "assets" / "i18n" / lang / "charts.json").read_text("utf-8"))


def test_every_key_used_exists_in_english_and_korean():
    source = "".join(p.read_text("utf-8") for p in sorted((ROOT / "ui").glob("charts*.py")))
    literal = set(re.findall(r'"(charts\.[a-z_.]+)"', source))
    # Keys assembled with f-strings: charts.region.{kind}, charts.bound.{kind}, ...
    dynamic = {
        f"charts.{family}.{kind}"
        for family, kinds in {
            "region": ("memory", "compute"),
            "bound": ("compute", "memory", "weights", "kv_read", "overhead", "comm"),
            "util": ("compute", "memory", "overhead"),
            "role": ("colocated", "prefill", "decode"),
            "roofline": ("decode", "prefill", "decode_point", "prefill_point"),
        }.items()
        for kind in kinds
    }
    used = literal | dynamic
    assert len(literal) > 40
    en, ko = _catalog("en"), _catalog("ko")
    assert used <= set(en), sorted(used - set(en))
    assert used <= set(ko), sorted(used - set(ko))
    assert set(en) == set(ko)
    assert set(en) <= used, f"unused keys: {sorted(set(en) - used)}"


def test_korean_catalog_is_translated_with_the_same_placeholders():
    en, ko = _catalog("en"), _catalog("ko")
    # The same in both languages: placeholders and symbols only, or a glossary term that stays
    # in Latin letters in Korean (korean-glossary.md: prefill / decode; SI units such as "ms").
    same_ok = {
        "charts.roofline.decode_point",
        "charts.roofline.prefill_point",
        "charts.worker",
        "charts.role.prefill",
        "charts.role.decode",
        "charts.fid.axis.ms",
    }
    # Translated, but into a Latin glossary term ("colocated" -> "colocation").
    latin_ok = same_ok | {"charts.role.colocated"}
    for key, text in en.items():
        assert set(re.findall(r"\{(\w+)", text)) == set(re.findall(r"\{(\w+)", ko[key])), key
        if key not in same_ok:
            assert ko[key] != text, f"{key} is not translated"
        if key not in latin_ok:
            assert re.search(r"[\uac00-\ud7a3]", ko[key]), f"{key} has no Hangul"


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_colocated_instance_is_named_in_words_not_by_its_id(lang):
    run = make_run([request_row(0, 0.0, 1.0, 2.0)], steps=[step_row("I0", 0, 0.0, 1.0)])
    (line,) = charts.kv_use(run, lang).data
    role = t("charts.role.colocated", lang)
    assert line.name == t("charts.worker", lang, name=t("charts.instance", lang, n=0), role=role)
    assert "I0" not in line.name


# ---- speculative decoding: TPOT on / off against the batch size ----


def _spec_table(lang: str = "en") -> tuple[pd.DataFrame, dict[str, str]]:
    """Hand numbers shaped like the lesson's sweep: "chosen" keeps paying, "low" crosses
    between 64 and 128 (ratio 0.8 -> 1.2: at 2^(6 + 0.5) on log2 of the batch)."""
    rows = []
    for curve, ratios in (("chosen", (0.5, 0.6, 0.9)), ("low", (0.7, 0.8, 1.2))):
        for batch, ratio, off in zip((1, 64, 128), ratios, (6.0, 10.0, 13.0), strict=True):
            rows.append(
                {
                    "curve": curve,
                    "batch": batch,
                    "tpot_off_ms": off,
                    "tpot_on_ms": off * ratio,
                    "ratio": ratio,
                }
            )
    labels = {
        "off": t("spec.curve.off", lang),
        "chosen": t("option.spec_accept.eagle3-llama3.1-8b", lang),
        "low": t("spec.curve.low", lang, alpha=0.5),
    }
    return pd.DataFrame(rows), labels


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_spec_ratio_chart_marks_the_crossover_of_the_curve_that_crosses(lang):
    table, labels = _spec_table(lang)
    fig = charts.spec_ratio_chart(table, labels, lang, highlight="chosen")
    lines = [tr for tr in fig.data if tr.mode == "lines+markers"]
    assert [tr.name for tr in lines] == [labels["chosen"], labels["low"]]
    assert list(lines[1].y) == [0.7, 0.8, 1.2]
    assert lines[0].line.width > lines[1].line.width  # the visitor's choice stands out
    (diamond,) = [tr for tr in fig.data if tr.mode == "markers"]
    assert diamond.x[0] == pytest.approx(2**6.5) and diamond.y[0] == 1.0
    text = t("charts.spec.crossover", lang, batch=2**6.5)
    assert [a.text for a in fig.layout.annotations].count(f"<b>{text}</b>") == 1
    assert fig.layout.xaxis.type == "log" and list(fig.layout.xaxis.tickvals) == [1, 128]
    assert fig.layout.title.text == t("charts.spec.ratio_title", lang)
    assert fig.layout.yaxis.range[0] <= 0.5 and fig.layout.yaxis.range[1] > 1.2


def test_spec_tpot_chart_draws_off_once_and_each_curve():
    table, labels = _spec_table()
    fig = charts.spec_tpot_chart(table, labels, "en", highlight="chosen")
    assert [tr.name for tr in fig.data] == [labels["off"], labels["chosen"], labels["low"]]
    assert list(fig.data[0].y) == [6.0, 10.0, 13.0]  # speculation off: one line, dashed
    assert fig.data[0].line.dash == "dash"
    assert list(fig.data[2].y) == pytest.approx([4.2, 8.0, 15.6])


def test_live_measurement_is_read_checked_and_tabled(tmp_path):
    from ui import spec_live

    fixture = Path(__file__).parent / "data" / "spec_crossover_cpu.json"
    data = spec_live.load_live(fixture)
    assert data["k"] == 3 and [r["batch"] for r in data["rows"]] == [1, 4, 16]
    table = spec_live.live_table(data)
    assert set(table.curve) == {"live"}
    assert table.ratio.tolist() == pytest.approx([0.55, 0.75, 1.3])
    assert spec_live.load_live(tmp_path / "absent.json") is None
    bad = tmp_path / "bad.json"
    for text, word in (
        ("not json", "JSON"),
        ("[]", "object"),
        ('{"model": "m", "device": "d", "k": 0, "command": "c", "rows": []}', "k must"),
        ('{"model": "m", "device": "d", "k": 3, "command": "c", "rows": []}', "rows"),
        (json.dumps({**data, "rows": [{**data["rows"][0], "tpot_on_ms": float("nan")}]}), "on"),
        (json.dumps({**data, "rows": [{**data["rows"][0], "batch": 1.5}]}), "batch"),
    ):
        bad.write_text(text)
        with pytest.raises(ValueError, match=word):
            spec_live.load_live(bad)
    assert spec_live.plain_name("<b>x</b>\nmodel") == "‹b›x‹/b› model"


def test_live_numbers_put_each_batch_time_beside_its_tpot_row():
    from ui import spec_live

    fixture = Path(__file__).parent / "data" / "spec_crossover_cpu.json"
    data = spec_live.load_live(fixture)
    rows = [
        {**r, "tpot_ratio": 0.5 + i / 10, "decode_time_ratio": 0.9 + i / 10}
        for i, r in enumerate(data["rows"])
    ]
    data = {**data, "rows": rows}
    table = pd.concat(
        [spec_live.live_table(data), spec_live.live_table(data, "live_code")], ignore_index=True
    )
    assert set(table.curve) == {"live", "live_batch", "live_code", "live_code_batch"}
    numbers = spec_live.numbers_table(table)
    assert numbers.curve.tolist() == ["live"] * 3 + ["live_code"] * 3
    assert numbers.ratio.tolist() == pytest.approx([0.5, 0.6, 0.7] * 2)
    assert numbers.batch_ratio.tolist() == pytest.approx([0.9, 1.0, 1.1] * 2)
    only_tpot = spec_live.numbers_table(spec_live.live_table(data, batch_time=False))
    assert only_tpot.batch_ratio.isna().all() and len(only_tpot) == 3
    assert spec_live.acceptance(data) == pytest.approx(0.6)  # no file-wide rate: rows' mean
    assert spec_live.acceptance({**data, "acceptance_rate": 0.79}) == 0.79


@pytest.mark.parametrize("lang", LANGS)
def test_live_labels_name_each_prompt_set_and_strip_an_unknown_one(lang):
    from ui import spec_live

    T = lambda key, **fmt: t(key, lang, **fmt)  # noqa: E731
    rows = [{"acceptance_rate": 0.5}]
    docs = {
        "live": {"prompts": "all", "acceptance_rate": 0.79, "rows": rows},
        "live_code": {"prompts": "code", "acceptance_rate": 0.59, "rows": rows},
        "live_x": {"prompts": "**[x](javascript:1)** my set", "rows": rows},
    }
    labels = spec_live.live_labels(docs, T)
    assert labels["live"] == T("spec.curve.live", prompts=T("spec.prompts.all"), acc=0.79)
    assert labels["live_code_batch"] == T("spec.curve.live_batch", prompts=T("spec.prompts.code"))
    assert "50%" in labels["live_x"]  # no file-wide rate: the rows' mean
    assert (
        not any(c in labels["live_x"] for c in "*[]:") and "xjavascript1 my set" in labels["live_x"]
    )


def test_the_baseline_figures_are_the_shipped_files_and_a_gpu_without_them_gets_all():
    from ui.charts_fidelity import BASELINE_REPORT_PATH, baseline_figures, load_report

    report = load_report(BASELINE_REPORT_PATH)
    assert report is not None  # shipped: assets/fidelity/baseline_aiconfigurator.json
    h100 = baseline_figures("H100-SXM")
    assert h100["gpu"] == "H100-SXM" and h100["priced"] > 0
    for who in ("aic", "ours"):
        assert all(0 <= h100[f"{who}_{m}"] < 1000 for m in ("ttft", "tpot", "e2e"))
    assert baseline_figures("L4")["gpu"] is None
    assert baseline_figures("L4")["runs"] == report["all"]["runs"]
    assert baseline_figures(None, {}) is None
