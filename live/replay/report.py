"""What a replay measured, summed up, and how far the simulator's prediction of it is.

- summary_of: sim.runs.metrics.summarize of the measured run, plus what only a replay knows: failed
  requests, how many got exactly the output and prompt tokens asked, goodput, the median
  inter-token gap and the stall threshold, how late requests were sent (`send_late_*`: sent
  minus scheduled, e.g. behind the concurrency cap), the prompt method and the clock offset.
- predict: the simulator's run of the same workload (arrivals as scheduled).
- errors: per request, TTFT, TPOT and E2E measured vs predicted, in seconds and percent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from sim.core.request import RequestSpec
from sim.core.trace import RunResult

if TYPE_CHECKING:
    from live.replay.replayer import ReplayResult


def summary_of(result: ReplayResult) -> dict:
    """sim.runs.metrics.summarize of the measured run, plus what only a replay knows."""
    from sim.runs.latency import percentiles
    from sim.runs.metrics import summarize

    run = result.run
    req = run.requests
    out = summarize(run)
    duration = out.get("duration_s") or math.nan
    late = (req["arrival_s"] - req["scheduled_s"]).dropna()
    out.update(
        {
            "failed": int(req["status"].isin(["failed", "cancelled"]).sum()),
            "exact_output": int((req["output_tokens_received"] == req["output_tokens"]).sum()),
            # usage.prompt_tokens == prompt_tokens (0 from a server that reports no usage)
            "exact_prompt": int((req["prompt_tokens_server"] == req["prompt_tokens"]).sum()),
            "goodput_req_per_s": (out.get("slo_met", 0) / duration) if duration else math.nan,
            "median_itl_s": run.meta.get("median_itl_s", math.nan),
            "stall_threshold_s": run.meta.get("stall_threshold_s", math.nan),
            "send_late_p50_s": percentiles(late)["p50"],
            "send_late_p99_s": percentiles(late)["p99"],
            "send_late_max_s": float(late.max()) if len(late) else math.nan,
            "interrupted": int(result.interrupted),
        }
    )
    for key in ("prompt_method", "server_clock_offset_s", "server_clock_rtt_s"):
        if key in run.meta:
            out[key] = run.meta[key]
    return out


def predict(requests: Sequence[RequestSpec], config) -> RunResult:
    """The simulator's run of the same workload (arrivals as scheduled)."""
    from sim.cluster.topologies import simulate

    return simulate(list(requests), config)


def errors(measured: RunResult, predicted: RunResult) -> pd.DataFrame:
    """Per request: TTFT, TPOT and E2E measured vs predicted (s), and the errors (s and %)."""
    a = measured.requests.set_index("request_id")
    b = predicted.requests.set_index("request_id")
    out = pd.DataFrame(index=a.index)
    for name in ("ttft", "tpot", "e2e"):
        out[f"{name}_measured_s"] = a[f"{name}_s"]
        out[f"{name}_predicted_s"] = b[f"{name}_s"].reindex(a.index)
        diff = out[f"{name}_predicted_s"] - out[f"{name}_measured_s"]
        out[f"{name}_err_s"] = diff
        out[f"{name}_err_pct"] = diff.abs() / out[f"{name}_measured_s"] * 100
    return out


__all__ = ["errors", "predict", "summary_of"]
