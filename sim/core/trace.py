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
  Speculative decoding: a verify step of 1 + d tokens (d drafts, a accepted) is drawn as an
  `accepted` stretch (tokens = a + 1: the accepted drafts and the target's own token) followed by
  a `rejected` one (tokens = d - a), splitting the step's time in that ratio.

steps     one row per engine step (one model forward pass) per worker
  worker, step, start_s, end_s, prefill_tokens, decode_tokens, batch_size, num_prefills,
  kv_used_tokens, kv_capacity_tokens, compute_s, memory_s, overhead_s, comm_s, swap_s, preempted
  compute_s / memory_s: the part of the step's time the cost model attributes to compute-bound
  and to bandwidth-bound operators (a live run fills them from the calibrated model).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

SEGMENT_KINDS = (
    "queued",
    "prefill",
    "decode",
    "stall",
    "kv_transfer",
    "preempted",
    "cached",
    "accepted",
    "rejected",
)

REQUEST_COLUMNS = (
    "request_id",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "priority",
    "first_token_s",
    "finish_s",
    "ttft_s",
    "tpot_s",
    "max_itl_s",
    "e2e_s",
    "slo_met",
    "preemptions",
    "worker",
    "status",
    "reject_reason",
    "cached_tokens",
)
SEGMENT_COLUMNS = (
    "request_id",
    "worker",
    "kind",
    "start_s",
    "end_s",
    "tokens",
    "slowed",
    "recompute",
    "step_first",
    "step_last",
)
STEP_COLUMNS = (
    "worker",
    "step",
    "start_s",
    "end_s",
    "prefill_tokens",
    "decode_tokens",
    "batch_size",
    "num_prefills",
    "kv_used_tokens",
    "kv_capacity_tokens",
    "compute_s",
    "memory_s",
    "overhead_s",
    "comm_s",
    "swap_s",
    "preempted",
)


class Columns:
    """A table held as numpy columns (name -> array, in column order) until someone asks for it
    as a DataFrame. What the simulator hands over: `python -m sim run --json` reads the summary
    and the requests from the columns and never imports pandas (a third of a 10,000-request
    run's CPU time went to importing pandas and building frames nobody looked at)."""

    __slots__ = ("_data", "_make")

    def __init__(
        self,
        data: dict[str, np.ndarray] | None = None,
        make: Callable[[], dict[str, np.ndarray]] | None = None,
    ) -> None:
        """The columns, or `make`: what builds them when they are first read (a table that a
        `run --json` never reads, such as the segments, is then never built)."""
        self._data, self._make = data, make

    @property
    def data(self) -> dict[str, np.ndarray]:
        if self._data is None:
            self._data, self._make = self._make(), None
        return self._data

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.data, columns=list(self.data))


def _table(name: str) -> property:
    def get(run: RunResult) -> pd.DataFrame:
        table = run._tables[name]
        if isinstance(table, Columns):  # built on first use, then kept
            table = run._tables[name] = table.frame()
        return table

    def put(run: RunResult, frame: pd.DataFrame) -> None:
        run._tables[name] = frame

    return property(get, put, doc=f"The {name} table (a DataFrame; see the module docstring).")


class RunResult:
    """Everything one run produced. `meta` describes the run (see below).

    `requests`, `segments` and `steps` are DataFrames; a run may be handed over with any of
    them as `Columns`, made a DataFrame on first use. `columns(name)` reads a table as numpy
    arrays either way, without making a frame (or importing pandas) when there is none yet.
    A pickled run carries DataFrames, as before (Streamlit's cache pickles runs).
    """

    requests = _table("requests")
    segments = _table("segments")
    steps = _table("steps")

    def __init__(
        self,
        requests: pd.DataFrame | Columns,
        segments: pd.DataFrame | Columns,
        steps: pd.DataFrame | Columns,
        token_times: dict[int, np.ndarray] | None = None,
        meta: dict | None = None,
        token_flat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self._tables = {"requests": requests, "segments": segments, "steps": steps}
        # request_id -> times (s) at which each output token became visible, shape (n_emitted,)
        self.token_times: dict[int, np.ndarray] = {} if token_times is None else token_times
        # The same times as one array, when the recorder made token_times as slices of it:
        # (request ids, tokens of each, every time), in token_times' order. Metrics read it
        # instead of gathering 10,000 slices again (sim/runs/run_arrays.py, `flat_token_times`).
        self.token_flat = token_flat
        # policy, topology, gpu, model, num_gpus, ttft_slo_s, tpot_slo_s, duration_s,
        # workers: {name: {"role": "colocated"|"prefill"|"decode", "gpus": int,
        #                  "kv_capacity_tokens": int}}, config: the run's knobs as a flat dict
        self.meta: dict = {} if meta is None else meta

    def columns(self, name: str) -> Mapping[str, np.ndarray]:
        """Table `name` ("requests", "segments" or "steps") as column name -> numpy array."""
        table = self._tables[name]
        if isinstance(table, Columns):
            return table.data
        return {str(c): table[c].to_numpy() for c in table.columns}

    def has_frame(self, name: str) -> bool:
        """Whether table `name` is a DataFrame already (not columns waiting to become one)."""
        return not isinstance(self._tables[name], Columns)

    def num_rows(self, name: str) -> int:
        table = self._tables[name]
        if isinstance(table, Columns):
            return len(next(iter(table.data.values()), ()))
        return len(table)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_tables"] = {name: getattr(self, name) for name in self._tables}  # as frames
        state["token_flat"] = None  # (token_times holds them; pickled slices are copies)
        return state

    def __setstate__(self, state: dict) -> None:
        self.token_flat = None  # (a run pickled before it existed)
        self.__dict__.update(state)

    def __repr__(self) -> str:
        rows = ", ".join(f"{name}={self.num_rows(name)} rows" for name in self._tables)
        what = ", ".join(f"{k}={self.meta[k]!r}" for k in ("policy", "topology") if k in self.meta)
        return f"RunResult({rows}{', ' if what else ''}{what})"
