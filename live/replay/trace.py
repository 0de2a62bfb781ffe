"""What a streaming client measured, as the usual tables (sim/core/trace.py): requests and segments.

A client sees less than the server: when it sent each request, when each streamed token arrived,
and what came back. So the tables hold what a client can know:

requests  the contract's columns, with times on the client's clock (seconds since the replay
          began): arrival_s = when the request was SENT (a cap on concurrent streams may send
          it after its scheduled time, kept in scheduled_s), first_token_s / finish_s = arrival
          of the first / last streamed token. output_tokens is what was ASKED;
          output_tokens_received is what the stream delivered (counted from the server's
          running usage when it reports one, else one per chunk). preemptions is unknown (NaN).
          worker = the endpoint. status: finished | rejected (the server said no: 4xx) |
          failed (timeout, connection, 5xx) | cancelled (Ctrl-C); reject_reason says why.
          Extra columns: scheduled_s, output_tokens_received, prompt_tokens_server (the
          server's usage.prompt_tokens), server_request_id (from the answer's id, when it
          ends in a number, as this project's server writes it), error.
segments  `queued` from sending to the first token (queueing AND prefill: a client cannot tell
          them apart), then `decode` stretches, and a `stall` wherever the gap between two
          tokens is longer than `stall_factor` x the median inter-token gap of the whole run.
          tokens = tokens received in the stretch.
steps     empty: the engine's steps are invisible from outside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sim.core.request import RequestSpec
from sim.core.trace import REQUEST_COLUMNS, SEGMENT_COLUMNS, STEP_COLUMNS, RunResult

EXTRA_COLUMNS = (
    "scheduled_s",
    "output_tokens_received",
    "prompt_tokens_server",
    "server_request_id",
    "error",
)


@dataclass
class Measured:
    """One request as the client saw it (client clock, seconds since the replay began)."""

    spec: RequestSpec
    sent_s: float = math.nan
    token_times: list[float] = field(default_factory=list)  # one entry per token received
    done_s: float = math.nan  # when the stream ended (or failed)
    status: str = "pending"  # finished | rejected | failed | cancelled | pending
    error: str = ""
    prompt_tokens_server: float = math.nan
    cached_tokens: float = math.nan  # usage.prompt_tokens_details.cached_tokens, if reported
    server_request_id: float = math.nan
    text: str = ""


def median_itl(measured: list[Measured]) -> float:
    """Median gap between consecutive tokens over every request (s); NaN without any gap."""
    gaps = [np.diff(m.token_times) for m in measured if len(m.token_times) > 1]
    gaps = np.concatenate(gaps) if gaps else np.zeros(0)
    return float(np.median(gaps)) if gaps.size else math.nan


def tables(
    measured: list[Measured],
    endpoint: str,
    meta: dict,
    stall_factor: float = 3.0,
    ttft_slo_s: float = math.inf,
    tpot_slo_s: float = math.inf,
) -> RunResult:
    """The measured run: requests, segments, (empty) steps, token times."""
    itl = median_itl(measured)
    threshold = stall_factor * itl if math.isfinite(itl) else math.inf
    rows, segs, token_times = [], [], {}
    for m in sorted(measured, key=lambda m: m.spec.request_id):
        s, times = m.spec, np.asarray(m.token_times, dtype=float)
        token_times[s.request_id] = times
        finished = m.status == "finished"
        got = len(times)
        first = times[0] if got else math.nan
        last = times[-1] if got else math.nan
        ttft = first - m.sent_s if finished and got else math.nan
        tpot = (last - first) / (got - 1) if finished and got > 1 else math.nan
        max_itl = float(np.max(np.diff(times))) if got > 1 else math.nan
        e2e = last - m.sent_s if finished and got else math.nan
        ok = finished and ttft <= ttft_slo_s and (math.isnan(tpot) or tpot <= tpot_slo_s)
        rows.append(
            {
                "request_id": s.request_id,
                "arrival_s": m.sent_s,
                "prompt_tokens": s.prompt_tokens,
                "output_tokens": s.output_tokens,
                "priority": s.priority,
                "first_token_s": first if finished else math.nan,
                "finish_s": last if finished else math.nan,
                "ttft_s": ttft,
                "tpot_s": tpot,
                "max_itl_s": max_itl,
                "e2e_s": e2e,
                "slo_met": bool(ok),
                "preemptions": math.nan,  # invisible to a client
                "worker": endpoint,
                "status": m.status,
                "reject_reason": m.error,
                "cached_tokens": m.cached_tokens,  # when the server reports it in its usage
                "scheduled_s": s.arrival_s,
                "output_tokens_received": got,
                "prompt_tokens_server": m.prompt_tokens_server,
                "server_request_id": m.server_request_id,
                "error": m.error,
            }
        )
        segs += _segments(m, times, endpoint, threshold)
    # The contract's columns (whatever this version of sim.core.trace lists; one a client cannot
    # know is NaN), then the replay's own.
    columns = [*REQUEST_COLUMNS, *(c for c in EXTRA_COLUMNS if c not in REQUEST_COLUMNS)]
    requests = pd.DataFrame.from_records(rows, columns=columns)
    segments = pd.DataFrame.from_records(segs, columns=list(SEGMENT_COLUMNS))
    steps = pd.DataFrame({c: [] for c in STEP_COLUMNS})
    meta = {
        **meta,
        "ttft_slo_s": ttft_slo_s,
        "tpot_slo_s": tpot_slo_s,
        "median_itl_s": itl,
        "stall_threshold_s": threshold,
        "stall_factor": stall_factor,
        "workers": {endpoint: {"role": "server", "kv_capacity_tokens": 0}},
    }
    return RunResult(requests, segments, steps, token_times, meta)


def _segments(m: Measured, times: np.ndarray, worker: str, threshold: float) -> list[tuple]:
    """queued -> first token, then decode stretches split by stalls (gaps over threshold)."""

    def row(kind, start, end, tokens=0):
        return (
            m.spec.request_id,
            worker,
            kind,
            float(start),
            float(end),
            int(tokens),
            False,
            False,
            -1,
            -1,
        )

    if math.isnan(m.sent_s):
        return []
    if not len(times):
        end = m.done_s if math.isfinite(m.done_s) else m.sent_s
        return [row("queued", m.sent_s, end)] if end > m.sent_s else []
    out = [row("queued", m.sent_s, times[0], 0)]
    start, tokens = times[0], 0
    for a, b in zip(times[:-1], times[1:], strict=True):
        if b - a > threshold:
            if tokens:
                out.append(row("decode", start, a, tokens))
            out.append(row("stall", a, b))
            start, tokens = b, 0
        tokens += 1
    if tokens:
        out.append(row("decode", start, times[-1], tokens))
    return out
