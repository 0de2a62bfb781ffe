"""A live server's trace as the simulator's tables: what `ServeEngine.snapshot` adds to them.

The recorder (sim.core.recorder) writes a request's row as it would at the end of a simulation;
a live trace is read while requests are still in the engine, and it is kept in epochs (the
current one and an archive of finished requests, trimmed to the last N). These pure functions
patch and join those tables, outside the engine's lock.
"""

from __future__ import annotations

import pandas as pd

from sim.core.request import RequestState
from sim.core.trace import RunResult

IN_FLIGHT = (
    RequestState.WAITING,
    RequestState.RUNNING,
    RequestState.SWAPPED,
    RequestState.TRANSFERRING,
)


def fix_in_flight(run: RunResult, live: dict, handles: dict, open_waits: list) -> None:
    """Statuses and first tokens of unfinished requests; open waits drawn up to now."""
    req = run.requests
    if len(req):
        status = req["status"].copy()
        first = req["first_token_s"].copy()
        reason = req["reject_reason"].copy()
        for i, rid in enumerate(req["request_id"].tolist()):
            state, first_s, _n, why = live[rid]
            if state in IN_FLIGHT:
                status.iat[i] = state.value
                first.iat[i] = first_s
            elif state is RequestState.REJECTED and why.startswith("aborted"):
                status.iat[i] = "aborted"
            reason.iat[i] = why
        req["status"], req["first_token_s"], req["reject_reason"] = status, first, reason
        req["ttft_s"] = req["ttft_s"].where(
            req["status"] == "finished", req["first_token_s"] - req["arrival_s"]
        )
    if open_waits:
        extra = pd.DataFrame(
            [
                {
                    "request_id": rid,
                    "worker": worker,
                    "kind": kind,
                    "start_s": s,
                    "end_s": e,
                    "tokens": 0,
                    "slowed": False,
                    "recompute": False,
                    "step_first": -1,
                    "step_last": -1,
                }
                for rid, worker, kind, s, e in open_waits
                if e > s
            ]
        )
        if len(extra):
            run.segments = pd.concat([run.segments, extra], ignore_index=True).sort_values(
                ["request_id", "start_s"], kind="stable", ignore_index=True
            )


def concat_runs(a: RunResult, b: RunResult) -> RunResult:
    """Two epochs of one trace as one (b's meta wins)."""
    return RunResult(
        pd.concat([a.requests, b.requests], ignore_index=True),
        pd.concat([a.segments, b.segments], ignore_index=True),
        pd.concat([a.steps, b.steps], ignore_index=True),
        {**a.token_times, **b.token_times},
        dict(b.meta),
    )


def keep_last(run: RunResult, n: int) -> RunResult:
    """The last n requests (by id), their segments, and the steps since the first one arrived."""
    keep = run.requests.sort_values("request_id").tail(n)
    ids = set(keep["request_id"].tolist())
    since = float(keep["arrival_s"].min())
    return RunResult(
        keep.reset_index(drop=True),
        run.segments[run.segments["request_id"].isin(ids)].reset_index(drop=True),
        run.steps[run.steps["end_s"] >= since].reset_index(drop=True),
        {rid: times for rid, times in run.token_times.items() if rid in ids},
        dict(run.meta),
    )
