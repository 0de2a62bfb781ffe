"""Metrics: what a run's tables say about latency, throughput, SLOs and how busy each GPU was.

Every function here is a pure function of a `RunResult` (or of one of its tables): it reads the
requests / segments / steps tables and the token times described in `sim.core.trace`, and never
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
from typing import TYPE_CHECKING

import numpy as np

from sim.core.trace import RunResult

if TYPE_CHECKING:
    import pandas as pd
# pandas is imported by the functions that return frames, not here: `summarize` reads a run's
# columns as numpy arrays (RunResult.columns), so `python -m sim run --json` never loads pandas.

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


def _sum(values: pd.Series | np.ndarray) -> float | int:
    """Sum of the values, NaN (and None) skipped, as pandas' Series.sum adds them."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iub":
        return arr.sum()
    return np.nansum(np.asarray(arr, dtype=float))


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
    if run.token_flat is not None:  # (the recorder's own flat copy: the same, already joined)
        ids, counts, times = run.token_flat
        return np.repeat(ids, counts), times
    ids = np.fromiter(run.token_times.keys(), dtype=np.int64, count=len(run.token_times))
    arrays = [np.asarray(times, dtype=float).ravel() for times in run.token_times.values()]
    lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    return np.repeat(ids, lengths), np.concatenate(arrays)


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
    if hasattr(values, "to_numpy"):  # a pandas Series (or Index)
        arr = values.to_numpy(dtype=float, na_value=np.nan)
    else:
        arr = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)
    arr = arr.ravel()
    arr = arr[~np.isnan(arr)]
    keys = [f"p{p:g}" for p in ps]
    if arr.size == 0:
        return dict.fromkeys(keys, math.nan)
    return {key: float(v) for key, v in zip(keys, _linear_percentiles(arr, ps), strict=True)}


def _linear_percentiles(arr: np.ndarray, ps: Sequence[float]) -> np.ndarray:
    """np.percentile(arr, ps) (method "linear", no NaNs), with the same float operations, from
    ONE partition at every index the percentiles need; numpy's own partitions once per call and
    imports numpy.ma on its first (about 35 ms of a 1.3 s CLI run, sim/cli.py)."""
    q = np.true_divide(np.asarray(ps, dtype=float), 100)
    virtual = (arr.size - 1) * q  # numpy's "linear": (n - 1) * quantile
    below = np.floor(virtual)
    lo = below.astype(np.intp)
    hi = np.minimum(lo + 1, arr.size - 1)
    part = np.partition(arr, sorted({*lo.tolist(), *hi.tolist()}))  # (np.unique imports ma)
    a, b = part[lo], part[hi]
    t = virtual - below
    diff = b - a  # numpy's _lerp: from the nearer end, so that t = 1 gives b exactly
    return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)


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
    return _duration(run.columns("requests"))


def _duration(req: Mapping[str, np.ndarray]) -> float:
    arrival = np.asarray(req["arrival_s"], dtype=float)
    if len(arrival) == 0:
        return 0.0
    last_finish = _nan_max(req["finish_s"])
    first_arrival = float(np.nanmin(arrival))
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
    import pandas as pd

    duration = run_duration_s(run) if duration_s is None else duration_s
    rows = _utilisation(run.columns("steps"), run.meta, duration)
    frame = pd.DataFrame(rows, columns=["worker", *UTILISATION_COLUMNS])
    for column in ("steps", "prefill_tokens", "decode_tokens"):
        frame[column] = frame[column].astype(np.int64)
    for column in (
        "busy_share",
        "compute_share",
        "bandwidth_share",
        "mean_batch",
        "busy_s",
        "peak_kv_fraction",
    ):
        frame[column] = frame[column].astype(float)
    return frame


UTILISATION_COLUMNS = (
    "busy_share",
    "compute_share",
    "bandwidth_share",
    "steps",
    "mean_batch",
    "prefill_tokens",
    "decode_tokens",
    "busy_s",
    "peak_kv_fraction",
)


def _utilisation(steps: Mapping[str, np.ndarray], meta: Mapping, duration: float) -> list[dict]:
    """worker_utilisation's rows from the steps table's columns (numpy only; sums pairwise)."""
    workers = np.asarray(steps["worker"])
    names = sorted(set(map(str, workers.tolist())))  # sorted, as a groupby sorts
    if workers.dtype == object and len(names) > 1:
        workers = workers.astype(str)  # (one elementwise == per worker below)
    start = np.asarray(steps["start_s"], dtype=float)
    step_s = np.asarray(steps["end_s"], dtype=float) - start
    compute = np.asarray(steps["compute_s"], dtype=float)
    memory = np.asarray(steps["memory_s"], dtype=float)
    batch = np.asarray(steps["batch_size"])
    prefill, decode = np.asarray(steps["prefill_tokens"]), np.asarray(steps["decode_tokens"])
    capacity = np.asarray(steps["kv_capacity_tokens"], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        kv = np.asarray(steps["kv_used_tokens"], dtype=float) / np.where(
            capacity == 0, np.nan, capacity
        )
    found = {}
    for name in names:
        mine = workers == name if len(names) > 1 else slice(None)
        found[name] = {
            "steps": len(step_s[mine]),
            "busy_s": float(_sum(step_s[mine])),
            "compute_s": float(_sum(compute[mine])),
            "memory_s": float(_sum(memory[mine])),
            "mean_batch": _nan_mean(batch[mine]),
            "prefill_tokens": int(_sum(prefill[mine])),
            "decode_tokens": int(_sum(decode[mine])),
            "peak_kv_fraction": _nan_max(kv[mine]),
        }
    idle = {
        "steps": 0,
        "busy_s": 0.0,
        "compute_s": 0.0,
        "memory_s": 0.0,
        "mean_batch": math.nan,
        "prefill_tokens": 0,
        "decode_tokens": 0,
        "peak_kv_fraction": math.nan,
    }
    # Idle workers from the run's description, in the order the run lists them.
    listed = [str(w) for w in (meta.get("workers") or {})]
    rows = []
    for name in listed + [w for w in found if w not in listed]:
        w = found.get(name, idle)
        busy = w["busy_s"]
        rows.append(
            {
                "worker": name,
                "busy_share": busy / duration if duration > 0 else math.nan,
                "compute_share": w["compute_s"] / busy if busy else math.nan,
                "bandwidth_share": w["memory_s"] / busy if busy else math.nan,
                "steps": w["steps"],
                "mean_batch": w["mean_batch"],
                "prefill_tokens": w["prefill_tokens"],
                "decode_tokens": w["decode_tokens"],
                "busy_s": busy,
                "peak_kv_fraction": w["peak_kv_fraction"],
            }
        )
    return rows


def kv_use_over_time(run: RunResult) -> pd.DataFrame:
    """KV cache use per worker as a step function: one row per step, at the step's start_s.

    Columns: worker, t_s, kv_used_tokens, kv_capacity_tokens, fraction = used / capacity.
    Each value holds until the worker's next row (plot with drawstyle="steps-post").
    """
    import pandas as pd

    steps = run.steps.sort_values(["worker", "start_s"], kind="stable")
    capacity = steps["kv_capacity_tokens"]
    return pd.DataFrame(
        {
            "worker": steps["worker"].astype(str).to_numpy(),
            "t_s": steps["start_s"].to_numpy(dtype=float),
            "kv_used_tokens": steps["kv_used_tokens"].to_numpy(),
            "kv_capacity_tokens": capacity.to_numpy(),
            "fraction": (steps["kv_used_tokens"] / capacity.replace(0, np.nan)).to_numpy(
                dtype=float
            ),
        }
    )


def stall_time(run: RunResult) -> pd.Series:
    """Per request (index request_id): total seconds spent in "stall" segments; 0 if none."""
    import pandas as pd

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
    import pandas as pd

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
    import pandas as pd

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
    import pandas as pd

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
    return pd.DataFrame(
        {
            "t_s": np.arange(counts.size) * bin_s,
            "output_tokens": counts.astype(np.int64),
            "output_tokens_per_s": counts / bin_s,
        }
    )


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
    req = run.columns("requests")  # numpy columns: no DataFrame (or pandas) needed
    status = np.asarray(req["status"])
    done = status == "finished"
    duration = _duration(req)

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
        out[f"{name}_mean_s"] = _nan_mean(values)
    out["max_itl_s"] = _nan_max(finished("max_itl_s"))

    # Throughput over the whole run.
    out["input_tokens_per_s"] = _ratio(_sum(finished("prompt_tokens")), duration)
    out["output_tokens_per_s"] = _ratio(_sum(finished("output_tokens")), duration)
    out["requests_per_s"] = _ratio(int(done.sum()), duration)  # finished requests per second
    out["preemptions_total"] = int(_sum(req["preemptions"]))
    # Prefix caching: share of prompt tokens the cache served at each request's first admission.
    if "cached_tokens" in req:
        out["prefix_cache_hit_rate"] = _ratio(
            _sum(req["cached_tokens"]), _sum(req["prompt_tokens"])
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
    out["mean_batch"] = _nan_mean(steps["batch_size"])
    capacity = np.asarray(steps["kv_capacity_tokens"], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        used = np.asarray(steps["kv_used_tokens"], dtype=float)
        out["peak_kv_fraction"] = _nan_max(used / np.where(capacity == 0, np.nan, capacity))
    for row in _utilisation(steps, run.meta, duration):
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
