"""Metrics: what a run's tables say about latency, throughput, SLOs and how busy each GPU was.

Every function of the metrics modules is a pure function of a `RunResult` (or of one of its
tables): it reads the requests / segments / steps tables and the token times described in
`sim.core.trace`, and never changes them. Times are seconds, token counts are tokens, shares are
fractions in [0, 1].

Here: `summarize` turns a run into one flat, JSON-ready dict with units in the key names,
e.g. `ttft_p99_s`, `output_tokens_per_s`, `worker.P0.busy_share`. The rest, by subject:
- `sim.runs.latency`: `percentiles` of TTFT, TPOT, inter-token latency (ITL, `itl_values`) and
  end-to-end latency; NaN (e.g. the TPOT of a 1-token answer) and empty inputs are tolerated.
- `sim.runs.slo`: `slo_met` needs BOTH targets met; `attainment` divides by ALL requests, so
  rejecting a request can never raise attainment; `goodput` (DistServe's measure) reads a rate
  sweep and returns the highest rate at which the SLO attainment target still holds, for that
  rate and every lower one.
- `sim.runs.gpu_time`: where the GPU time went, `worker_utilisation` (busy, compute-bound and
  bandwidth-bound shares, batch sizes), `kv_use_over_time` (KV cache fill as a step function)
  and `stall_time`.
- `sim.runs.token_windows`: colocated vs disaggregated, token by token: `tokens_in_window`
  counts the output tokens each request received in a time window; `compare_tokens_in_window`
  puts several runs side by side; `throughput_timeseries`.
- Everything is vectorised with numpy/pandas (`sim.runs.run_arrays`): a run of 10,000 requests,
  40,000 steps and 100,000 segments summarises in well under a second.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from sim.core.trace import RunResult
from sim.runs.gpu_time import duration_of, utilisation_rows
from sim.runs.latency import itl_values, percentiles
from sim.runs.run_arrays import nan_max, nan_mean, nan_sum

# pandas is not imported here: `summarize` reads a run's columns as numpy arrays
# (RunResult.columns), so `python -m sim run --json` never loads pandas.


def _plain(value: object) -> float | int:
    """A numpy/pandas number as a plain Python float or int (bools become ints)."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, int | np.integer):
        return int(value)
    return float(value)  # type: ignore[arg-type]


def _ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator as a float; NaN when the denominator is 0 or NaN."""
    if not denominator or math.isnan(denominator):
        return math.nan
    return float(numerator) / float(denominator)


def _resolve_slo(
    meta: Mapping, ttft_s: float | None, tpot_s: float | None
) -> tuple[float, float] | None:
    """The SLO targets to score: the arguments, else run.meta's ttft_slo_s / tpot_slo_s."""
    ttft = ttft_s if ttft_s is not None else meta.get("ttft_slo_s")
    tpot = tpot_s if tpot_s is not None else meta.get("tpot_slo_s")
    if ttft is None and tpot is None:
        return None
    if ttft is None or tpot is None:
        raise ValueError(
            "an SLO needs both targets: pass ttft_s and tpot_s (or set both "
            "ttft_slo_s and tpot_slo_s in run.meta)"
        )
    return float(ttft), float(tpot)


def summarize(run: RunResult, ttft_s: float | None = None, tpot_s: float | None = None) -> dict:
    """One flat dict of plain floats/ints describing the run; units are in the key names.

    Latencies are over finished requests; throughputs divide by duration_s (first arrival to
    last finish). The SLO is (ttft_s, tpot_s) if given, else run.meta's ttft_slo_s / tpot_slo_s;
    slo_* keys appear only when there is one. Per-worker keys look like worker.P0.busy_share.
    """
    req = run.columns("requests")  # numpy columns: no DataFrame (or pandas) needed
    status = np.asarray(req["status"])
    done = status == "finished"
    duration = duration_of(req)

    def finished(column: str) -> np.ndarray:
        return np.asarray(req[column])[done]

    out: dict[str, float | int] = {
        "num_requests": len(status),
        "finished": int(done.sum()),
        "rejected": int((status == "rejected").sum()),
        "duration_s": duration,
    }
    if "num_gpus" in run.meta and run.meta["num_gpus"] is not None:
        out["num_gpus"] = int(run.meta["num_gpus"])

    # Latency distributions (s).
    latency_sources = {
        "ttft": finished("ttft_s"),
        "tpot": finished("tpot_s"),
        "itl": itl_values(run),
        "e2e": finished("e2e_s"),
    }
    for name, values in latency_sources.items():
        for key, value in percentiles(values).items():
            out[f"{name}_{key}_s"] = value
        out[f"{name}_mean_s"] = nan_mean(values)
    out["max_itl_s"] = nan_max(finished("max_itl_s"))

    # Throughput over the whole run.
    out["input_tokens_per_s"] = _ratio(nan_sum(finished("prompt_tokens")), duration)
    out["output_tokens_per_s"] = _ratio(nan_sum(finished("output_tokens")), duration)
    out["requests_per_s"] = _ratio(int(done.sum()), duration)  # finished requests per second
    out["preemptions_total"] = int(nan_sum(req["preemptions"]))
    # Prefix caching: share of prompt tokens the cache served at each request's first admission.
    if "cached_tokens" in req:
        out["prefix_cache_hit_rate"] = _ratio(
            nan_sum(req["cached_tokens"]), nan_sum(req["prompt_tokens"])
        )

    # Speculative decoding: accepted share of the verified drafts, tokens per verify step.
    spec = run.meta.get("speculation")
    if spec:
        out["spec_acceptance_rate"] = float(spec["acceptance_rate"])
        out["spec_tokens_per_verify"] = float(spec["tokens_per_verify"])

    # SLO attainment (share of ALL requests).
    slo = _resolve_slo(run.meta, ttft_s, tpot_s)
    if slo is not None:
        ttft = np.asarray(req["ttft_s"], dtype=float)
        tpot = np.asarray(req["tpot_s"], dtype=float)
        met = done & (ttft <= slo[0]) & (np.isnan(tpot) | (tpot <= slo[1]))  # as slo_met
        out["slo_ttft_s"], out["slo_tpot_s"] = slo
        out["slo_met"] = int(met.sum())
        out["slo_attainment"] = float(met.mean()) if len(met) else math.nan

    # Steps: batch sizes and KV use over all workers, then per worker.
    steps = run.columns("steps")
    out["steps"] = run.num_rows("steps")
    out["mean_batch"] = nan_mean(steps["batch_size"])
    capacity = np.asarray(steps["kv_capacity_tokens"], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        used = np.asarray(steps["kv_used_tokens"], dtype=float)
        out["peak_kv_fraction"] = nan_max(used / np.where(capacity == 0, np.nan, capacity))
    for row in utilisation_rows(steps, run.meta, duration):
        prefix = f"worker.{row['worker']}."
        for key in (
            "busy_share",
            "compute_share",
            "bandwidth_share",
            "steps",
            "mean_batch",
            "peak_kv_fraction",
        ):
            out[prefix + key] = row[key]

    return {key: _plain(value) for key, value in out.items()}
