"""A run's tables as numpy arrays, and the NaN-aware reductions the metrics modules share.

- `flat_token_times`: every output token's (request id, time s) as two flat arrays.
- `all_request_ids`: the ids of every request a run knows of (its table or its token times).
- `nan_max`, `nan_mean`, `nan_sum`: reductions that skip NaN (and None) as pandas does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from sim.core.trace import RunResult

if TYPE_CHECKING:
    import pandas as pd


def nan_max(values: pd.Series | np.ndarray) -> float:
    """Largest non-NaN value, NaN when there is none."""
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    return float(arr.max()) if arr.size else math.nan


def nan_sum(values: pd.Series | np.ndarray) -> float | int:
    """Sum of the values, NaN (and None) skipped, as pandas' Series.sum adds them."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iub":
        return arr.sum()
    return np.nansum(np.asarray(arr, dtype=float))


def nan_mean(values: pd.Series | np.ndarray) -> float:
    """Mean of the non-NaN values, NaN when there is none."""
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    return float(arr.mean()) if arr.size else math.nan


def flat_token_times(run: RunResult) -> tuple[np.ndarray, np.ndarray]:
    """All token times as two flat arrays: (request_id per token, time s per token).

    Tokens of one request are contiguous and keep their order, so a `np.diff` over the times is
    an inter-token gap wherever the request id does not change.
    """
    if not run.token_times:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=float)
    if run.token_flat is not None:  # (the recorder's own flat copy: the same, already joined)
        ids, counts, times = run.token_flat
        return np.repeat(ids, counts), times
    ids = np.fromiter(run.token_times.keys(), dtype=np.int64, count=len(run.token_times))
    arrays = [np.asarray(times, dtype=float).ravel() for times in run.token_times.values()]
    lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    return np.repeat(ids, lengths), np.concatenate(arrays)


def all_request_ids(run: RunResult) -> np.ndarray:
    """Sorted ids of every request in the requests table or in token_times."""
    ids = run.requests["request_id"].to_numpy(dtype=np.int64)
    extra = np.fromiter(run.token_times.keys(), dtype=np.int64, count=len(run.token_times))
    return np.union1d(ids, extra)
