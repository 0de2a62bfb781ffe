"""Metrics and SLOs, checked against numbers worked out by hand on tiny made-up runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.runs.gpu_time import kv_use_over_time, run_duration_s, stall_time, worker_utilisation
from sim.runs.latency import itl_values, percentiles
from sim.runs.metrics import summarize
from sim.runs.slo import SLO, SLO_PRESETS, attainment, get_slo, goodput, goodput_per_gpu, slo_met
from sim.runs.token_windows import (
    compare_tokens_in_window,
    throughput_timeseries,
    tokens_in_window,
)
from tests.fake_runs import big_run, make_run, request_row, segment_row, step_row

# ---------------------------------------------------------------------------------------------
# SLO presets
# ---------------------------------------------------------------------------------------------


def test_presets_hold_the_published_numbers():
    expected = {
        "tng-interactive": (3.0, 0.3),
        "tng-interactive-strict": (3.0, 0.1),
        "distserve-chatbot-13b": (0.25, 0.10),
        "distserve-chatbot-66b": (2.5, 0.15),
        "distserve-chatbot-175b": (4.0, 0.20),
        "distserve-code": (0.125, 0.20),
        "distserve-summarization": (15.0, 0.15),
    }
    assert set(SLO_PRESETS) == set(expected)
    for name, (ttft, tpot) in expected.items():
        slo = SLO_PRESETS[name]
        assert (slo.name, slo.ttft_s, slo.tpot_s) == (name, ttft, tpot)
        assert slo.source and "\n" not in slo.source


def test_get_slo_ignores_case_and_lists_names_when_unknown():
    assert get_slo("DistServe-Code") is SLO_PRESETS["distserve-code"]
    with pytest.raises(ValueError, match="tng-interactive.*distserve-code"):
        get_slo("nope")


@pytest.mark.parametrize("ttft, tpot", [(0.0, 0.1), (1.0, -0.1), (math.nan, 0.1), (1.0, math.inf)])
def test_slo_rejects_non_positive_targets(ttft, tpot):
    with pytest.raises(ValueError):
        SLO("bad", ttft, tpot)


def test_slo_is_frozen():
    with pytest.raises(AttributeError):
        SLO_PRESETS["distserve-code"].ttft_s = 1.0  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Latency and SLO attainment on three requests
# ---------------------------------------------------------------------------------------------


def three_requests():
    """TTFT 0.1 / 0.2 / 0.6 s; TPOT 0.05 / 0.10 / 0.25 s (10 tokens each)."""
    return make_run(
        [
            request_row(0, 0.0, 0.1, 0.1 + 9 * 0.05),
            request_row(1, 1.0, 1.2, 1.2 + 9 * 0.10),
            request_row(2, 2.0, 2.6, 2.6 + 9 * 0.25),
        ]
    )


def test_percentiles_by_hand():
    ttft = three_requests().requests["ttft_s"]
    p = percentiles(ttft)
    assert p["p50"] == pytest.approx(0.2)  # the middle value
    # linear interpolation: rank 0.9 * (3 - 1) = 1.8 -> 0.2 + 0.8 * (0.6 - 0.2)
    assert p["p90"] == pytest.approx(0.52)
    assert p["p99"] == pytest.approx(0.2 + 0.98 * 0.4)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101, 4096])
def test_percentiles_agree_with_numpy(n):
    """One partition for all percentiles (sim/runs/latency.py) gives numpy's linear percentiles. The
    same float operations are taken in the same order, so they agree to the last bits; 1e-12 is
    a margin for numpy changing its operation order, far below any latency a chart shows."""
    values = np.random.default_rng(n).lognormal(-3.0, 1.5, n)
    ps = (0, 1, 25, 50, 90, 99, 99.9, 100)
    got = percentiles(values, ps=ps)
    assert list(got.values()) == pytest.approx(np.percentile(values, ps).tolist(), rel=1e-12)


def test_percentiles_tolerate_nan_and_empty():
    assert percentiles([1.0, math.nan, 3.0], ps=(50,)) == {"p50": 2.0}
    empty = percentiles([])
    assert list(empty) == ["p50", "p90", "p99"]
    assert all(math.isnan(v) for v in empty.values())
    assert math.isnan(percentiles(pd.Series([math.nan]))["p50"])
    assert percentiles(iter([4.0, 2.0]), ps=(0, 100, 99.9)) == {
        "p0": 2.0,
        "p100": 4.0,
        "p99.9": pytest.approx(3.998),
    }


def test_attainment_one_request_misses_only_tpot():
    req = three_requests().requests
    # TTFT target 1 s: all meet it. TPOT target 0.2 s: request 2 (0.25 s) misses.
    assert slo_met(req, 1.0, 0.2).tolist() == [True, True, False]
    assert attainment(req, 1.0, 0.2) == pytest.approx(2 / 3)
    # TPOT fine for all, but request 2 misses TTFT 0.5 s: both targets are needed.
    assert attainment(req, 0.5, 1.0) == pytest.approx(2 / 3)
    assert attainment(req, 0.5, 0.2) == pytest.approx(2 / 3)
    assert attainment(req, 0.15, 0.2) == pytest.approx(1 / 3)


def test_attainment_counts_rejected_requests_and_one_token_answers():
    run = make_run(
        [
            request_row(0, 0.0, 0.1, 0.1, output_tokens=1),  # TPOT NaN -> meets TPOT
            request_row(1, 0.0, 0.1, 1.0),
            request_row(2, 0.0, None, None, status="rejected"),
            request_row(3, 0.0, None, None, status="rejected"),
        ]
    )
    assert math.isnan(run.requests.loc[0, "tpot_s"])
    assert slo_met(run.requests, 1.0, 1.0).tolist() == [True, True, False, False]
    assert attainment(run.requests, 1.0, 1.0) == 0.5  # 2 of ALL 4, not 2 of 2 finished
    assert attainment(run.requests, 1e9, 1e9) == 0.5  # rejected never meet, however loose
    assert math.isnan(attainment(run.requests.iloc[:0], 1.0, 1.0))


# ---------------------------------------------------------------------------------------------
# Goodput
# ---------------------------------------------------------------------------------------------


def test_goodput_made_up_sweep():
    assert goodput([1, 2, 3, 4], [1.0, 0.95, 0.91, 0.85]) == 3.0
    assert goodput([4, 2, 3, 1], [0.85, 0.95, 0.91, 1.0]) == 3.0  # order of the sweep is free
    assert goodput([1, 2, 3, 4], [1.0, 0.95, 0.91, 0.85], target=0.99) == 1.0
    assert goodput([1, 2, 3, 4], [1.0, 0.95, 0.91, 0.95]) == 4.0


def test_goodput_stops_at_the_first_miss_and_handles_none():
    assert goodput([1, 2, 3], [0.95, 0.80, 0.95]) == 1.0  # a lucky pass at 3 does not count
    assert goodput([1, 2], [0.5, 0.95]) == 0.0
    assert goodput([1, 2], [0.95, math.nan]) == 1.0  # NaN is a miss
    assert goodput([], []) == 0.0
    assert goodput([1, 1, 2], [0.95, 0.5, 0.95]) == 0.0  # every run at a repeated rate must pass
    with pytest.raises(ValueError):
        goodput([1, 2], [0.9])


def test_goodput_per_gpu():
    assert goodput_per_gpu(3.0, 4) == 0.75
    with pytest.raises(ValueError):
        goodput_per_gpu(3.0, 0)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 100), st.floats(0, 1)), min_size=1, max_size=12))
def test_goodput_is_a_passing_rate_with_all_lower_rates_passing(sweep):
    rates, atts = zip(*sweep, strict=True)
    g = goodput(rates, atts, target=0.9)
    lower = [a for r, a in sweep if r <= g]
    assert g == 0.0 or g in rates
    assert all(a >= 0.9 for a in lower)
    failing = [r for r, a in sweep if a < 0.9]
    if failing:
        assert g < min(failing)


@settings(max_examples=50, deadline=None)
@given(st.floats(0.01, 10), st.floats(0.01, 10), st.floats(1, 3), st.floats(1, 3))
def test_attainment_never_drops_when_targets_loosen(ttft, tpot, kt, kp):
    req = three_requests().requests
    assert 0 <= attainment(req, ttft, tpot) <= attainment(req, ttft * kt, tpot * kp) <= 1


# ---------------------------------------------------------------------------------------------
# Token times: ITL, tokens in a window, throughput over time
# ---------------------------------------------------------------------------------------------


def test_itl_values_are_the_gaps_within_each_request():
    run = make_run(
        [
            request_row(0, 0.0, 1.0, 1.5, output_tokens=3),
            request_row(1, 0.0, 5.0, 5.0, output_tokens=1),
        ],
        token_times={0: [1.0, 1.1, 1.5], 1: [5.0]},
    )
    assert itl_values(run) == pytest.approx([0.1, 0.4])  # no gap across requests 0 -> 1
    assert itl_values(make_run([], token_times={})).size == 0


def test_a_simulated_run_reads_its_token_times_from_the_recorders_flat_copy():
    """summarize() reads token times from the flat array the recorder joined them into; it
    must give what gathering the per-request arrays gives (and a pickled run, which has no
    flat copy, the same)."""
    import pickle

    from sim.cluster.topologies import simulate
    from sim.config import SimConfig
    from sim.workloads.workload import WorkloadConfig, generate

    run = simulate(generate(WorkloadConfig(rate_per_s=8, num_requests=60, seed=3)), SimConfig())
    assert run.token_flat is not None
    thawed = pickle.loads(pickle.dumps(run))
    assert thawed.token_flat is None
    assert np.array_equal(itl_values(run), itl_values(thawed))
    assert itl_values(run).size == sum(max(len(t) - 1, 0) for t in run.token_times.values())
    assert summarize(run) == summarize(thawed)


def staggered(spacing_s: list[float], first_s: list[float], horizon_s: float = 10.0):
    """Requests i = 0.. whose tokens come every spacing_s[i] seconds from first_s[i]."""
    times = {
        i: np.arange(first, horizon_s, gap)
        for i, (gap, first) in enumerate(zip(spacing_s, first_s, strict=True))
    }
    rows = [
        request_row(i, first_s[i] - 0.1, t[0], t[-1], output_tokens=len(t))
        for i, t in times.items()
    ]
    return make_run(rows, token_times=times)


def test_tokens_in_window_counts_exactly():
    # Window [2, 4): tokens exactly at 2.0 count, tokens exactly at 4.0 do not.
    run = make_run(
        [request_row(i, 0.0, 1.0, 5.0, output_tokens=5) for i in range(3)]
        + [request_row(3, 0.0, None, None, status="rejected")],
        token_times={
            0: [1.0, 2.0, 3.0, 4.0, 5.0],
            1: [1.9, 2.5, 3.9999, 4.0, 4.1],
            2: [0.5, 1.0, 1.5, 1.9, 4.5],
        },
    )
    table = tokens_in_window(run, 2.0, 4.0)
    assert table.columns.tolist() == ["request_id", "tokens"]
    assert table["request_id"].tolist() == [0, 1, 2, 3]
    assert table["tokens"].tolist() == [2, 2, 0, 0]
    assert tokens_in_window(run, 3.0, 3.0)["tokens"].sum() == 0
    with pytest.raises(ValueError):
        tokens_in_window(run, 4.0, 2.0)


def test_compare_tokens_in_window_matches_the_worked_example():
    # Three staggered requests; in [5, 7) colocated gives 9/4/3 tokens, disaggregated 22/12/6.
    colocated = staggered([2 / 9, 0.5, 2 / 3], [0.05, 1.05, 2.05])
    disaggregated = staggered([2 / 22, 2 / 12, 2 / 6], [0.01, 1.01, 2.01])
    table = compare_tokens_in_window(
        {"colocated": colocated, "disaggregated": disaggregated}, 5.0, 7.0
    )
    assert table.columns.tolist() == ["colocated", "disaggregated"]
    assert table.index.tolist() == [0, 1, 2]
    assert table["colocated"].tolist() == [9, 4, 3]
    assert table["disaggregated"].tolist() == [22, 12, 6]


def test_compare_tokens_in_window_fills_missing_requests_with_zero():
    a = make_run([request_row(0, 0.0, 1.0, 2.0, output_tokens=2)])
    b = make_run([request_row(1, 0.0, 1.0, 2.0, output_tokens=2)])
    table = compare_tokens_in_window({"a": a, "b": b}, 0.0, 10.0)
    assert table.to_dict() == {"a": {0: 2, 1: 0}, "b": {0: 0, 1: 2}}


def test_throughput_timeseries_bins_tokens():
    run = make_run(
        [request_row(0, 0.0, 0.1, 2.6, output_tokens=4)], token_times={0: [0.1, 0.2, 1.0, 2.6]}
    )
    ts = throughput_timeseries(run, bin_s=0.5)
    assert ts["t_s"].tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert ts["output_tokens"].tolist() == [2, 0, 1, 0, 0, 1]
    assert ts["output_tokens_per_s"].tolist() == [4.0, 0.0, 2.0, 0.0, 0.0, 2.0]
    assert throughput_timeseries(make_run([], token_times={})).empty
    with pytest.raises(ValueError):
        throughput_timeseries(run, bin_s=0)


# ---------------------------------------------------------------------------------------------
# Workers, KV cache, stalls
# ---------------------------------------------------------------------------------------------


def two_worker_run():
    """P0 prefills, D0 decodes; requests span 0 s .. 4 s, so the duration is 4 s."""
    requests = [
        request_row(
            0, 0.0, 0.5, 2.0, prompt_tokens=400, output_tokens=4, worker="P0>D0", preemptions=1
        ),
        request_row(1, 1.0, 1.5, 4.0, prompt_tokens=200, output_tokens=6, worker="P0>D0"),
        request_row(2, 1.0, None, None, status="rejected"),
    ]
    steps = [
        step_row(
            "P0",
            0,
            0.0,
            0.5,
            prefill_tokens=400,
            compute_s=0.4,
            memory_s=0.1,
            kv_used_tokens=400,
            kv_capacity_tokens=1000,
        ),
        step_row(
            "P0",
            1,
            1.0,
            1.5,
            prefill_tokens=200,
            compute_s=0.3,
            memory_s=0.2,
            kv_used_tokens=200,
            kv_capacity_tokens=1000,
        ),
        step_row(
            "D0",
            0,
            0.5,
            1.0,
            decode_tokens=1,
            batch_size=1,
            kv_used_tokens=401,
            kv_capacity_tokens=2000,
        ),
        step_row(
            "D0",
            1,
            1.5,
            2.0,
            decode_tokens=2,
            batch_size=2,
            kv_used_tokens=800,
            kv_capacity_tokens=2000,
        ),
        step_row(
            "D0",
            2,
            2.0,
            3.0,
            decode_tokens=1,
            batch_size=1,
            kv_used_tokens=203,
            kv_capacity_tokens=2000,
        ),
    ]
    segments = [
        segment_row(0, "P0", "prefill", 0.0, 0.5, tokens=400),
        segment_row(0, "D0", "decode", 0.5, 1.5, tokens=2),
        segment_row(0, "D0", "stall", 1.5, 1.75),
        segment_row(0, "D0", "stall", 1.75, 1.75),  # empty
        segment_row(0, "D0", "decode", 1.75, 2.0, tokens=1, slowed=True),
        segment_row(1, "P0", "queued", 1.0, 1.0),  # empty
        segment_row(1, "P0", "prefill", 1.0, 1.5, tokens=200, recompute=True),
        segment_row(1, "D0", "stall", 2.0, 2.5),
        segment_row(1, "D0", "decode", 2.5, 4.0, tokens=5),
    ]
    meta = {
        "num_gpus": 3,
        "ttft_slo_s": 1.0,
        "tpot_slo_s": 0.4,
        "policy": "disagg",
        "workers": {
            "P0": {"role": "prefill", "gpus": 1, "kv_capacity_tokens": 1000},
            "D0": {"role": "decode", "gpus": 1, "kv_capacity_tokens": 2000},
            "D1": {"role": "decode", "gpus": 1, "kv_capacity_tokens": 2000},
        },
    }
    return make_run(requests, segments, steps, meta=meta)


def test_worker_utilisation_by_hand():
    util = worker_utilisation(two_worker_run()).set_index("worker")
    assert util.index.tolist() == ["P0", "D0", "D1"]  # meta order; idle D1 is listed too
    p0, d0, d1 = util.loc["P0"], util.loc["D0"], util.loc["D1"]
    assert p0["busy_share"] == pytest.approx(1.0 / 4.0)  # 1 s of steps in a 4 s run
    assert p0["compute_share"] == pytest.approx(0.7 / 1.0)
    assert p0["bandwidth_share"] == pytest.approx(0.3 / 1.0)
    assert (p0["steps"], p0["prefill_tokens"], p0["decode_tokens"]) == (2, 600, 0)
    assert p0["peak_kv_fraction"] == pytest.approx(0.4)
    assert d0["busy_share"] == pytest.approx(2.0 / 4.0)
    assert d0["bandwidth_share"] == pytest.approx(1.0)
    assert d0["mean_batch"] == pytest.approx(4 / 3)
    assert (d0["steps"], d0["decode_tokens"]) == (3, 4)
    assert d1["steps"] == 0 and d1["busy_share"] == 0.0 and math.isnan(d1["compute_share"])


def test_kv_use_over_time_is_a_step_function_per_worker():
    kv = kv_use_over_time(two_worker_run())
    assert kv.columns.tolist() == [
        "worker",
        "t_s",
        "kv_used_tokens",
        "kv_capacity_tokens",
        "fraction",
    ]
    d0 = kv[kv["worker"] == "D0"]
    assert d0["t_s"].tolist() == [0.5, 1.5, 2.0]
    assert d0["fraction"].tolist() == pytest.approx([401 / 2000, 800 / 2000, 203 / 2000])
    assert kv[kv["worker"] == "P0"]["kv_used_tokens"].tolist() == [400, 200]


def test_stall_time_per_request():
    stalls = stall_time(two_worker_run())
    assert stalls.to_dict() == {0: pytest.approx(0.25), 1: pytest.approx(0.5), 2: 0.0}


# ---------------------------------------------------------------------------------------------
# summarize
# ---------------------------------------------------------------------------------------------


def test_summarize_by_hand():
    run = two_worker_run()
    s = summarize(run)
    assert all(type(v) in (int, float) for v in s.values())  # plain Python numbers only
    json.dumps(s)
    assert run_duration_s(run) == s["duration_s"] == 4.0
    assert (s["num_requests"], s["finished"], s["rejected"], s["num_gpus"]) == (3, 2, 1, 3)
    assert s["ttft_p50_s"] == pytest.approx(0.5)  # both TTFTs are 0.5 s
    assert s["tpot_p50_s"] == pytest.approx((0.5 + 0.5) / 2)  # 1.5/3 and 2.5/5
    assert s["e2e_p50_s"] == pytest.approx((2.0 + 3.0) / 2)
    assert s["itl_p50_s"] == pytest.approx(0.5)  # evenly spaced token times
    assert s["max_itl_s"] == pytest.approx(0.5)
    assert s["input_tokens_per_s"] == pytest.approx(600 / 4)  # rejected prompt not counted
    assert s["output_tokens_per_s"] == pytest.approx(10 / 4)
    assert s["requests_per_s"] == pytest.approx(2 / 4)
    assert s["preemptions_total"] == 1
    # SLO from meta: TTFT 1 s, TPOT 0.4 s -> both finished requests miss TPOT (0.5 s).
    assert (s["slo_ttft_s"], s["slo_tpot_s"], s["slo_met"], s["slo_attainment"]) == (
        1.0,
        0.4,
        0,
        0.0,
    )
    assert summarize(run, ttft_s=1.0, tpot_s=0.5)["slo_attainment"] == pytest.approx(2 / 3)
    assert s["steps"] == 5
    assert s["mean_batch"] == pytest.approx(6 / 5)
    assert s["peak_kv_fraction"] == pytest.approx(0.4)
    assert s["worker.P0.busy_share"] == pytest.approx(0.25)
    assert s["worker.P0.compute_share"] == pytest.approx(0.7)
    assert s["worker.D0.bandwidth_share"] == pytest.approx(1.0)
    assert s["worker.D0.steps"] == 3
    assert s["worker.D1.steps"] == 0


def test_summarize_without_slo_or_requests():
    run = make_run([])
    s = summarize(run)
    assert s["num_requests"] == 0 and s["duration_s"] == 0.0
    assert not any(k.startswith("slo_") for k in s)
    assert math.isnan(s["ttft_p99_s"]) and math.isnan(s["output_tokens_per_s"])


def test_summarize_needs_both_slo_targets():
    run = three_requests()
    with pytest.raises(ValueError, match="both"):
        summarize(run, ttft_s=1.0)
    run.meta["tpot_slo_s"] = 0.2
    assert summarize(run, ttft_s=1.0)["slo_attainment"] == pytest.approx(2 / 3)


def test_summarize_handles_a_big_run():
    # Speed is measured by bench/, not asserted here; this checks the counts at full size.
    s = summarize(big_run())
    assert s["num_requests"] == 10_000 and s["steps"] == 40_000
