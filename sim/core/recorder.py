"""Turns engine events into the three tables of the data contract (see sim/core/trace.py).

Notable features
- Consecutive steps of the same kind for the same request merge into one segment (a 500-token
  decode is one blue bar, not 500 rows); `step_first`/`step_last` keep which steps it spans.
- Segments are stored column by column in typed arrays (8 bytes a value instead of a Python object
  each): a 10,000-request prefill-first run has millions of stall/decode stretches, and this keeps
  them to ~60 bytes each and turns them into a DataFrame without copying row by row.
- Codes instead of strings while the run goes (kind and worker are small ints); names at the end.
"""

from __future__ import annotations

import math
from array import array

import numpy as np

from sim.core.request import Request, RequestState
from sim.core.trace import (
    REQUEST_COLUMNS,
    SEGMENT_COLUMNS,
    SEGMENT_KINDS,
    STEP_COLUMNS,
    Columns,
    RunResult,
)

KIND_CODE = {kind: code for code, kind in enumerate(SEGMENT_KINDS)}
SLOWED, RECOMPUTE = 1, 2  # bit flags of a segment
assert len(SEGMENT_KINDS) <= 16


def seg_code(worker: int, kind: int, flags: int = 0) -> int:
    """A segment's worker, kind and flags in one int (TraceRecorder.code)."""
    return worker << 8 | kind << 4 | flags


STEP_DTYPES = {
    name: object if name == "worker" else float if name.endswith("_s") else np.int64
    for name in STEP_COLUMNS
}


def stuck_reason(req: Request) -> str:
    """Why a request the engine never rejected did not finish: the run ended with no step able
    to move it (e.g. vLLM V0 with swap: a lone request swapped out that can never come back
    above the watermark; the real engine would spin on it forever)."""
    if req.state is RequestState.FINISHED:
        return ""
    return (
        f"never finished: the run ended with it {req.state.value} and no step could move it "
        "(too little KV cache for it: raise kv_capacity_tokens)"
    )


class TraceRecorder:
    """Collects segment and step rows for one run (all workers)."""

    def __init__(self) -> None:
        self.worker_names: list[str] = []
        self._worker_code: dict[str, int] = {}
        self.req = array("q")  # request_id
        # Worker, kind and flags in one int (`seg_code`): a stretch continues a request's last
        # one if it starts where that ended with the same code (one comparison, one column).
        self.code = array("q")
        self.start = array("d")  # seconds
        self.end = array("d")
        self.tokens = array("q")
        self.first = array("q")  # first and last step index covered (-1: not a step)
        self.last = array("q")
        self.step_rows: list[tuple] = []
        # Runs of decode steps taken at once (sim/fastforward/steps.py), see step_run: per run
        # (worker code, first step, steps, KV capacity, KV blocks held before it, block size,
        # KV tokens in use after it, whether its batch-size terms are looked up), and one value
        # per step in typed arrays.
        self.step_runs: list[tuple[int, int, int, int, int, int, int, bool]] = []
        self.run_start, self.run_end = array("d"), array("d")
        self.run_batch, self.run_need = array("q"), array("q")
        self.run_memory = array("d")
        self.run_freed_row, self.run_freed = array("q"), array("q")  # (row, blocks freed there)
        # Runs whose batch-size terms are the worker's tables (worker code -> compute, overhead,
        # comm by batch size): looked up at the end; the other runs' values, in row order.
        self.run_terms: dict[int, tuple] = {}
        self.run_compute, self.run_overhead, self.run_comm = array("d"), array("d"), array("d")
        # Admission steps inside runs (sim/fastforward/admission.py): (run row, prefill tokens,
        # prompts,
        # compute_s, overhead_s, comm_s), written over the decode-only values of their rows.
        self.run_mixed: list[tuple[int, int, int, float, float, float]] = []

    def worker_code(self, name: str) -> int:
        """A small int standing for a worker (or link) name."""
        code = self._worker_code.get(name)
        if code is None:
            code = self._worker_code[name] = len(self.worker_names)
            self.worker_names.append(name)
        return code

    def add(
        self,
        req: Request,
        worker: int,
        kind: int,
        start_s: float,
        end_s: float,
        tokens: int = 0,
        flags: int = 0,
        step: int = -1,
    ) -> None:
        """Add a stretch for `req` (codes, not names), merging with its last one if contiguous."""
        i = req.last_segment
        code = worker << 8 | kind << 4 | flags  # seg_code, inline
        if i >= 0 and self.end[i] == start_s and self.code[i] == code:
            self.end[i] = end_s
            self.tokens[i] += tokens
            self.last[i] = step
            return
        req.last_segment = len(self.req)
        self.req.append(req.request_id)
        self.code.append(code)
        self.start.append(start_s)
        self.end.append(end_s)
        self.tokens.append(tokens)
        self.first.append(step)
        self.last.append(step)

    def add_same(
        self,
        reqs: list,
        code: int,
        start_s: float,
        end_s: float,
        tokens: int,
        first: int,
        last: int,
    ) -> None:
        """A new stretch for each of `reqs`, all alike but for the request (`code`: seg_code;
        no merging: the caller found that none continues its request's last one)."""
        m = len(reqs)
        if not m:
            return
        base = len(self.req)
        for i, r in enumerate(reqs, base):
            r.last_segment = i
        if m < 3:  # one or two: appending is cheaper than building an array to repeat
            for r in reqs:
                self.req.append(r.request_id)
                self.code.append(code)
                self.start.append(start_s)
                self.end.append(end_s)
                self.tokens.append(tokens)
                self.first.append(first)
                self.last.append(last)
            return
        self.req.extend([r.request_id for r in reqs])
        self.code.extend(array("q", (code,)) * m)  # (an array times m: the fastest fill)
        self.start.extend(array("d", (start_s,)) * m)
        self.end.extend(array("d", (end_s,)) * m)
        self.tokens.extend(array("q", (tokens,)) * m)
        self.first.extend(array("q", (first,)) * m)
        self.last.extend(array("q", (last,)) * m)

    def add_columns(self, req_ids, codes, starts, ends, tokens, first, last) -> int:
        """New stretches given as numpy columns (int64, int64, float64, float64, int64, int64,
        int64; no merging); returns the index of the first (sim/fastforward/decode_run.py books a
        long run's stretches this way)."""
        base = len(self.req)
        for column, values in (
            (self.req, req_ids),
            (self.code, codes),
            (self.start, starts),
            (self.end, ends),
            (self.tokens, tokens),
            (self.first, first),
            (self.last, last),
        ):
            column.frombytes(values.tobytes())
        return base

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
        """`add` with names; a wait that took no time is not recorded."""
        if end_s <= start_s and tokens == 0:
            return  # nothing visible happened (e.g. admitted the instant it arrived)
        flags = (SLOWED if slowed else 0) | (RECOMPUTE if recompute else 0)
        self.add(
            req, self.worker_code(worker), KIND_CODE[kind], start_s, end_s, tokens, flags, step
        )

    def step(self, row: tuple) -> None:
        """Add one engine step; `row` follows STEP_COLUMNS."""
        self.step_rows.append(row)

    def step_run(
        self,
        worker: str,
        first_step: int,
        times,
        batch,
        need,
        kv_base: int,
        block_size: int,
        freed,
        kv_last: int,
        kv_capacity: int,
        memory,
        terms=None,
        compute=None,
        overhead=None,
        comm=None,
        mixed=(),
    ) -> None:
        """Add a run of decode-only steps at once (sim/fastforward/steps.py): step j of the run is
        engine step first_step + j, from times[j] to times[j + 1], with batch[j] decodes and
        memory[j] memory seconds. KV in use after step j: (kv_base + need[j] - the blocks
        `freed` (pairs (step, blocks), 1-based steps) by then) * block_size, kv_last after the
        last. The compute, overhead and comm terms are either given per step, or `terms`
        (tables of them by batch size, which only ever grow) are looked up at the end. One row
        per step in the steps table. `mixed`: the run's admission steps, (j, prefill tokens,
        prompts, compute_s, overhead_s, comm_s) each; their batch[j] counts the decodes."""
        k = len(batch)
        code = self.worker_code(worker)
        row = len(self.run_batch) - 1  # (step f is row row + f)
        for j, *values in mixed:
            self.run_mixed.append((row + 1 + j, *values))
        self.step_runs.append(
            (code, first_step, k, kv_capacity, kv_base, block_size, kv_last, terms is not None)
        )
        self.run_start.extend(times[:k])
        self.run_end.extend(times[1 : k + 1])
        self.run_batch.extend(batch)
        self.run_need.extend(need)
        self.run_memory.extend(memory)
        if freed:
            self.run_freed_row.extend([row + f for f, _ in freed])
            self.run_freed.extend([blocks for _, blocks in freed])
        if terms is not None:
            self.run_terms[code] = terms
        else:
            self.run_compute.extend(compute)
            self.run_overhead.extend(overhead)
            self.run_comm.extend(comm)

    def _run_columns(self, worker, lengths, batch) -> dict[str, np.ndarray]:
        """The runs' KV in use and batch-size terms, one value per row."""
        _, _, _, _, base, block, last, looked = (
            np.array(c) for c in zip(*self.step_runs, strict=True)
        )
        starts = np.cumsum(lengths) - lengths
        freed = np.zeros(len(batch), dtype=np.int64)
        np.add.at(
            freed,
            np.frombuffer(self.run_freed_row, dtype=np.int64),
            np.frombuffer(self.run_freed, dtype=np.int64),
        )
        gone = np.cumsum(freed)
        gone -= np.repeat(gone[starts] - freed[starts], lengths)  # by then, within its run
        need = np.frombuffer(self.run_need, dtype=np.int64)
        used = (np.repeat(base, lengths) + need - gone) * np.repeat(block, lengths)
        used[starts + lengths - 1] = last
        out = {"kv_used_tokens": used}
        looked_rows = np.repeat(looked.astype(bool), lengths)
        rows_of = np.repeat(worker, lengths)
        for i, name in enumerate(("compute_s", "overhead_s", "comm_s")):
            column = np.zeros(len(batch))
            column[~looked_rows] = np.frombuffer(
                (self.run_compute, self.run_overhead, self.run_comm)[i], dtype=np.float64
            )
            for code, tables in self.run_terms.items():
                mine = looked_rows & (rows_of == code)
                column[mine] = np.array(tables[i], dtype=np.float64)[batch[mine]]
            out[name] = column
        return out

    def steps_columns(self) -> dict[str, np.ndarray]:
        """The steps table as columns: one row per step, in the order the steps ended."""
        names = list(STEP_COLUMNS)
        rows = self.step_rows
        if not self.step_runs:
            return _from_rows(rows, names, strings=("worker",))
        flat = list(zip(*rows, strict=True)) if rows else [()] * len(names)
        steps = {
            name: np.array(col, dtype=STEP_DTYPES[name])
            for name, col in zip(names, flat, strict=True)
        }
        worker, first, lengths, capacity = (
            np.array(c) for c in list(zip(*self.step_runs, strict=True))[:4]
        )
        total = int(lengths.sum())
        offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)
        batch = np.frombuffer(self.run_batch, dtype=np.int64)
        runs = {  # the runs' rows (the columns not given are 0 there)
            "worker": np.array(self.worker_names, dtype=object)[np.repeat(worker, lengths)],
            "step": np.repeat(first, lengths) + np.arange(total) - offsets,
            "start_s": np.frombuffer(self.run_start, dtype=np.float64),
            "end_s": np.frombuffer(self.run_end, dtype=np.float64),
            "memory_s": np.frombuffer(self.run_memory, dtype=np.float64),
            "decode_tokens": batch,
            "batch_size": batch,
            "kv_capacity_tokens": np.repeat(capacity, lengths),
            **self._run_columns(worker, lengths, batch),
        }
        # Each row straight to its place in the order the steps ended (stable: on a tie the
        # other steps come first, then the runs', each in the order it was written).
        at_steps, at_runs = _merge_order(steps["end_s"], runs["end_s"])
        table = {}
        for name in names:
            column = np.zeros(len(rows) + total, dtype=STEP_DTYPES[name])
            if name in runs:
                column[at_runs] = runs[name]
            column[at_steps] = steps[name]
            table[name] = column
        if self.run_mixed:  # admission steps: a prefill rode along with the decodes
            at, tokens, prompts, compute, overhead, comm = (
                np.array(c) for c in zip(*self.run_mixed, strict=True)
            )
            at = at_runs[at]
            table["prefill_tokens"][at] = tokens
            table["num_prefills"][at] = prompts
            table["batch_size"][at] += prompts
            table["compute_s"][at] = compute
            table["overhead_s"][at] = overhead
            table["comm_s"][at] = comm
        return table

    def segments_columns(self) -> dict[str, np.ndarray]:
        """The segments table as columns, by request and start time."""
        code = np.frombuffer(self.code, dtype=np.int64)
        flags = code & 0xF
        table = {
            "request_id": np.frombuffer(self.req, dtype=np.int64),
            "worker": np.array(self.worker_names, dtype=object)[code >> 8],
            "kind": np.array(SEGMENT_KINDS, dtype=object)[(code >> 4) & 0xF],
            "start_s": np.frombuffer(self.start, dtype=np.float64),
            "end_s": np.frombuffer(self.end, dtype=np.float64),
            "tokens": np.frombuffer(self.tokens, dtype=np.int64),
            "slowed": (flags & SLOWED) > 0,
            "recompute": (flags & RECOMPUTE) > 0,
            "step_first": np.frombuffer(self.first, dtype=np.int64),
            "step_last": np.frombuffer(self.last, dtype=np.int64),
        }
        order = np.lexsort((table["start_s"], table["request_id"]))  # stable
        return {name: table[name][order] for name in SEGMENT_COLUMNS}

    def result(self, requests: list[Request], meta: dict, final: bool = False) -> RunResult:
        """Freeze everything into a RunResult (the three DataFrames + token times). `final`:
        nothing is recorded after this, so the segments are built only if someone reads them
        (a recorder that goes on, like the server's, gives a snapshot of now)."""
        ttft_slo = meta.get("ttft_slo_s", math.inf)
        tpot_slo = meta.get("tpot_slo_s", math.inf)
        ordered = sorted(requests, key=lambda q: q.request_id)
        # Every token time in one array (each request's a slice of it), and each request's
        # largest gap between tokens from one pass over all the gaps.
        counts = np.array([len(r.token_times) for r in ordered], dtype=np.int64)
        everything = array("d")
        for r in ordered:
            everything += r.token_times
        flat = np.frombuffer(everything, dtype=np.float64)
        starts = np.cumsum(counts) - counts
        gaps = np.zeros(len(flat))  # gaps[i] = flat[i + 1] - flat[i] (in place: 8 bytes a token)
        np.subtract(flat[1:], flat[:-1], out=gaps[:-1])
        many = counts > 1
        bounds = np.stack([starts[many], starts[many] + counts[many] - 1], axis=1).ravel()
        max_gap = np.full(len(ordered), math.nan)
        if len(bounds):
            max_gap[many] = np.maximum.reduceat(gaps, bounds)[::2]
        token_times: dict[int, np.ndarray] = {}
        rows = []
        for r, start, count, gap in zip(
            ordered, starts.tolist(), counts.tolist(), max_gap.tolist(), strict=True
        ):
            token_times[r.request_id] = flat[start : start + count]
            finished = r.state is RequestState.FINISHED
            ttft = r.first_token_s - r.arrival_s if finished else math.nan
            e2e = r.finish_s - r.arrival_s if finished else math.nan
            if finished and r.output_tokens > 1:
                tpot = (r.finish_s - r.first_token_s) / (r.output_tokens - 1)
                max_itl = gap
            else:
                tpot = math.nan
                max_itl = math.nan
            slo_met = finished and ttft <= ttft_slo and (math.isnan(tpot) or tpot <= tpot_slo)
            rows.append(
                (
                    r.request_id,
                    r.arrival_s,
                    r.prompt_tokens,
                    r.output_tokens,
                    r.priority,
                    r.first_token_s if finished else math.nan,
                    r.finish_s if finished else math.nan,
                    ttft,
                    tpot,
                    max_itl,
                    e2e,
                    bool(slo_met),
                    r.preemptions,
                    ">".join(r.workers),
                    "finished" if finished else "rejected",
                    r.reject_reason or (stuck_reason(r) if final else ""),
                    r.cached_tokens,
                )
            )
        requests = _from_rows(rows, REQUEST_COLUMNS, strings=("worker", "status", "reject_reason"))
        segments = (
            Columns(make=self.segments_columns) if final else Columns(self.segments_columns())
        )
        ids = np.fromiter(token_times, dtype=np.int64, count=len(token_times))
        return RunResult(
            Columns(requests),
            segments,
            Columns(self.steps_columns()),
            token_times,
            meta,
            (ids, counts, flat),
        )


def _merge_order(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each value of `first` and of `second` goes in a stable sort of the two together
    (np.argsort(np.concatenate((first, second)), kind="stable"), inverted). Both are usually in
    order already (one worker's steps end in step order): then a merge, without a sort."""
    if (first[1:] >= first[:-1]).all() and (second[1:] >= second[:-1]).all():
        return (
            np.arange(len(first)) + np.searchsorted(second, first, side="left"),
            np.arange(len(second)) + np.searchsorted(first, second, side="right"),
        )
    order = np.argsort(np.concatenate((first, second)), kind="stable")
    place = np.empty(len(order), dtype=np.intp)
    place[order] = np.arange(len(order))
    return place[: len(first)], place[len(first) :]


def _from_rows(rows: list[tuple], names, strings: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Columns of `rows` (tuples in `names` order), typed as pandas' from_records types them:
    numpy's inference for numbers and bools, Python objects for the `strings` columns (pandas
    makes them strings), and object columns when there are no rows at all."""
    if not rows:
        return {name: np.array([], dtype=object) for name in names}
    return {
        name: np.array(col, dtype=object) if name in strings else np.array(col)
        for name, col in zip(names, zip(*rows, strict=True), strict=True)
    }
