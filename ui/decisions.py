"""Who prefilled where, and why: one row per request, one column per decider.

A disaggregated run keeps each request's Decision (sim/cluster/deciders.py) in
`run.meta["decisions"]`; the worker column of its request table says where it went ("P0>D0":
prefilled on P0, decoded on D0; "D0": prefilled locally on D0). `decision_table` puts both in
words a student can check against the decider's rule. Pure: text comes through `T`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pandas as pd


def path(worker: str, T: Callable[..., str]) -> str:
    """ "P0>D0" -> "P0 → D0"; "D0" -> "D0 (local)": where the prompt was prefilled."""
    hops = worker.split(">")
    if len(hops) == 2:
        return T("decide.path.remote", p=hops[0], d=hops[1])
    return T("decide.path.local", d=hops[0])


def why(d: dict, T: Callable[..., str]) -> str:
    """The comparison the decider made for one request, with its numbers."""
    uncached, prompt = d["uncached_tokens"], d["prompt_tokens"]
    figures = {
        "uncached": f"{uncached:,}",
        "cached": f"{d['cached_tokens']:,}",
        "t": f"{d['token_threshold']:,.0f}" if not math.isnan(d["token_threshold"]) else "",
    }
    if d["mode"] == "always":
        return ""  # it reads nothing
    if d["mode"] == "llm-d-prefix":
        if d["token_threshold"] <= 0:
            return T("decide.why.llmd_zero")
        return T("decide.why.llmd_remote" if d["remote"] else "decide.why.llmd_local", **figures)
    if math.isnan(d["ratio_threshold"]):  # Dynamo's prefill_load: no prompt test
        return T("decide.why.remote" if d["remote"] else "decide.why.local")
    ratio = uncached / max(prompt, 1)
    figures |= {"ratio": f"{ratio:.2f}", "rt": f"{d['ratio_threshold']:g}"}
    if uncached >= d["token_threshold"]:
        return T("decide.why.isl_long", **figures)
    if ratio >= d["ratio_threshold"]:
        return T("decide.why.isl_ratio", **figures)
    return T("decide.why.isl_local", **figures)


def decision_table(runs: Sequence[tuple[str, object]], T: Callable[..., str]) -> pd.DataFrame:
    """Rows: requests (in id order). Columns: the prompt, then per run "path · why".

    `runs`: (label, RunResult) of disaggregated runs of the SAME requests, each with its
    decisions; a run without them (an older cache, `conditional`) raises ValueError."""
    table = {}
    for label, run in runs:
        decisions = run.meta.get("decisions")
        if decisions is None:
            raise ValueError(f"{label}: this run kept no decisions (a disaggregated run does)")
        by_id = {d["request_id"]: d for d in decisions}
        q = run.requests
        if not table:
            # named as the timeline's rows name them (R0 / 요청 0)
            table[T("decide.col.request")] = [
                T("label.request_row", id=int(r)) for r in q.request_id
            ]
            table[T("decide.col.prompt")] = [f"{n:,}" for n in q.prompt_tokens]
        cells = []
        for rid, worker in zip(q.request_id, q.worker, strict=True):
            reason = why(by_id[rid], T) if rid in by_id else ""
            cells.append(f"{path(worker, T)} · {reason}" if reason else path(worker, T))
        table[label] = cells
    return pd.DataFrame(table)


def remote_counts(runs: Sequence[tuple[str, object]]) -> dict[str, int]:
    """How many requests each run prefilled on P (the rest prefilled locally on D)."""
    return {label: int(sum(d["remote"] for d in run.meta["decisions"])) for label, run in runs}
