"""Latency distributions: percentiles of TTFT, TPOT, inter-token and end-to-end latency.

Values keep their unit (seconds for the run's latencies); NaN (e.g. the TPOT of a 1-token answer)
and empty inputs are tolerated.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from sim.core.trace import RunResult
from sim.runs.run_arrays import flat_token_times

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_PERCENTILES = (50, 90, 99)


def percentiles(
    values: Iterable[float] | np.ndarray | pd.Series, ps: Sequence[float] = DEFAULT_PERCENTILES
) -> dict[str, float]:
    """{"p50": ..., "p90": ..., "p99": ...}: linear-interpolated percentiles, NaNs dropped.

    Values keep their unit. An empty (or all-NaN) input gives NaN for every percentile.
    """
    if hasattr(values, "to_numpy"):  # a pandas Series (or Index)
        arr = values.to_numpy(dtype=float, na_value=np.nan)
    else:
        arr = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)
    arr = arr.ravel()
    arr = arr[~np.isnan(arr)]
    keys = [f"p{p:g}" for p in ps]
    if arr.size == 0:
        return dict.fromkeys(keys, math.nan)
    return {key: float(v) for key, v in zip(keys, _linear_percentiles(arr, ps), strict=True)}


def _linear_percentiles(arr: np.ndarray, ps: Sequence[float]) -> np.ndarray:
    """np.percentile(arr, ps) (method "linear", no NaNs), with the same float operations, from
    ONE partition at every index the percentiles need; numpy's own partitions once per call and
    imports numpy.ma on its first (about 35 ms of a 1.3 s CLI run, sim/cli.py)."""
    q = np.true_divide(np.asarray(ps, dtype=float), 100)
    virtual = (arr.size - 1) * q  # numpy's "linear": (n - 1) * quantile
    below = np.floor(virtual)
    lo = below.astype(np.intp)
    hi = np.minimum(lo + 1, arr.size - 1)
    part = np.partition(arr, sorted({*lo.tolist(), *hi.tolist()}))  # (np.unique imports ma)
    a, b = part[lo], part[hi]
    t = virtual - below
    diff = b - a  # numpy's _lerp: from the nearer end, so that t = 1 gives b exactly
    return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)


def itl_values(run: RunResult) -> np.ndarray:
    """All inter-token latencies, s: the gaps between consecutive token times of each request."""
    ids, times = flat_token_times(run)
    if times.size < 2:
        return np.empty(0, dtype=float)
    same_request = ids[1:] == ids[:-1]
    return np.diff(times)[same_request]
