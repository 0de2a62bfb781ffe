"""Export: strict JSON, a Chrome/Perfetto trace with one event per step and segment, CSV files."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from sim.core.trace import REQUEST_COLUMNS
from sim.runs.export import chrome_trace, to_json_dict, write_outputs
from sim.runs.metrics import summarize
from tests.fake_runs import big_run, make_run, request_row, segment_row, step_row
from tests.test_metrics import two_worker_run


def _no_nan(value) -> bool:
    """True if no float in the nested structure is NaN or infinite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_no_nan(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_nan(v) for v in value)
    return True


# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------


def test_to_json_dict_round_trips_without_nan():
    run = two_worker_run()
    doc = to_json_dict(run)
    text = json.dumps(doc, allow_nan=False)  # would raise on NaN / inf
    back = json.loads(text)
    assert back == doc and _no_nan(back)
    assert set(back) == {"summary", "requests"}
    assert back["summary"] == pytest.approx(
        {
            k: (None if isinstance(v, float) and math.isnan(v) else v)
            for k, v in summarize(run).items()
        }
    )
    assert len(back["requests"]) == 3
    assert list(back["requests"][0]) == list(REQUEST_COLUMNS)
    rejected = back["requests"][2]
    assert rejected["status"] == "rejected" and rejected["ttft_s"] is None
    assert back["requests"][0]["ttft_s"] == pytest.approx(0.5)
    assert type(back["requests"][0]["output_tokens"]) is int
    assert back["requests"][0]["slo_met"] is False


def test_to_json_dict_makes_odd_values_plain():
    run = make_run([request_row(0, 0.0, 0.1, 0.1, output_tokens=1)])  # TPOT NaN
    summary = {"a": np.float32(1.5), "b": math.inf, "c": (1, np.int64(2)), "d": {"e": math.nan}}
    doc = to_json_dict(run, summary)
    json.dumps(doc, allow_nan=False)
    assert doc["summary"] == {"a": 1.5, "b": None, "c": [1, 2], "d": {"e": None}}
    assert doc["requests"][0]["tpot_s"] is None


# ---------------------------------------------------------------------------------------------
# Chrome trace
# ---------------------------------------------------------------------------------------------


def test_chrome_trace_has_one_event_per_step_and_non_empty_segment():
    run = two_worker_run()
    trace = chrome_trace(run)
    json.dumps(trace, allow_nan=False)
    assert trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    steps = [e for e in complete if e["cat"] == "step"]
    segments = [e for e in complete if e["cat"] != "step"]
    assert len(steps) == len(run.steps) == 5
    non_empty = run.segments[run.segments["end_s"] > run.segments["start_s"]]
    assert len(segments) == len(non_empty) == 7  # the two empty segments are skipped
    assert all(e["dur"] > 0 for e in complete)

    # ts ascending on every track (pid, tid)
    tracks = defaultdict(list)
    for e in complete:
        tracks[e["pid"], e["tid"]].append(e["ts"])
    assert all(ts == sorted(ts) for ts in tracks.values())


def test_chrome_trace_names_tracks_and_events():
    trace = chrome_trace(two_worker_run())
    events = trace["traceEvents"]
    process = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    assert list(process.values()) == ["P0", "D0", "D1", "requests"]
    pid = {name: p for p, name in process.items()}
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert threads[pid["requests"], 1] == "request 1"
    assert threads[pid["P0"], 0] == "steps"
    sort_index = {
        e["tid"]: e["args"]["sort_index"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_sort_index"
    }
    assert sort_index == {0: 0, 1: 1, 2: 2}

    first_step = next(e for e in events if e.get("cat") == "step" and e["pid"] == pid["P0"])
    assert first_step["name"] == "step 0: 400 prefill + 0 decode tokens"
    assert (first_step["ts"], first_step["dur"]) == (0.0, 500_000.0)  # microseconds
    assert first_step["args"]["compute_s"] == pytest.approx(0.4)
    assert first_step["tid"] == 0

    slowed = next(
        e for e in events if e["ph"] == "X" and e["pid"] == pid["requests"] and e["args"]["slowed"]
    )
    assert slowed["name"] == "decode" and slowed["tid"] == 0
    assert slowed["ts"] == pytest.approx(1_750_000.0) and slowed["dur"] == pytest.approx(250_000)
    assert slowed["args"]["tokens"] == 1 and slowed["args"]["recompute"] is False
    recompute = next(
        e
        for e in events
        if e["ph"] == "X" and e["pid"] == pid["requests"] and e["args"]["recompute"]
    )
    assert (recompute["name"], recompute["tid"]) == ("prefill", 1)

    counters = [e for e in events if e["ph"] == "C" and e["pid"] == pid["D0"]]
    assert [c["args"]["kv_used_tokens"] for c in counters] == [401, 800, 203]
    rejected = [e for e in events if e["ph"] == "i"]
    assert len(rejected) == 1 and rejected[0]["tid"] == 2


def test_chrome_trace_skips_zero_length_steps():
    run = make_run(
        [request_row(0, 0.0, 0.1, 0.2, output_tokens=2)],
        [segment_row(0, "I0", "prefill", 0.0, 0.1, tokens=100)],
        [step_row("I0", 0, 0.0, 0.1, prefill_tokens=100), step_row("I0", 1, 0.1, 0.1)],
    )
    complete = [e for e in chrome_trace(run)["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == 2 and all(e["dur"] > 0 for e in complete)


def test_chrome_trace_of_a_big_run_is_strict_json():
    run = big_run(num_requests=500, num_steps=2000, num_segments=5000)
    trace = chrome_trace(run)
    json.dumps(trace, allow_nan=False)
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    non_empty = int((run.segments["end_s"] > run.segments["start_s"]).sum())
    assert len(complete) == len(run.steps) + non_empty
    tracks = defaultdict(list)
    for e in complete:
        tracks[e["pid"], e["tid"]].append(e["ts"])
    assert all(np.all(np.diff(ts) >= 0) for ts in tracks.values())


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def test_write_outputs_writes_five_files(tmp_path):
    run = two_worker_run()
    out = tmp_path / "nested" / "run1"
    paths = write_outputs(run, out)
    names = {"requests.csv", "segments.csv", "steps.csv", "summary.json", "trace.json"}
    assert set(paths) == names
    assert {p.name for p in out.iterdir()} == names

    requests = pd.read_csv(out / "requests.csv")
    assert requests.columns.tolist() == run.requests.columns.tolist()
    assert requests["ttft_s"].tolist()[:2] == pytest.approx([0.5, 0.5])
    assert pd.read_csv(out / "segments.csv").columns.tolist() == run.segments.columns.tolist()
    assert len(pd.read_csv(out / "steps.csv")) == 5

    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"summary", "meta"}
    assert summary["summary"]["finished"] == 2
    assert summary["meta"]["workers"]["P0"]["role"] == "prefill"
    assert _no_nan(summary)

    trace = json.loads((out / "trace.json").read_text())
    assert len([e for e in trace["traceEvents"] if e["ph"] == "X"]) == 5 + 7


def test_write_outputs_uses_the_given_summary(tmp_path):
    run = two_worker_run()
    write_outputs(run, tmp_path, summary={"custom": 1.0, "missing": math.nan})
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["summary"] == {"custom": 1.0, "missing": None}
