"""Turns engine events into the three tables of the data contract (see sim/trace.py).

Notable features
- Consecutive steps of the same kind for the same request merge into one segment row (a 500-token
  decode is one blue bar, not 500 rows); `step_first`/`step_last` keep which steps it spans.
  This keeps a 10,000-request run to ~100k segment rows.
- Rows are plain Python lists while the run goes; pandas only at the end (cheap per step).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sim.request import Request, RequestState
from sim.trace import REQUEST_COLUMNS, SEGMENT_COLUMNS, STEP_COLUMNS, RunResult

# Column positions in a segment row (a list, so that a merge can extend it in place).
_WORKER, _KIND, _START, _END, _TOKENS, _SLOWED, _RECOMPUTE, _LAST = 1, 2, 3, 4, 5, 6, 7, 9


class TraceRecorder:
    """Collects segment and step rows for one run (all workers)."""

    def __init__(self) -> None:
        self.segment_rows: list[list] = []
        self.step_rows: list[tuple] = []

    def segment(
        self,
        req: Request,
        worker: str,
        kind: str,
        start_s: float,
        end_s: float,
        tokens: int = 0,
        slowed: bool = False,
        recompute: bool = False,
        step: int = -1,
    ) -> None:
        """Add a stretch of `kind` for `req`, merging with its previous one when contiguous."""
        if end_s <= start_s and tokens == 0:
            return  # nothing visible happened (e.g. admitted the instant it arrived)
        last = req.last_segment
        if (
            last is not None
            and last[_END] == start_s
            and last[_KIND] == kind
            and last[_WORKER] == worker
            and last[_SLOWED] == slowed
            and last[_RECOMPUTE] == recompute
        ):
            last[_END] = end_s
            last[_TOKENS] += tokens
            last[_LAST] = step
            return
        row = [req.request_id, worker, kind, start_s, end_s, tokens, slowed, recompute, step, step]
        self.segment_rows.append(row)
        req.last_segment = row

    def step(self, row: tuple) -> None:
        """Add one engine step; `row` follows STEP_COLUMNS."""
        self.step_rows.append(row)

    def result(self, requests: list[Request], meta: dict) -> RunResult:
        """Freeze everything into a RunResult (the three DataFrames + token times)."""
        ttft_slo = meta.get("ttft_slo_s", math.inf)
        tpot_slo = meta.get("tpot_slo_s", math.inf)
        rows = []
        token_times: dict[int, np.ndarray] = {}
        for r in sorted(requests, key=lambda q: q.request_id):
            times = np.frombuffer(r.token_times, dtype=np.float64).copy()
            token_times[r.request_id] = times
            finished = r.state is RequestState.FINISHED
            ttft = r.first_token_s - r.arrival_s if finished else math.nan
            e2e = r.finish_s - r.arrival_s if finished else math.nan
            if finished and r.output_tokens > 1:
                tpot = (r.finish_s - r.first_token_s) / (r.output_tokens - 1)
                max_itl = float(np.max(np.diff(times)))
            else:
                tpot = math.nan
                max_itl = math.nan
            slo_met = finished and ttft <= ttft_slo and (math.isnan(tpot) or tpot <= tpot_slo)
            rows.append((
                r.request_id, r.arrival_s, r.prompt_tokens, r.output_tokens, r.priority,
                r.first_token_s if finished else math.nan, r.finish_s if finished else math.nan,
                ttft, tpot, max_itl, e2e, bool(slo_met), r.preemptions, ">".join(r.workers),
                "finished" if finished else "rejected", r.reject_reason,
            ))  # fmt: skip
        req_df = pd.DataFrame.from_records(rows, columns=list(REQUEST_COLUMNS))
        seg_df = pd.DataFrame.from_records(self.segment_rows, columns=list(SEGMENT_COLUMNS))
        seg_df = seg_df.sort_values(["request_id", "start_s"], kind="stable", ignore_index=True)
        step_df = pd.DataFrame.from_records(self.step_rows, columns=list(STEP_COLUMNS))
        return RunResult(req_df, seg_df, step_df, token_times, meta)
