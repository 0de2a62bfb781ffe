"""Replaying a public run in the simulator, and scoring the replay against what was measured.

Notable features
- `replay(run)`: a trace run (`bench/fidelity_runs.py`) request by request, with its arrivals
  and lengths; a closed-loop run as its benchmark client drives it (bench/fidelity_closed_loop.py:
  the clients started as the engine keeps them, `CLOSED_LOOP_START`), with the burst that opens
  aiperf's measured phase weighed in (`burst_wave`). Its lengths are fixed, or drawn per request
  as InferenceX's client draws them (`PublicRun.range_ratio`).
- `score(run, predicted)`: signed % errors of the mean (and, for traces, the p90) TTFT, TPOT
  and E2E, + = the simulator is slower; a closed loop's simulated TTFT gets the benchmark's
  client latency (`fidelity_runs.client_latency`), fitted with the GPU's profile.
- `prompt_load`: the measured prompt throughput over the GPUs' peak, which says where a
  cache-free replay cannot match a run.
- What-if: `prompt_pool` > 0 draws every closed-loop request from that many prompts, as aiperf's
  synthetic dataset does (`fidelity_closed_loop.AIPERF_PROMPTS`), so repeats hit the prefix
  cache.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from fidelity_closed_loop import (
    CLOSED_LOOP_DEFAULT,
    CLOSED_LOOP_START,
    MEASURED_ROUNDS,
    burst_wave,
    closed_loop,
    closed_loop_size,
)
from fidelity_runs import PublicRun, client_latency

from sim.cost.hardware import get_gpu, get_model


def replay(
    run: PublicRun,
    profile_overrides: dict | None = None,
    prompt_pool: int = 0,
    start: str | None = None,
    send_delay_s: float = 0.0,
) -> pd.DataFrame:
    """Simulate a run; per-request ttft_s, tpot_s, e2e_s of the requests that count, and for a
    closed loop a `weight` each (its burst wave's N requests 1, the steady state's share the
    other (MEASURED_ROUNDS - 1) x N): read its means with `mean_of`.
    `prompt_pool` > 0: a closed loop's requests draw from that many prompts (AIPERF_PROMPTS).
    `start`: how a closed loop's clients start (see `closed_loop`); None = as its engine keeps
    them (CLOSED_LOOP_START, CLOSED_LOOP_DEFAULT); "aiperf": the benchmark's whole measured
    phase (AIPERF_PHASE). `send_delay_s`: see `closed_loop`."""
    config = run.config(profile_overrides)
    if run.specs:
        from sim.cluster.topologies import simulate

        res = simulate(run.specs, config)
        return res.requests.set_index("request_id")[["ttft_s", "tpot_s", "e2e_s"]]
    columns = ["ttft_s", "tpot_s", "e2e_s"]
    if start == "aiperf":
        n = MEASURED_ROUNDS * run.concurrency
        res = closed_loop(
            config,
            run.isl,
            run.osl,
            run.concurrency,
            n,
            "together",
            send_delay_s=send_delay_s,
            range_ratio=run.range_ratio,
        )
        return res.requests.set_index("request_id")[columns]
    n, warm, end = closed_loop_size(run.concurrency, run.osl, prompt_pool)
    start = start or CLOSED_LOOP_START.get(run.policy, CLOSED_LOOP_DEFAULT)
    res = closed_loop(
        config,
        run.isl,
        run.osl,
        run.concurrency,
        n,
        start=start,
        prompts=prompt_pool,
        send_delay_s=send_delay_s,
        range_ratio=run.range_ratio,
    )
    req = res.requests.set_index("request_id")
    steady = req.loc[(req.index >= warm) & (req.index < end), columns]
    if steady.empty or steady["e2e_s"].isna().all():  # (rejected: prompts beyond the KV cache)
        raise ValueError(f"{run.key}: no request of the measured window was served")
    if start not in ("even", "random", "together") or prompt_pool:
        return steady
    if start != "together":
        burst = burst_wave(config, run.isl, run.osl, run.concurrency, run.range_ratio)
    else:  # the replay's own first round: every client at t = 0 on an idle server
        burst = req.loc[req.index < run.concurrency, columns]
    burst.index = pd.Index(range(-len(burst), 0), name="request_id")  # (before the others)
    share = (MEASURED_ROUNDS - 1) * run.concurrency / len(steady)
    return pd.concat([burst.assign(weight=1.0), steady.assign(weight=share)])


def mean_of(predicted: pd.DataFrame, column: str) -> float:
    """The mean of a replay's column as the benchmark reports it: weighted by `weight` where the
    replay has one (see `replay`), NaN rows left out."""
    values = predicted[column]
    ok = values.notna().to_numpy()
    if "weight" not in predicted:
        return float(values[ok].mean())
    return float(np.average(values[ok], weights=predicted["weight"][ok]))


# ---- errors ------------------------------------------------------------------------------------


def signed_pct(predicted: float, measured: float) -> float:
    """(predicted − measured) / measured, in percent: + means the simulator is slower."""
    return 100.0 * (predicted - measured) / measured if measured > 0 else math.nan


def prompt_load(run: PublicRun) -> float:
    """The share of its GPUs' dense matmul peak that a run's MEASURED throughput needs for its
    prompts' linear layers alone: prompt tokens per second x 2 x active parameters, over peak
    FLOP/s x GPUs. Throughput of a closed loop by Little's law (clients / mean E2E, which the
    clients' own gaps only lower); of a trace, its prompt tokens over its span. Attention,
    decode and every other cost come on top, so a run near 1 (real GEMMs reach 0.6-0.8 of peak)
    cannot have prefilled every prompt: prefix-cache hits its source does not state."""
    model, gpu = get_model(run.model), get_gpu(run.gpu)
    gpus = int(run.settings.get("tensor_parallel", 1)) * int(run.settings.get("num_instances", 1))
    peak = gpu.matmul_tflops(model.matmul_bytes_per_param) * 1e12 * gpus
    if run.specs:
        arrivals = np.array([s.arrival_s for s in run.specs])
        ids = [s.request_id for s in run.specs]
        ends = arrivals + run.measured["e2e_s"].reindex(ids).to_numpy()
        span = float(np.nanmax(ends) - arrivals.min())
        tokens_s = sum(s.prompt_tokens for s in run.specs) / span if span > 0 else math.nan
    else:
        m = run.measured_means
        e2e = m["ttft_s"] + (run.mean_osl - 1) * m["tpot_s"]
        tokens_s = run.concurrency / e2e * run.mean_isl if e2e > 0 else math.nan
    return tokens_s * model.flops_per_token_body / peak


def _describe(run: PublicRun) -> dict:
    """A score row's first columns: what the run is, and what its measurements need."""
    return {
        "key": run.key,
        "source": run.source,
        "gpu": run.gpu,
        "model": run.model,
        "engine": run.engine,
        "parallel": run.parallel,
        "kind": run.kind,
        "fit": run.fit,
        "concurrency": run.concurrency,
        "isl": run.isl,
        "osl": run.osl,
        "requests": len(run.specs) or run.concurrency,
        "prompt_load": prompt_load(run),
    }


def score(run: PublicRun, predicted: pd.DataFrame, step_costs: str = "roofline") -> dict:
    """Mean and p90 errors (signed %) of TTFT, TPOT and E2E; for closed-loop runs only the means
    exist (E2E taken as TTFT + (mean osl − 1)·TPOT on both sides), the client-side latency fitted
    with `step_costs`' profile added to the simulated TTFT."""
    out = _describe(run)
    if run.specs:
        meas = run.measured
        for m in ("ttft_s", "tpot_s", "e2e_s"):
            a, b = predicted[m].dropna(), meas[m].dropna()
            out[f"{m[:-2]}_measured_mean"], out[f"{m[:-2]}_predicted_mean"] = b.mean(), a.mean()
            out[f"{m[:-2]}_mean_err"] = signed_pct(a.mean(), b.mean())
            out[f"{m[:-2]}_p90_err"] = signed_pct(np.percentile(a, 90), np.percentile(b, 90))
    else:
        latency = client_latency(run.gpu, step_costs, run.campaign)
        out["client_latency_s"] = latency
        for m in ("ttft_s", "tpot_s"):
            p, q = mean_of(predicted, m), run.measured_means[m]
            p += latency if m == "ttft_s" else 0.0
            out[f"{m[:-2]}_measured_mean"], out[f"{m[:-2]}_predicted_mean"] = q, p
            out[f"{m[:-2]}_mean_err"] = signed_pct(p, q)
            out[f"{m[:-2]}_p90_err"] = math.nan
        e2e = [  # (the mean output length where the client draws it: `PublicRun.mean_osl`)
            run.measured_means["ttft_s"] + (run.mean_osl - 1) * run.measured_means["tpot_s"],
            out["ttft_predicted_mean"] + (run.mean_osl - 1) * out["tpot_predicted_mean"],
        ]
        out["e2e_measured_mean"], out["e2e_predicted_mean"] = e2e
        out["e2e_mean_err"] = signed_pct(e2e[1], e2e[0])
        out["e2e_p90_err"] = math.nan
    return out


def score_failed(run: PublicRun) -> dict:
    """The row of a run the simulator could not replay (its errors are NaN)."""
    nan = math.nan
    row = _describe(run)
    for m in ("ttft", "tpot", "e2e"):
        for k in ("measured_mean", "predicted_mean", "mean_err", "p90_err"):
            row[f"{m}_{k}"] = nan
    return row
