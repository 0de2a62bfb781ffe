"""bench/bench_knee.py: sustainable rates from closed-loop sweeps (issue 30, item 4)."""

from __future__ import annotations

import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import bench_knee as knee  # noqa: E402


def row(
    clients: int, measured: float, simulated: float, isl: str = "1024", ttft=(0.1, 0.1)
) -> dict:
    return {
        "kind": "closed-loop",
        "gpu": "H200",
        "model": "m",
        "engine": "vLLM",
        "parallel": "TP1",
        "isl": isl,
        "osl": "128",
        "concurrency": str(clients),
        "e2e_measured_mean": str(measured),
        "e2e_predicted_mean": str(simulated),
        "ttft_measured_mean": str(ttft[0]),
        "ttft_predicted_mean": str(ttft[1]),
    }


def test_a_flattened_sweep_is_scored_and_a_rising_one_is_not():
    # measured rates c / E2E: 4, 8, 9.6, 10 req/s (flat at the end); simulated 10% faster
    flat = [row(c, c / r, c / (1.1 * r)) for c, r in ((4, 4), (16, 8), (48, 9.6), (64, 10))]
    rising = [row(c, c / r, c / r, "2048") for c, r in ((4, 2), (16, 6), (64, 12))]
    found = knee.sweeps(flat + rising + [row(8, 1, 1, "4096")])  # 1 point: not a sweep
    assert len(found) == 2
    scored = {key[4]: knee.knee(points) for key, points in found.items()}
    assert scored["1024"]["decided"] and scored["1024"]["measured_rps"] == pytest.approx(10)
    assert scored["1024"]["error"] == pytest.approx(0.1)
    assert not scored["2048"]["decided"]  # 6 -> 12 req/s at the last step: no knee yet


def test_rows_that_are_not_closed_loop_or_not_finite_are_left_out():
    bad = [dict(row(c, 1.0, 1.0), kind="trace") for c in (1, 2, 3)]
    bad += [row(c, float("nan"), 1.0) for c in (1, 2, 3)]
    assert knee.sweeps(bad) == {}


def test_repeats_at_one_client_count_are_one_point_of_the_curve():
    # One deployment measured twice at each count (two source files of one campaign): the rate
    # still climbs 6.5 -> 8.9 req/s from 256 to 512 clients, so the knee is not in the data,
    # however close the two repeats at 512 are to each other.
    rising = [
        row(c, c / r, c / r)
        for c, rs in ((64, (2.79, 2.78)), (256, (6.51, 6.51)), (512, (8.91, 8.85)))
        for r in rs
    ]
    (points,) = knee.sweeps(rising).values()
    k = knee.knee(points)
    assert k["clients"] == [64, 256, 512]
    assert not k["decided"]
    assert k["measured_rps"] == pytest.approx((8.91 + 8.85) / 2)
    # flat at the end, repeats or not: decided, on the averaged rates
    flat = [row(c, c / r, c / (0.9 * r)) for c, r in ((16, 4), (64, 9.6), (64, 10.4), (128, 10))]
    (points,) = knee.sweeps(flat).values()
    k = knee.knee(points)
    assert k["decided"] and k["measured_rps"] == pytest.approx(10)
    assert k["error"] == pytest.approx(-0.1)


def test_a_missed_knee_names_the_batch_or_the_step():
    # 64 clients at the top. Measured: E2E 10 s, 4 s of it queued before the first token, so
    # 64 x 6 / 10 = 38.4 requests decode at once. Simulated A: the same queue, a faster step
    # (knee +25%): the step time. Simulated B: hardly any queue (the KV cache keeps ~all 64:
    # 64 x 7.5 / 8 = 60) and the same rate gain: the batch.
    def sweep(top_e2e_sim: float, top_ttft_sim: float) -> dict:
        rows = [row(c, c / r, c / r) for c, r in ((4, 2.0), (16, 6.0))]
        rows.append(row(32, 32 / 6.4, 32 / (6.4 * 1.25)))
        rows.append(row(64, 10.0, top_e2e_sim, ttft=(4.0, top_ttft_sim)))
        (points,) = knee.sweeps(rows).values()
        return knee.knee(points)

    step = sweep(8.0, 3.2)
    assert step["decided"] and step["error"] == pytest.approx(0.25)
    assert step["batch_measured"] == pytest.approx(38.4)
    assert step["batch_simulated"] == pytest.approx(38.4)
    assert step["cause"] == "step time"
    batch = sweep(8.0, 0.5)
    assert batch["batch_simulated"] == pytest.approx(60.0)
    assert batch["cause"] == "KV cache (batch)"


def test_rows_without_ttft_still_make_a_sweep():
    rows = [row(c, c / r, c / r) for c, r in ((4, 2.0), (16, 6.0), (64, 6.2))]
    for r in rows:
        del r["ttft_measured_mean"], r["ttft_predicted_mean"]
    (points,) = knee.sweeps(rows).values()
    k = knee.knee(points)
    assert k["decided"] and k["error"] == pytest.approx(0.0)
    assert k["batch_measured"] != k["batch_measured"]  # NaN: nothing to tell the cause by
    assert k["cause"].startswith("unknown")
