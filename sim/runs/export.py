"""Export a run: CSV tables, a JSON summary and a timeline that Perfetto / chrome://tracing open.

Files written by `write_outputs(run, out_dir)`:
  requests.csv, segments.csv, steps.csv  the three tables of `sim.core.trace`, one row per line
  summary.json  {"summary": summarize(run), "meta": run.meta}
  trace.json    `chrome_trace(run)`: open it at https://ui.perfetto.dev (or chrome://tracing)

Notable features
- Strict JSON: NaN and +-inf become null and numpy numbers become plain Python numbers, so every
  file passes `json.dumps(..., allow_nan=False)` and any JSON reader can load it.
- The timeline uses the Chrome Trace Event format: "X" (complete) events with ts/dur in
  microseconds. Each worker is a process ("P0", "D1", ...) whose thread shows its engine steps,
  named like "step 12: 2048 prefill + 31 decode tokens", plus a counter track of KV cache use.
  A process "requests" holds one thread per request ("request 7") with its segments
  (queued, prefill, decode, stall, kv_transfer, preempted), so one can see where each request
  waited and which steps slowed it down.
- Columns are converted to plain Python values column by column (not cell by cell), so a run
  with 100,000 segments exports in a few seconds.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sim.core.trace import RunResult
from sim.runs.atomic_out import write_folder
from sim.runs.metrics import summarize

if TYPE_CHECKING:
    import pandas as pd

US_PER_S = 1_000_000  # Chrome trace times are microseconds


def json_safe(value: object) -> object:
    """`value` with only JSON types: NaN/inf -> None, numpy -> Python, tuples -> lists."""
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):
        return json_safe(value.item())
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    pd = sys.modules.get("pandas")  # a pandas value only if pandas was ever imported
    if isinstance(value, list | tuple | set | frozenset | np.ndarray) or (
        pd is not None and isinstance(value, pd.Series)
    ):
        return [json_safe(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]
    if is_dataclass(value) and not isinstance(value, type):
        return json_safe(asdict(value))
    if pd is not None and (value is pd.NA or value is pd.NaT):
        return None
    return str(value)  # Paths, enums, timestamps: their readable form


def _column_values(column: pd.Series) -> list:
    """One column as a list of plain Python values, missing and non-finite values as None."""
    import pandas as pd

    values = column.tolist()
    if pd.api.types.is_float_dtype(column.dtype):
        bad = ~np.isfinite(column.to_numpy(dtype=float, na_value=np.nan))
    else:
        bad = column.isna().to_numpy()
    if bad.any():
        values = [None if is_bad else v for v, is_bad in zip(values, bad.tolist(), strict=True)]
    if column.dtype == object:
        values = [json_safe(v) for v in values]
    return values


def records(frame: pd.DataFrame) -> list[dict]:
    """The rows of `frame` as JSON-ready dicts (column name -> plain value)."""
    names = [str(c) for c in frame.columns]
    columns = [_column_values(frame[c]) for c in frame.columns]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def _array_values(column: np.ndarray) -> list:
    """`_column_values` of a numpy column (numbers, bools, or Python objects)."""
    values = column.tolist()
    if column.dtype.kind == "f":
        bad = ~np.isfinite(column)
        if bad.any():
            values = [None if b else v for v, b in zip(values, bad.tolist(), strict=True)]
    elif column.dtype == object and not all(type(v) is str for v in values):  # (names: as is)
        values = [
            None if v is None or (isinstance(v, float) and math.isnan(v)) else json_safe(v)
            for v in values
        ]
    return values


def _table_records(run: RunResult, name: str) -> list[dict]:
    """`records` of one of the run's tables, from its numpy columns if it has no frame yet."""
    if run.has_frame(name):
        return records(getattr(run, name))
    columns = run.columns(name)
    names = list(columns)
    values = [_array_values(np.asarray(columns[c])) for c in names]
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]


def json_text(document: dict) -> str:
    """`document` (JSON types only, as to_json_dict makes them) as compact JSON text: with
    orjson when it is installed (requirements.txt has it: ~5x faster than json on 10,000
    requests), else json.dumps. (NaN is already null there: orjson would write null, json.dumps
    would refuse it.)"""
    try:
        import orjson
    except ImportError:  # (a lean install without it)
        return json.dumps(document, allow_nan=False, separators=(",", ":"))
    return orjson.dumps(document).decode()


def to_json_dict(run: RunResult, summary: Mapping | None = None) -> dict:
    """{"summary": {...}, "requests": [one dict per request]}, safe for json.dumps(allow_nan=False).

    The summary defaults to `summarize(run)`; NaN anywhere becomes null.
    """
    summary = summarize(run) if summary is None else summary
    return {"summary": json_safe(summary), "requests": _table_records(run, "requests")}


def _worker_order(run: RunResult) -> list[str]:
    """Workers in the order run.meta lists them, then any other worker seen in the steps."""
    listed = [str(w) for w in (run.meta.get("workers") or {})]
    seen = sorted(set(run.steps["worker"].astype(str).unique()) - set(listed))
    return listed + seen


def _micros(frame: pd.DataFrame) -> tuple[list[float], list[float]]:
    """Start (ts) and duration (dur) of each row in microseconds, rounded to 1 ns."""
    start = frame["start_s"].to_numpy(dtype=float)
    end = frame["end_s"].to_numpy(dtype=float)
    return (np.round(start * US_PER_S, 3).tolist(), np.round((end - start) * US_PER_S, 3).tolist())


def _metadata(name: str, pid: int, tid: int | None, args: dict) -> dict:
    """One "M" (metadata) event: names and orders processes and threads."""
    event = {"ph": "M", "name": name, "pid": pid, "args": args}
    if tid is not None:
        event["tid"] = tid
    return event


def chrome_trace(run: RunResult) -> dict:
    """The run as a Chrome Trace Event dict: one process per worker, one "requests" process.

    Steps and segments become "X" events (ts, dur in us); zero-length ones are skipped. Each
    worker also gets a "KV cache (tokens)" counter. Tracks are sorted by start time.
    """
    workers = _worker_order(run)
    pid_of = {worker: pid for pid, worker in enumerate(workers, start=1)}
    requests_pid = len(workers) + 1
    roles = run.meta.get("workers") or {}
    events: list[dict] = []

    # Track names: processes "P0", "D1", ..., "requests"; threads "steps", "request 7".
    for worker, pid in pid_of.items():
        events.append(_metadata("process_name", pid, None, {"name": worker}))
        events.append(_metadata("process_sort_index", pid, None, {"sort_index": pid}))
        info = roles.get(worker)
        if isinstance(info, Mapping) and info.get("role"):
            label = f"{info['role']}, {info.get('gpus', '?')} GPU(s)"
            events.append(_metadata("process_labels", pid, None, {"labels": label}))
        events.append(_metadata("thread_name", pid, 0, {"name": "steps"}))
    events.append(_metadata("process_name", requests_pid, None, {"name": "requests"}))
    events.append(_metadata("process_sort_index", requests_pid, None, {"sort_index": requests_pid}))
    request_ids = np.union1d(
        run.requests["request_id"].to_numpy(dtype=np.int64),
        run.segments["request_id"].to_numpy(dtype=np.int64),
    )
    for rid in request_ids.tolist():
        events.append(_metadata("thread_name", requests_pid, rid, {"name": f"request {rid}"}))
        events.append(_metadata("thread_sort_index", requests_pid, rid, {"sort_index": rid}))

    # Engine steps: one X event per step on its worker's thread, plus the KV cache counter.
    steps = run.steps.sort_values(["worker", "start_s"], kind="stable")
    steps = steps.assign(worker=steps["worker"].astype(str))
    step_ts, step_dur = _micros(steps)
    for args, ts, dur in zip(records(steps), step_ts, step_dur, strict=True):
        pid = pid_of[args["worker"]]
        if dur > 0:
            events.append(
                {
                    "name": (
                        f"step {args['step']}: {args['prefill_tokens']} prefill + "
                        f"{args['decode_tokens']} decode tokens"
                    ),
                    "cat": "step",
                    "ph": "X",
                    "ts": ts,
                    "dur": dur,
                    "pid": pid,
                    "tid": 0,
                    "args": args,
                }
            )
        if args["kv_used_tokens"] is not None:
            events.append(
                {
                    "name": "KV cache (tokens)",
                    "ph": "C",
                    "ts": ts,
                    "pid": pid,
                    "args": {"kv_used_tokens": args["kv_used_tokens"]},
                }
            )

    # Request segments: one X event per non-empty segment on the request's thread.
    segs = run.segments
    segs = segs[segs["end_s"] > segs["start_s"]].sort_values(
        ["request_id", "start_s"], kind="stable"
    )
    seg_ts, seg_dur = _micros(segs)
    columns = [
        _column_values(segs[c])
        for c in (
            "request_id",
            "kind",
            "tokens",
            "slowed",
            "recompute",
            "worker",
            "step_first",
            "step_last",
        )
    ]
    events.extend(
        {
            "name": kind,
            "cat": kind,
            "ph": "X",
            "ts": ts,
            "dur": dur,
            "pid": requests_pid,
            "tid": rid,
            "args": {
                "tokens": tokens,
                "slowed": slowed,
                "recompute": recompute,
                "worker": worker,
                "step_first": first,
                "step_last": last,
            },
        }
        for ts, dur, rid, kind, tokens, slowed, recompute, worker, first, last in zip(
            seg_ts, seg_dur, *columns, strict=True
        )
        if dur > 0  # a stretch shorter than 1 ns rounds to nothing
    )

    # Rejections: an instant event where the request arrived.
    rejected = run.requests[run.requests["status"] == "rejected"]
    for row in records(rejected[["request_id", "arrival_s", "reject_reason"]]):
        events.append(
            {
                "name": f"rejected: {row['reject_reason'] or '?'}",
                "cat": "rejected",
                "ph": "i",
                "s": "t",
                "ts": round(row["arrival_s"] * US_PER_S, 3),
                "pid": requests_pid,
                "tid": row["request_id"],
            }
        )

    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_outputs(
    run: RunResult, out_dir: str | Path, summary: Mapping | None = None
) -> dict[str, Path]:
    """Write requests.csv, segments.csv, steps.csv, summary.json and trace.json into out_dir.

    summary.json is {"summary": summary or summarize(run), "meta": run.meta}; trace.json is
    `chrome_trace(run)`. Returns {file name: path}. The folder is replaced whole or not at all,
    and a second writer of it at the same time fails (OutputBusy, sim/runs/atomic_out.py).
    """
    names = ("requests.csv", "segments.csv", "steps.csv", "summary.json", "trace.json")
    summary = summarize(run) if summary is None else summary

    def write(folder: Path) -> None:  # a fresh folder, put in place whole (sim/runs/atomic_out.py)
        run.requests.to_csv(folder / "requests.csv", index=False)
        run.segments.to_csv(folder / "segments.csv", index=False)
        run.steps.to_csv(folder / "steps.csv", index=False)
        document = {"summary": json_safe(summary), "meta": json_safe(run.meta)}
        (folder / "summary.json").write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
        with (folder / "trace.json").open("w") as f:
            json.dump(chrome_trace(run), f, allow_nan=False, separators=(",", ":"))

    out = write_folder(out_dir, names, write)
    return {name: out / name for name in names}
