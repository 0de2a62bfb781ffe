"""Hand-made RunResults for tests: a few rows written out, or one big random run for timing.

Notable features
- `request_row`, `segment_row`, `step_row` fill every column of the `sim.core.trace` contract from a
  few arguments (ttft/tpot/e2e are derived from the times, as the engine derives them).
- `make_run` turns lists of rows into a RunResult with the contract's column order; token times
  default to evenly spaced tokens between each finished request's first token and finish.
- `big_run` builds a random run the size of a long simulation (10,000 requests, 40,000 steps,
  100,000 segments) with numpy, for checking that metrics stay fast.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from sim.core.trace import REQUEST_COLUMNS, SEGMENT_COLUMNS, STEP_COLUMNS, RunResult


def request_row(
    request_id: int,
    arrival_s: float,
    first_token_s: float | None,
    finish_s: float | None,
    *,
    prompt_tokens: int = 100,
    output_tokens: int = 10,
    status: str = "finished",
    preemptions: int = 0,
    worker: str = "I0",
    priority: int = 0,
    max_itl_s: float | None = None,
    reject_reason: str = "",
) -> dict:
    """One requests-table row; a rejected request gets NaN times whatever is passed."""
    if status == "rejected":
        first = finish = ttft = tpot = e2e = max_itl = math.nan
        reject_reason = reject_reason or "kv_capacity"
    else:
        assert first_token_s is not None and finish_s is not None
        first, finish = float(first_token_s), float(finish_s)
        ttft = first - arrival_s
        tpot = (finish - first) / (output_tokens - 1) if output_tokens > 1 else math.nan
        e2e = finish - arrival_s
        max_itl = tpot if max_itl_s is None else max_itl_s
    return {
        "request_id": request_id,
        "arrival_s": float(arrival_s),
        "prompt_tokens": prompt_tokens,
        "output_tokens": output_tokens,
        "priority": priority,
        "first_token_s": first,
        "finish_s": finish,
        "ttft_s": ttft,
        "tpot_s": tpot,
        "max_itl_s": max_itl,
        "e2e_s": e2e,
        "slo_met": False,
        "preemptions": preemptions,
        "worker": worker,
        "status": status,
        "reject_reason": reject_reason,
    }


def segment_row(
    request_id: int,
    worker: str,
    kind: str,
    start_s: float,
    end_s: float,
    *,
    tokens: int = 0,
    slowed: bool = False,
    recompute: bool = False,
    step_first: int = -1,
    step_last: int = -1,
) -> dict:
    """One segments-table row."""
    return {
        "request_id": request_id,
        "worker": worker,
        "kind": kind,
        "start_s": float(start_s),
        "end_s": float(end_s),
        "tokens": tokens,
        "slowed": slowed,
        "recompute": recompute,
        "step_first": step_first,
        "step_last": step_last,
    }


def step_row(
    worker: str,
    step: int,
    start_s: float,
    end_s: float,
    *,
    prefill_tokens: int = 0,
    decode_tokens: int = 0,
    batch_size: int = 1,
    num_prefills: int = 0,
    kv_used_tokens: int = 0,
    kv_capacity_tokens: int = 1000,
    compute_s: float | None = None,
    memory_s: float | None = None,
    overhead_s: float = 0.0,
    comm_s: float = 0.0,
    swap_s: float = 0.0,
    preempted: int = 0,
) -> dict:
    """One steps-table row; by default the whole step is attributed to memory bandwidth."""
    duration = end_s - start_s
    compute = 0.0 if compute_s is None else compute_s
    memory = duration - compute if memory_s is None else memory_s
    return {
        "worker": worker,
        "step": step,
        "start_s": float(start_s),
        "end_s": float(end_s),
        "prefill_tokens": prefill_tokens,
        "decode_tokens": decode_tokens,
        "batch_size": batch_size,
        "num_prefills": num_prefills,
        "kv_used_tokens": kv_used_tokens,
        "kv_capacity_tokens": kv_capacity_tokens,
        "compute_s": compute,
        "memory_s": memory,
        "overhead_s": overhead_s,
        "comm_s": comm_s,
        "swap_s": swap_s,
        "preempted": preempted,
    }


def even_token_times(first_token_s: float, finish_s: float, output_tokens: int) -> np.ndarray:
    """Token times (s) evenly spaced from the first token to the last."""
    return np.linspace(first_token_s, finish_s, output_tokens)


def make_run(
    requests: Iterable[dict],
    segments: Iterable[dict] = (),
    steps: Iterable[dict] = (),
    token_times: Mapping[int, Iterable[float]] | None = None,
    meta: dict | None = None,
) -> RunResult:
    """A RunResult from hand-written rows (columns in the contract's order)."""
    req = pd.DataFrame(list(requests), columns=list(REQUEST_COLUMNS))
    segs = pd.DataFrame(list(segments), columns=list(SEGMENT_COLUMNS))
    stp = pd.DataFrame(list(steps), columns=list(STEP_COLUMNS))
    if token_times is None:
        finished = req[req["status"] == "finished"]
        times = {
            int(r.request_id): even_token_times(r.first_token_s, r.finish_s, r.output_tokens)
            for r in finished.itertuples()
        }
    else:
        times = {int(k): np.asarray(list(v), dtype=float) for k, v in token_times.items()}
    return RunResult(req, segs, stp, times, dict(meta or {}))


def big_run(
    num_requests: int = 10_000,
    num_steps: int = 40_000,
    num_segments: int = 100_000,
    num_workers: int = 4,
    seed: int = 0,
) -> RunResult:
    """A random run of the given size (numbers plausible, not from a real schedule)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(num_requests)
    arrival = np.sort(rng.uniform(0.0, 1000.0, num_requests))
    prompt = rng.integers(50, 4000, num_requests)
    output = rng.integers(1, 400, num_requests)
    rejected = rng.random(num_requests) < 0.05
    ttft = rng.exponential(0.5, num_requests)
    tpot = rng.uniform(0.02, 0.2, num_requests)
    first = arrival + ttft
    finish = first + tpot * (output - 1)
    nan_if_rejected = np.where(rejected, np.nan, 1.0)
    requests = pd.DataFrame(
        {
            "request_id": ids,
            "arrival_s": arrival,
            "prompt_tokens": prompt,
            "output_tokens": output,
            "priority": 0,
            "first_token_s": first * nan_if_rejected,
            "finish_s": finish * nan_if_rejected,
            "ttft_s": ttft * nan_if_rejected,
            "tpot_s": np.where(output > 1, tpot, np.nan) * nan_if_rejected,
            "max_itl_s": tpot * 1.5 * nan_if_rejected,
            "e2e_s": (finish - arrival) * nan_if_rejected,
            "slo_met": False,
            "preemptions": rng.integers(0, 2, num_requests),
            "worker": rng.choice(["P0>D0", "P1>D1"], num_requests),
            "status": np.where(rejected, "rejected", "finished"),
            "reject_reason": np.where(rejected, "kv_capacity", ""),
        }
    )

    # Token times: evenly spaced per finished request, built as one flat array then split.
    kept = ~rejected
    counts = output[kept]
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    flat = np.repeat(first[kept], counts) + offsets * np.repeat(tpot[kept], counts)
    token_times = dict(zip(ids[kept].tolist(), np.split(flat, np.cumsum(counts)[:-1]), strict=True))

    workers = np.array([f"W{i}" for i in range(num_workers)])
    per_worker = num_steps // num_workers
    durations = rng.uniform(0.005, 0.05, (num_workers, per_worker))
    ends = np.cumsum(durations, axis=1)
    compute_frac = rng.random((num_workers, per_worker))
    steps = pd.DataFrame(
        {
            "worker": np.repeat(workers, per_worker),
            "step": np.tile(np.arange(per_worker), num_workers),
            "start_s": (ends - durations).ravel(),
            "end_s": ends.ravel(),
            "prefill_tokens": rng.integers(0, 2048, num_workers * per_worker),
            "decode_tokens": rng.integers(0, 64, num_workers * per_worker),
            "batch_size": rng.integers(1, 64, num_workers * per_worker),
            "num_prefills": rng.integers(0, 3, num_workers * per_worker),
            "kv_used_tokens": rng.integers(0, 100_000, num_workers * per_worker),
            "kv_capacity_tokens": 100_000,
            "compute_s": (durations * compute_frac).ravel(),
            "memory_s": (durations * (1 - compute_frac)).ravel(),
            "overhead_s": 0.0,
            "comm_s": 0.0,
            "swap_s": 0.0,
            "preempted": 0,
        }
    )

    seg_start = rng.uniform(0.0, 1000.0, num_segments)
    seg_len = rng.exponential(0.2, num_segments) * (rng.random(num_segments) > 0.02)
    segments = pd.DataFrame(
        {
            "request_id": rng.integers(0, num_requests, num_segments),
            "worker": rng.choice(workers, num_segments),
            "kind": rng.choice(
                ["queued", "prefill", "decode", "stall", "kv_transfer", "preempted"], num_segments
            ),
            "start_s": seg_start,
            "end_s": seg_start + seg_len,
            "tokens": rng.integers(0, 512, num_segments),
            "slowed": rng.random(num_segments) < 0.1,
            "recompute": False,
            "step_first": rng.integers(0, per_worker, num_segments),
            "step_last": 0,
        }
    )
    segments["step_last"] = segments["step_first"] + 3

    meta = {
        "num_gpus": 4,
        "ttft_slo_s": 1.0,
        "tpot_slo_s": 0.1,
        "policy": "synthetic",
        "workers": {
            str(w): {"role": "colocated", "gpus": 1, "kv_capacity_tokens": 100_000} for w in workers
        },
    }
    return RunResult(requests, segments, steps, token_times, meta)
