"""Tokens over time: the output tokens each request received in a time window (colocated vs
disaggregated side by side), and the run's output tokens per second in bins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from sim.core.trace import RunResult
from sim.runs.run_arrays import all_request_ids, flat_token_times

if TYPE_CHECKING:
    import pandas as pd


def tokens_in_window(run: RunResult, t0_s: float, t1_s: float) -> pd.DataFrame:
    """Per request: output tokens whose emission time t satisfies t0_s <= t < t1_s.

    Columns: request_id, tokens. Every request of the run has a row (0 if it got none).
    """
    import pandas as pd

    if t1_s < t0_s:
        raise ValueError(f"window ends before it starts: t0_s={t0_s}, t1_s={t1_s}")
    ids, times = flat_token_times(run)
    in_window = (times >= t0_s) & (times < t1_s)
    counts = pd.Series(ids[in_window]).value_counts()
    all_ids = all_request_ids(run)
    tokens = counts.reindex(all_ids, fill_value=0).to_numpy(dtype=np.int64)
    return pd.DataFrame({"request_id": all_ids, "tokens": tokens})


def compare_tokens_in_window(
    runs: Mapping[str, RunResult], t0_s: float, t1_s: float
) -> pd.DataFrame:
    """Tokens per request in [t0_s, t1_s) for several runs: index request_id, one column per label.

    A request missing from one run counts 0 tokens there.
    """
    import pandas as pd

    columns = {
        label: tokens_in_window(run, t0_s, t1_s).set_index("request_id")["tokens"]
        for label, run in runs.items()
    }
    if not columns:
        return pd.DataFrame(index=pd.Index([], name="request_id", dtype=np.int64))
    table = pd.DataFrame(columns).fillna(0).astype(np.int64)
    table.index.name = "request_id"
    return table.sort_index()


def throughput_timeseries(run: RunResult, bin_s: float = 1.0) -> pd.DataFrame:
    """Output tokens per second in bins of bin_s seconds, from t = 0 to the last token.

    Columns: t_s (bin start), output_tokens (in the bin), output_tokens_per_s = tokens / bin_s.
    """
    import pandas as pd

    if bin_s <= 0:
        raise ValueError(f"bin_s must be positive, got {bin_s}")
    _, times = flat_token_times(run)
    times = times[~np.isnan(times)]
    if times.size == 0:
        return pd.DataFrame(
            {
                "t_s": np.empty(0),
                "output_tokens": np.empty(0, dtype=np.int64),
                "output_tokens_per_s": np.empty(0),
            }
        )
    bins = np.floor(np.maximum(times, 0.0) / bin_s).astype(np.int64)
    counts = np.bincount(bins)
    return pd.DataFrame(
        {
            "t_s": np.arange(counts.size) * bin_s,
            "output_tokens": counts.astype(np.int64),
            "output_tokens_per_s": counts / bin_s,
        }
    )
