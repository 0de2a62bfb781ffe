"""The numbers behind the animated Gantt: bars per phase, clipped widths and the cursor readout.

Pure numpy and pandas (no plotly, no streamlit), so every number the figure shows can be tested
on its own. `ui.gantt` turns these arrays into a plotly figure.

Notable features
- `split_bars` sorts a run's segments into the drawn phases; a decode that shared its step with
  a prefill chunk ("slowed") gets its own hatched phase, so every segment is exactly one bar.
  For very thin rows it can first merge each request's back-to-back segments of one kind (a
  1,000-request chat run: 10,524 segments -> 2,980 bars), which is what keeps playback smooth;
  a merged decode is hatched if any of its parts within 1/200 of the time axis was slowed (the
  evidence survives the merge, and a plain stretch stays plain).
- `clip_widths` computes all frames at once: width(k) = max(0, min(end, t_k) - start), one
  (frames x bars) array, so a bar grows from nothing to its full length as the cursor passes.
- `readout` answers "what is happening at time t?" for every frame with `np.searchsorted` over
  sorted arrays (O((segments + frames) log n), no Python loop over segments):
  queue = segments of kind queued/preempted covering t, running = prefill/decode/stall (and a
  speculative verify step's accepted/rejected parts) covering t,
  KV in use = sum over workers of kv_used_tokens of the worker's latest step started at or
  before t (the step-function convention of `sim.runs.gpu_time.kv_use_over_time`), divided by
  the sum of the workers' capacities, tokens = output tokens emitted at or before t over all
  requests.
- Segments cover the half-open interval [start_s, end_s), so two back-to-back segments of one
  request (decode then stall) never count that request twice, and a zero-length one never counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.core.trace import RunResult
from ui.theme import PHASES

# Drawn phases in drawing order (later = on top). "decode_slowed" is a decode segment with
# slowed=True, drawn blue with a hatch. "accepted" and "rejected" are the two parts of a
# speculative verify step (sim/core/trace.py): the tokens kept, then the drafts thrown away.
# "cached" spans the same step as the prefill chunk it preceded, so it is drawn last, as a thin
# band over that orange bar.
_AFTER_DECODE = PHASES.index("decode") + 1
TRACE_PHASES = (*PHASES[:_AFTER_DECODE], "decode_slowed", *PHASES[_AFTER_DECODE:])
WAITING_KINDS = ("queued", "preempted")  # counted in the queue length
# counted in the running batch (a verify step's accepted and rejected parts are back to back,
# half-open: the request counts once)
RUNNING_KINDS = ("prefill", "decode", "accepted", "rejected", "stall")


@dataclass(frozen=True)
class Bars:
    """The segments of one drawn phase, one entry per bar (all arrays have the same length)."""

    row: np.ndarray  # row label of each bar, "R<request_id>" or a page's own (object array)
    start: np.ndarray  # s, float64
    end: np.ndarray  # s, float64
    worker: np.ndarray  # object array of str
    tokens: np.ndarray  # int64
    step_first: np.ndarray  # int64, -1 when the segment spans no engine step
    step_last: np.ndarray  # int64
    recompute: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.start)


@dataclass(frozen=True)
class Readout:
    """What the cursor shows at each frame time (arrays of length num_frames)."""

    queue: np.ndarray  # requests waiting (queued or preempted)
    running: np.ndarray  # requests in the running batch (prefill, decode or stall)
    kv_fraction: np.ndarray  # KV in use / KV capacity, summed over all workers (0..1)
    tokens: np.ndarray  # output tokens emitted so far, summed over requests


def row_label(request_id: int) -> str:
    """The y-axis label of one request: R0, R1, ... (a page passes its language's own, e.g.
    ui.labels.request_row: 요청 0, 요청 1, ...)"""
    return f"R{request_id}"


def request_ids(run: RunResult) -> np.ndarray:
    """Sorted ids of every request in the run (requests table and segments)."""
    ids = np.concatenate(
        [
            run.requests["request_id"].to_numpy(dtype=np.int64),
            run.segments["request_id"].to_numpy(dtype=np.int64),
        ]
    )
    return np.unique(ids)


MERGE_BINS = 200  # a merged bar's hatching is decided per 1/200 of the time axis (~3.5 px) ...
MERGE_BINS_MANY_ROWS = 20  # ... or per 1/20 when hundreds of sub-pixel rows hide the pattern
# anyway (1,000 requests at 40 req/s: 3,463 bars, not 23,897 at 200 bins)


def _reduce(cols: dict[str, np.ndarray], first: np.ndarray) -> dict[str, np.ndarray]:
    """One segment per stretch starting at the indices `first`: start of the first part, end of
    the last, tokens summed, a flag set if ANY part had it, the step range spanning the parts."""
    last = np.append(first[1:], len(cols["start_s"])) - 1
    return {
        "request_id": cols["request_id"][first],
        "worker": cols["worker"][first],
        "kind": cols["kind"][first],
        "start_s": cols["start_s"][first],
        "end_s": cols["end_s"][last],
        "tokens": np.add.reduceat(cols["tokens"], first),
        "slowed": np.logical_or.reduceat(cols["slowed"], first),
        "recompute": np.logical_or.reduceat(cols["recompute"], first),
        "step_first": cols["step_first"][first],
        "step_last": np.maximum.reduceat(cols["step_last"], first),
    }


def _stretch_starts(cols: dict[str, np.ndarray], *extra: np.ndarray) -> np.ndarray:
    """Where a new stretch begins: another request, kind or worker, a gap in time, or a change
    in any of the `extra` per-segment keys."""
    rid, kind, worker = cols["request_id"], cols["kind"], cols["worker"]
    new = np.ones(len(rid), dtype=bool)
    new[1:] = (
        (rid[1:] != rid[:-1])
        | (kind[1:] != kind[:-1])
        | (worker[1:] != worker[:-1])
        | (cols["start_s"][1:] != cols["end_s"][:-1])
    )
    for key in extra:
        new[1:] |= key[1:] != key[:-1]
    return np.flatnonzero(new)


def _merge_back_to_back(segs: pd.DataFrame, bins: int = MERGE_BINS) -> pd.DataFrame:
    """Join each request's back-to-back segments of one kind and worker into fewer segments.

    Two passes, so a thin row keeps the evidence without a tiny slowed step hatching a whole
    plain stretch: (1) the short parts (under a bin) that start in the same 1/`bins` of the
    time axis join, and the joined bar counts as slowed if ANY part was; it is drawn at least
    one bin wide (a one-step slowdown stays visible); (2) neighbouring bars of equal "slowed"
    join again (a long plain or a long slowed stretch is one bar). Stalls are their own kind, so
    they stay separate white bars drawn over the decodes. Vectorised: sort, flag where a stretch
    begins, reduce with np.*.reduceat.
    """
    segs = segs.sort_values(["request_id", "start_s"], kind="stable")
    cols = {
        "request_id": segs["request_id"].to_numpy(dtype=np.int64),
        "worker": segs["worker"].astype(str).to_numpy(dtype=object),
        "kind": segs["kind"].to_numpy(dtype=object),
        "start_s": segs["start_s"].to_numpy(dtype=float),
        "end_s": segs["end_s"].to_numpy(dtype=float),
        "tokens": segs["tokens"].to_numpy(dtype=np.int64),
        "slowed": segs["slowed"].to_numpy(dtype=bool),
        "recompute": segs["recompute"].to_numpy(dtype=bool),
        "step_first": segs["step_first"].to_numpy(dtype=np.int64),
        "step_last": segs["step_last"].to_numpy(dtype=np.int64),
    }
    span = float(cols["end_s"].max() - cols["start_s"].min())
    width = span / bins if span > 0 else 1.0
    bin_of = np.floor(cols["start_s"] / width)
    long = cols["end_s"] - cols["start_s"] >= width  # drawn wide enough already: its own bar
    bin_of[long] = -1.0 - np.flatnonzero(long)  # a key no other part has
    cols = _reduce(cols, _stretch_starts(cols, bin_of))
    cols = _reduce(cols, _stretch_starts(cols, cols["slowed"], cols["recompute"]))
    # A slowed bar narrower than a bin is drawn one bin wide (on top of its plain neighbour:
    # PHASES draws decode_slowed later), so a one-step slowdown can still be seen on a thin row.
    thin = cols["slowed"] & (cols["end_s"] - cols["start_s"] < width)
    cols["end_s"] = np.where(thin, cols["start_s"] + width, cols["end_s"])
    return pd.DataFrame(cols)


def split_bars(
    run: RunResult,
    merge: bool = False,
    label: Callable[[int], str] = row_label,
    only: np.ndarray | None = None,
    bins: int = MERGE_BINS,
) -> dict[str, Bars]:
    """The run's segments grouped by drawn phase (every phase present, maybe empty).

    `label` names each request's row (R0 by default); it is called once per request. `only`:
    the request ids whose bars to keep (all by default).

    merge=True first joins back-to-back segments of one request and kind, per 1/`bins` of the
    time axis (see `_merge_back_to_back`): for rows a few pixels tall, where a one-step stretch
    is invisible anyway, it cuts a long run's bars about tenfold, and the browser's work too.
    """
    segs = run.segments
    if only is not None:  # a zoom on some rows (ui.gantt_rows): the other requests' bars go
        segs = segs[segs["request_id"].isin(np.asarray(only).tolist())]
    segs = _merge_back_to_back(segs, bins) if merge and len(segs) else segs
    kind = segs["kind"].to_numpy(dtype=object)
    slowed = segs["slowed"].to_numpy(dtype=bool)
    ids, where = np.unique(segs["request_id"].to_numpy(dtype=np.int64), return_inverse=True)
    names = np.array([label(i) for i in ids.tolist()] or [""], dtype=object)
    rows = names[where] if len(where) else np.array([], dtype=object)
    columns = {
        "start": segs["start_s"].to_numpy(dtype=float),
        "end": segs["end_s"].to_numpy(dtype=float),
        "worker": segs["worker"].astype(str).to_numpy(dtype=object),
        "tokens": segs["tokens"].to_numpy(dtype=np.int64),
        "step_first": segs["step_first"].to_numpy(dtype=np.int64),
        "step_last": segs["step_last"].to_numpy(dtype=np.int64),
        "recompute": segs["recompute"].to_numpy(dtype=bool),
    }
    bars = {}
    for phase in TRACE_PHASES:
        if phase == "decode":
            mask = (kind == "decode") & ~slowed
        elif phase == "decode_slowed":
            mask = (kind == "decode") & slowed
        else:
            mask = kind == phase
        bars[phase] = Bars(row=rows[mask], **{name: col[mask] for name, col in columns.items()})
    return bars


def run_end(run: RunResult) -> float:
    """The latest segment end (s); 0 for a run without segments."""
    return float(run.segments["end_s"].max()) if len(run.segments) else 0.0


def frame_times(t_end: float, num_frames: int) -> np.ndarray:
    """`num_frames` evenly spaced cursor times (s) from 0 to t_end, both included."""
    if num_frames < 2:
        raise ValueError("num_frames must be at least 2 (the empty and the full chart)")
    return np.linspace(0.0, float(t_end), num_frames)


def time_decimals(t_end: float, num_frames: int) -> int:
    """Decimals (0..3) that tell neighbouring frame times apart, for labels like 't = 1.2 s'.

    The smallest d with step * 10**d >= 2, so a 1.5 s step shows as 1.5 (not 2) and a 4 s step
    as whole seconds.
    """
    step = t_end / max(num_frames - 1, 1)
    return 0 if step <= 0 else int(min(3, max(0, math.ceil(math.log10(2 / step)))))


def clip_widths(start: np.ndarray, end: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Bar widths (s) at each time, shape (frames, bars): max(0, min(end, t) - start), float32.

    float32 halves the JSON (plotly ships numpy arrays as base64) and its 7 digits are far finer
    than a pixel; the static chart uses the same dtype so that the last frame equals it exactly.
    """
    clipped = np.minimum(end[None, :], times[:, None]) - start[None, :]
    return np.maximum(clipped, 0.0).astype(np.float32)


def full_widths(bars: Bars) -> np.ndarray:
    """Full bar widths (s) as float32, the same values the last clip frame carries."""
    return np.maximum(bars.end - bars.start, 0.0).astype(np.float32)


def _covering(segs: pd.DataFrame, kinds: tuple[str, ...], times: np.ndarray) -> np.ndarray:
    """How many segments of `kinds` cover each time: #(start <= t) - #(end <= t)."""
    chosen = segs[segs["kind"].isin(kinds)]
    starts = np.sort(chosen["start_s"].to_numpy(dtype=float))
    ends = np.sort(chosen["end_s"].to_numpy(dtype=float))
    started = np.searchsorted(starts, times, side="right")
    ended = np.searchsorted(ends, times, side="right")
    return (started - ended).astype(np.int64)


def _kv_fraction(run: RunResult, times: np.ndarray) -> np.ndarray:
    """KV tokens in use over KV capacity, both summed over workers, at each time."""
    steps = run.steps
    used = np.zeros(len(times))
    capacity = 0.0
    for worker, group in steps.groupby("worker", sort=True):
        group = group.sort_values("start_s", kind="stable")
        starts = group["start_s"].to_numpy(dtype=float)
        kv = group["kv_used_tokens"].to_numpy(dtype=float)
        idx = np.searchsorted(starts, times, side="right") - 1  # latest step started <= t
        used += np.where(idx >= 0, kv[np.maximum(idx, 0)], 0.0)
        info = run.meta.get("workers", {}).get(str(worker), {})
        capacity += float(info.get("kv_capacity_tokens") or group["kv_capacity_tokens"].max())
    return used / capacity if capacity > 0 else np.zeros(len(times))


def _sorted_token_times(run: RunResult) -> np.ndarray:
    """Every output token's emission time (s), all requests together, sorted."""
    arrays = [np.asarray(v, dtype=float).ravel() for v in run.token_times.values()]
    return np.sort(np.concatenate(arrays)) if arrays else np.zeros(0)


def readout(run: RunResult, times: np.ndarray) -> Readout:
    """Queue length, running batch, KV in use and tokens so far at each time."""
    segs = run.segments
    return Readout(
        queue=_covering(segs, WAITING_KINDS, times),
        running=_covering(segs, RUNNING_KINDS, times),
        kv_fraction=_kv_fraction(run, times),
        tokens=np.searchsorted(_sorted_token_times(run), times, side="right").astype(np.int64),
    )


def tokens_per_request(run: RunResult, ids: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Output tokens each request emitted at or before each time, shape (len(ids), frames)."""
    counts = np.zeros((len(ids), len(times)), dtype=np.int64)
    for row, request_id in enumerate(ids.tolist()):
        emitted = run.token_times.get(request_id)
        if emitted is not None and len(emitted):
            counts[row] = np.searchsorted(np.sort(np.asarray(emitted)), times, side="right")
    return counts
