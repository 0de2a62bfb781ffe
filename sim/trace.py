"""The data contract every run yields, simulated or live: three tables plus token times.

Tables (pandas DataFrames; times in seconds from the start of the run):

requests  one row per request
  request_id, arrival_s, prompt_tokens, output_tokens, priority,
  first_token_s, finish_s, ttft_s, tpot_s, max_itl_s, e2e_s, slo_met, preemptions,
  worker (e.g. "I0", or "P0>D1" when prefilled on P0 and decoded on D1),
  status ("finished" | "rejected"), reject_reason ("" when finished),
  cached_tokens (prompt tokens the prefix cache served at its first admission; 0 without one)
  Rejected requests have NaN times and slo_met False.
  tpot_s = (finish_s - first_token_s) / (output_tokens - 1), NaN when output_tokens == 1.

segments  the Gantt: one row per contiguous stretch of one kind for one request
  request_id, worker, kind, start_s, end_s, tokens, slowed, recompute, step_first, step_last
  kind in SEGMENT_KINDS. tokens = tokens computed in the stretch (prefill chunk tokens, decode
  tokens, KV tokens transferred; 0 for queued/stall/preempted). A `cached` segment spans the
  step in which a request's prompt started after a prefix-cache hit; its tokens were NOT
  computed (they came from the cache) and it overlaps that step's `prefill` segment in time.
  slowed = a decode that shared its step with another request's prefill chunk. recompute = a
  prefill that recomputes KV lost to a preemption.

steps     one row per engine step (one model forward pass) per worker
  worker, step, start_s, end_s, prefill_tokens, decode_tokens, batch_size, num_prefills,
  kv_used_tokens, kv_capacity_tokens, compute_s, memory_s, overhead_s, comm_s, swap_s, preempted
  compute_s / memory_s: the part of the step's time the cost model attributes to compute-bound
  and to bandwidth-bound operators (a live run fills them from the calibrated model).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

SEGMENT_KINDS = ("queued", "prefill", "decode", "stall", "kv_transfer", "preempted", "cached")

REQUEST_COLUMNS = (
    "request_id", "arrival_s", "prompt_tokens", "output_tokens", "priority",
    "first_token_s", "finish_s", "ttft_s", "tpot_s", "max_itl_s", "e2e_s", "slo_met",
    "preemptions", "worker", "status", "reject_reason", "cached_tokens",
)  # fmt: skip
SEGMENT_COLUMNS = (
    "request_id", "worker", "kind", "start_s", "end_s", "tokens", "slowed", "recompute",
    "step_first", "step_last",
)  # fmt: skip
STEP_COLUMNS = (
    "worker", "step", "start_s", "end_s", "prefill_tokens", "decode_tokens", "batch_size",
    "num_prefills", "kv_used_tokens", "kv_capacity_tokens", "compute_s", "memory_s",
    "overhead_s", "comm_s", "swap_s", "preempted",
)  # fmt: skip


@dataclass
class RunResult:
    """Everything one run produced. `meta` describes the run (see below)."""

    requests: pd.DataFrame
    segments: pd.DataFrame
    steps: pd.DataFrame
    # request_id -> times (s) at which each output token became visible, shape (n_emitted,)
    token_times: dict[int, np.ndarray] = field(default_factory=dict)
    # policy, topology, gpu, model, num_gpus, ttft_slo_s, tpot_slo_s, duration_s,
    # workers: {name: {"role": "colocated"|"prefill"|"decode", "gpus": int,
    #                  "kv_capacity_tokens": int}}, config: the run's knobs as a flat dict
    meta: dict = field(default_factory=dict)
