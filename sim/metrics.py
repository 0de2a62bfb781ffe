"""Metrics: what a run's tables say about latency, throughput, SLOs and how busy each GPU was.

Every function here is a pure function of a `RunResult` (or of one of its tables): it reads the
requests / segments / steps tables and the token times described in `sim.trace`, and never
changes them. Times are seconds, token counts are tokens, shares are fractions in [0, 1].

Notable features
- Latency: `percentiles` of TTFT, TPOT, inter-token latency (ITL, `itl_values`) and end-to-end
  latency; NaN (e.g. the TPOT of a 1-token answer) and empty inputs are tolerated.
- SLOs: `slo_met` needs BOTH targets met; `attainment` divides by ALL requests, so rejecting a
  request can never raise attainment.
- Goodput (DistServe's measure): `goodput` reads a rate sweep and returns the highest rate at
  which the SLO attainment target still holds, for that rate and every lower one.
- `summarize` turns a run into one flat, JSON-ready dict with units in the key names,
  e.g. `ttft_p99_s`, `output_tokens_per_s`, `worker.P0.busy_share`.
- Where the GPU time went: `worker_utilisation` (busy, compute-bound and bandwidth-bound shares,
  batch sizes) and `kv_use_over_time` (KV cache fill as a step function).
- Colocated vs disaggregated, token by token: `tokens_in_window` counts the output tokens each
  request received in a time window; `compare_tokens_in_window` puts several runs side by side.
- Everything is vectorised with numpy/pandas: a run of 10,000 requests, 40,000 steps and
  100,000 segments summarises in well under a second.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from sim.trace import RunResult

DEFAULT_PERCENTILES = (50, 90, 99)


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


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


def _nan_max(values: pd.Series | np.ndarray) -> float:
    """Largest non-NaN value, NaN when there is none."""
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    return float(arr.max()) if arr.size else math.nan


def _nan_mean(values: pd.Series | np.ndarray) -> float:
    """Mean of the non-NaN values, NaN when there is none."""
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    return float(arr.mean()) if arr.size else math.nan


def _flat_token_times(run: RunResult) -> tuple[np.ndarray, np.ndarray]:
    """All token times as two flat arrays: (request_id per token, time s per token).

    Tokens of one request are contiguous and keep their order, so a `np.diff` over the times is
    an inter-token gap wherever the request id does not change.
    """
    if not run.token_times:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=float)
    ids = np.fromiter(run.token_times.keys(), dtype=np.int64, count=len(run.token_times))
    arrays = [np.asarray(times, dtype=float).ravel() for times in run.token_times.values()]
    lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    return np.repeat(ids, lengths), np.concatenate(arrays)


def _step_seconds(steps: pd.DataFrame) -> pd.Series:
    """Duration of each engine step, s."""
    return steps["end_s"] - steps["start_s"]


def _all_request_ids(run: RunResult) -> np.ndarray:
    """Sorted ids of every request in the requests table or in token_times."""
    ids = run.requests["request_id"].to_numpy(dtype=np.int64)
    extra = np.fromiter(run.token_times.keys(), dtype=np.int64, count=len(run.token_times))
    return np.union1d(ids, extra)


# ---------------------------------------------------------------------------------------------
# SLOs and goodput
# ---------------------------------------------------------------------------------------------


def slo_met(requests: pd.DataFrame, ttft_s: float, tpot_s: float) -> pd.Series:
    """Per request: finished AND ttft_s <= TTFT target AND (tpot_s <= TPOT target or NaN).

    A NaN tpot_s (a 1-token answer has no later tokens) counts as meeting TPOT. Rejected or
    otherwise unfinished requests never meet the SLO. Targets are in seconds.
    """
    finished = requests["status"] == "finished"
    ttft_ok = requests["ttft_s"] <= ttft_s  # NaN <= x is False
    tpot = requests["tpot_s"]
    tpot_ok = tpot.isna() | (tpot <= tpot_s)
    return (finished & ttft_ok & tpot_ok).astype(bool).rename("slo_met")


def attainment(requests: pd.DataFrame, ttft_s: float, tpot_s: float) -> float:
    """SLO attainment = requests meeting the SLO / ALL requests (rejected included); NaN if none."""
    if len(requests) == 0:
        return math.nan
    return float(slo_met(requests, ttft_s, tpot_s).mean())


def goodput(
    rates: Sequence[float] | np.ndarray,
    attainments: Sequence[float] | np.ndarray,
    target: float = 0.9,
) -> float:
    """Highest swept rate (req/s) with attainment >= target at it AND at every lower rate.

    We walk the sweep from the lowest rate up and stop at the first rate that misses the target
    (NaN counts as a miss). A lucky pass above a failing rate does not count: goodput is the
    load the system sustains, not a point where noise happened to be kind. 0.0 if even the
    lowest rate misses. A rate swept several times (e.g. several seeds) passes only if every
    run at it passes. DistServe reports goodput with a 90 % attainment target.
    """
    rates_arr = np.asarray(rates, dtype=float).ravel()
    att_arr = np.asarray(attainments, dtype=float).ravel()
    if rates_arr.shape != att_arr.shape:
        raise ValueError(
            f"rates and attainments differ in length: {rates_arr.size} vs {att_arr.size}"
        )
    passed = att_arr >= target  # NaN >= x is False
    order = np.lexsort((passed, rates_arr))  # by rate; at a repeated rate, misses come first
    ok = passed[order]
    num_ok = ok.size if ok.all() else int(np.argmin(ok))  # length of the leading run of passes
    return float(rates_arr[order][num_ok - 1]) if num_ok else 0.0


def goodput_per_gpu(goodput: float, num_gpus: int) -> float:
    """Goodput per GPU = goodput (req/s) / number of GPUs (req/s/GPU)."""
    if num_gpus <= 0:
        raise ValueError(f"num_gpus must be positive, got {num_gpus}")
    return float(goodput) / num_gpus


# ---------------------------------------------------------------------------------------------
# Latency distributions
# ---------------------------------------------------------------------------------------------


def percentiles(
    values: Iterable[float] | np.ndarray | pd.Series, ps: Sequence[float] = DEFAULT_PERCENTILES
) -> dict[str, float]:
    """{"p50": ..., "p90": ..., "p99": ...}: linear-interpolated percentiles, NaNs dropped.

    Values keep their unit. An empty (or all-NaN) input gives NaN for every percentile.
    """
    if isinstance(values, pd.Series):
        arr = values.to_numpy(dtype=float, na_value=np.nan)
    else:
        arr = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)
    arr = arr.ravel()
    arr = arr[~np.isnan(arr)]
    keys = [f"p{p:g}" for p in ps]
    if arr.size == 0:
        return dict.fromkeys(keys, math.nan)
    return {key: float(v) for key, v in zip(keys, np.percentile(arr, ps), strict=True)}


def itl_values(run: RunResult) -> np.ndarray:
    """All inter-token latencies, s: the gaps between consecutive token times of each request."""
    ids, times = _flat_token_times(run)
    if times.size < 2:
        return np.empty(0, dtype=float)
    same_request = ids[1:] == ids[:-1]
    return np.diff(times)[same_request]


# ---------------------------------------------------------------------------------------------
# Where the GPU time went
# ---------------------------------------------------------------------------------------------


def run_duration_s(run: RunResult) -> float:
    """Run duration, s = last finish_s - first arrival_s; 0.0 when no request finished."""
    req = run.requests
    if len(req) == 0:
        return 0.0
    last_finish = _nan_max(req["finish_s"])
    first_arrival = float(req["arrival_s"].min())
    if math.isnan(last_finish):
        return 0.0
    return max(0.0, last_finish - first_arrival)


def worker_utilisation(run: RunResult, duration_s: float | None = None) -> pd.DataFrame:
    """One row per worker: how busy it was and on what (shares of time, tokens, batch sizes).

    busy_share = sum of step seconds / run duration; compute_share = sum compute_s / sum of step
    seconds; bandwidth_share = sum memory_s / sum of step seconds; mean_batch = mean requests per
    step; peak_kv_fraction = max kv_used_tokens / kv_capacity_tokens. Workers named in
    run.meta["workers"] that never ran a step appear with zero steps.
    """
    steps = run.steps
    duration = run_duration_s(run) if duration_s is None else duration_s
    frame = pd.DataFrame({
        "worker": steps["worker"].astype(str),
        "step_s": _step_seconds(steps),
        "compute_s": steps["compute_s"],
        "memory_s": steps["memory_s"],
        "batch_size": steps["batch_size"],
        "prefill_tokens": steps["prefill_tokens"],
        "decode_tokens": steps["decode_tokens"],
        "kv_fraction": steps["kv_used_tokens"] / steps["kv_capacity_tokens"].replace(0, np.nan),
    })  # fmt: skip
    grouped = frame.groupby("worker", sort=True)
    table = pd.DataFrame({
        "steps": grouped.size(),
        "busy_s": grouped["step_s"].sum(),
        "compute_s": grouped["compute_s"].sum(),
        "memory_s": grouped["memory_s"].sum(),
        "mean_batch": grouped["batch_size"].mean(),
        "prefill_tokens": grouped["prefill_tokens"].sum(),
        "decode_tokens": grouped["decode_tokens"].sum(),
        "peak_kv_fraction": grouped["kv_fraction"].max(),
    })  # fmt: skip
    # Idle workers from the run's description, in the order the run lists them.
    meta_workers = [str(w) for w in (run.meta.get("workers") or {})]
    order = meta_workers + [w for w in table.index if w not in meta_workers]
    table = table.reindex(order)
    for column in ("steps", "busy_s", "compute_s", "memory_s", "prefill_tokens", "decode_tokens"):
        table[column] = table[column].fillna(0)
    for column in ("steps", "prefill_tokens", "decode_tokens"):
        table[column] = table[column].astype(np.int64)
    for column in ("busy_s", "compute_s", "memory_s"):
        table[column] = table[column].astype(float)
    busy = table["busy_s"].replace(0, np.nan)
    table["busy_share"] = table["busy_s"] / duration if duration > 0 else math.nan
    table["compute_share"] = table["compute_s"] / busy
    table["bandwidth_share"] = table["memory_s"] / busy
    columns = [
        "busy_share",
        "compute_share",
        "bandwidth_share",
        "steps",
        "mean_batch",
        "prefill_tokens",
        "decode_tokens",
        "busy_s",
        "peak_kv_fraction",
    ]
    return table[columns].rename_axis("worker").reset_index()


def kv_use_over_time(run: RunResult) -> pd.DataFrame:
    """KV cache use per worker as a step function: one row per step, at the step's start_s.

    Columns: worker, t_s, kv_used_tokens, kv_capacity_tokens, fraction = used / capacity.
    Each value holds until the worker's next row (plot with drawstyle="steps-post").
    """
    steps = run.steps.sort_values(["worker", "start_s"], kind="stable")
    capacity = steps["kv_capacity_tokens"]
    return pd.DataFrame({
        "worker": steps["worker"].astype(str).to_numpy(),
        "t_s": steps["start_s"].to_numpy(dtype=float),
        "kv_used_tokens": steps["kv_used_tokens"].to_numpy(),
        "kv_capacity_tokens": capacity.to_numpy(),
        "fraction": (steps["kv_used_tokens"] / capacity.replace(0, np.nan)).to_numpy(dtype=float),
    })  # fmt: skip


def stall_time(run: RunResult) -> pd.Series:
    """Per request (index request_id): total seconds spent in "stall" segments; 0 if none."""
    segs = run.segments
    stalls = segs[segs["kind"] == "stall"]
    per_request = (stalls["end_s"] - stalls["start_s"]).groupby(stalls["request_id"]).sum()
    index = pd.Index(_all_request_ids(run), name="request_id")
    return per_request.reindex(index, fill_value=0.0).astype(float).rename("stall_s")


# ---------------------------------------------------------------------------------------------
# Tokens over time
# ---------------------------------------------------------------------------------------------


def tokens_in_window(run: RunResult, t0_s: float, t1_s: float) -> pd.DataFrame:
    """Per request: output tokens whose emission time t satisfies t0_s <= t < t1_s.

    Columns: request_id, tokens. Every request of the run has a row (0 if it got none).
    """
    if t1_s < t0_s:
        raise ValueError(f"window ends before it starts: t0_s={t0_s}, t1_s={t1_s}")
    ids, times = _flat_token_times(run)
    in_window = (times >= t0_s) & (times < t1_s)
    counts = pd.Series(ids[in_window]).value_counts()
    all_ids = _all_request_ids(run)
    tokens = counts.reindex(all_ids, fill_value=0).to_numpy(dtype=np.int64)
    return pd.DataFrame({"request_id": all_ids, "tokens": tokens})


def compare_tokens_in_window(
    runs: Mapping[str, RunResult], t0_s: float, t1_s: float
) -> pd.DataFrame:
    """Tokens per request in [t0_s, t1_s) for several runs: index request_id, one column per label.

    A request missing from one run counts 0 tokens there.
    """
    columns = {
        label: tokens_in_window(run, t0_s, t1_s).set_index("request_id")["tokens"]
        for label, run in runs.items()
    }
    if not columns:
        return pd.DataFrame(index=pd.Index([], name="request_id", dtype=np.int64))
    table = pd.DataFrame(columns).fillna(0).astype(np.int64)
    table.index.name = "request_id"
    return table.sort_index()


def throughput_timeseries(run: RunResult, bin_s: float = 1.0) -> pd.DataFrame:
    """Output tokens per second in bins of bin_s seconds, from t = 0 to the last token.

    Columns: t_s (bin start), output_tokens (in the bin), output_tokens_per_s = tokens / bin_s.
    """
    if bin_s <= 0:
        raise ValueError(f"bin_s must be positive, got {bin_s}")
    _, times = _flat_token_times(run)
    times = times[~np.isnan(times)]
    if times.size == 0:
        return pd.DataFrame(
            {
                "t_s": np.empty(0),
                "output_tokens": np.empty(0, dtype=np.int64),
                "output_tokens_per_s": np.empty(0),
            }
        )
    bins = np.floor(np.maximum(times, 0.0) / bin_s).astype(np.int64)
    counts = np.bincount(bins)
    return pd.DataFrame({
        "t_s": np.arange(counts.size) * bin_s,
        "output_tokens": counts.astype(np.int64),
        "output_tokens_per_s": counts / bin_s,
    })  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The one-dict summary
# ---------------------------------------------------------------------------------------------


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
    req = run.requests
    status = req["status"]
    finished = req[status == "finished"]
    duration = run_duration_s(run)

    out: dict[str, float | int] = {
        "num_requests": len(req),
        "finished": len(finished),
        "rejected": int((status == "rejected").sum()),
        "duration_s": duration,
    }
    if "num_gpus" in run.meta and run.meta["num_gpus"] is not None:
        out["num_gpus"] = int(run.meta["num_gpus"])

    # Latency distributions (s).
    latency_sources = {
        "ttft": finished["ttft_s"],
        "tpot": finished["tpot_s"],
        "itl": itl_values(run),
        "e2e": finished["e2e_s"],
    }
    for name, values in latency_sources.items():
        for key, value in percentiles(values).items():
            out[f"{name}_{key}_s"] = value
        out[f"{name}_mean_s"] = _nan_mean(values)
    out["max_itl_s"] = _nan_max(finished["max_itl_s"])

    # Throughput over the whole run.
    out["input_tokens_per_s"] = _ratio(finished["prompt_tokens"].sum(), duration)
    out["output_tokens_per_s"] = _ratio(finished["output_tokens"].sum(), duration)
    out["requests_per_s"] = _ratio(len(finished), duration)  # finished requests per second
    out["preemptions_total"] = int(req["preemptions"].sum())
    # Prefix caching: share of prompt tokens the cache served at each request's first admission.
    if "cached_tokens" in req:
        out["prefix_cache_hit_rate"] = _ratio(req["cached_tokens"].sum(),
                                              req["prompt_tokens"].sum())  # fmt: skip

    # SLO attainment (share of ALL requests).
    slo = _resolve_slo(run.meta, ttft_s, tpot_s)
    if slo is not None:
        met = slo_met(req, *slo)
        out["slo_ttft_s"], out["slo_tpot_s"] = slo
        out["slo_met"] = int(met.sum())
        out["slo_attainment"] = float(met.mean()) if len(req) else math.nan

    # Steps: batch sizes and KV use over all workers, then per worker.
    steps = run.steps
    out["steps"] = len(steps)
    out["mean_batch"] = _nan_mean(steps["batch_size"])
    capacity = steps["kv_capacity_tokens"].replace(0, np.nan)
    out["peak_kv_fraction"] = _nan_max(steps["kv_used_tokens"] / capacity)
    util = worker_utilisation(run, duration_s=duration)
    for row in util.itertuples(index=False):
        prefix = f"worker.{row.worker}."
        out[prefix + "busy_share"] = row.busy_share
        out[prefix + "compute_share"] = row.compute_share
        out[prefix + "bandwidth_share"] = row.bandwidth_share
        out[prefix + "steps"] = row.steps
        out[prefix + "mean_batch"] = row.mean_batch
        out[prefix + "peak_kv_fraction"] = row.peak_kv_fraction

    return {key: _plain(value) for key, value in out.items()}
