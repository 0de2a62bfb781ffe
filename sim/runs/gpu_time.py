"""Where the GPU time went: each worker's busy, compute-bound and bandwidth-bound shares, its batch
sizes, KV cache use over time and each request's stalls. Shares are fractions in [0, 1], times s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from sim.core.trace import RunResult
from sim.runs.run_arrays import all_request_ids, nan_max, nan_mean, nan_sum

if TYPE_CHECKING:
    import pandas as pd


def run_duration_s(run: RunResult) -> float:
    """Run duration, s = last finish_s - first arrival_s; 0.0 when no request finished."""
    return duration_of(run.columns("requests"))


def duration_of(req: Mapping[str, np.ndarray]) -> float:
    """run_duration_s from the requests table's columns (numpy only, as `summarize` reads them)."""
    arrival = np.asarray(req["arrival_s"], dtype=float)
    if len(arrival) == 0:
        return 0.0
    last_finish = nan_max(req["finish_s"])
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
    rows = utilisation_rows(run.columns("steps"), run.meta, duration)
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


def utilisation_rows(steps: Mapping[str, np.ndarray], meta: Mapping, duration: float) -> list[dict]:
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
            "busy_s": float(nan_sum(step_s[mine])),
            "compute_s": float(nan_sum(compute[mine])),
            "memory_s": float(nan_sum(memory[mine])),
            "mean_batch": nan_mean(batch[mine]),
            "prefill_tokens": int(nan_sum(prefill[mine])),
            "decode_tokens": int(nan_sum(decode[mine])),
            "peak_kv_fraction": nan_max(kv[mine]),
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
    index = pd.Index(all_request_ids(run), name="request_id")
    return per_request.reindex(index, fill_value=0.0).astype(float).rename("stall_s")
